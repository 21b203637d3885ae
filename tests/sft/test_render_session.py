"""The render alarm's handler installed once per batch: each render is still bounded, and the caller's
SIGALRM handler is back afterwards."""

from __future__ import annotations

import signal

import pytest

from tokenmill.sft import budget
from tokenmill.sft.budget import BudgetExceeded, render_budget, render_session


def _busy() -> None:
    while True:  # calls nothing the step budget counts: only the alarm stops it
        pass


def test_a_render_inside_a_session_is_interrupted_and_the_callers_handler_comes_back(monkeypatch):
    def mine(signum, frame):
        raise AssertionError("the caller's handler must not fire during a render")

    previous = signal.signal(signal.SIGALRM, mine)
    try:
        monkeypatch.setattr(budget, "MAX_RENDER_SECONDS", 0.2)
        with render_session():
            assert signal.getsignal(signal.SIGALRM) is budget._on_alarm
            for _ in range(2):  # the second render is armed again, the handler still in place
                with pytest.raises(BudgetExceeded, match="time budget"), render_budget():
                    _busy()
            assert signal.getsignal(signal.SIGALRM) is budget._on_alarm
        assert signal.getsignal(signal.SIGALRM) is mine
        assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
        with pytest.raises(BudgetExceeded), render_budget():  # outside a session: installed and put back
            _busy()
        assert signal.getsignal(signal.SIGALRM) is mine
    finally:
        signal.signal(signal.SIGALRM, previous)


def test_a_sessions_ticks_stop_only_a_render_past_its_deadline(monkeypatch):
    import time

    monkeypatch.setattr(budget, "MAX_RENDER_SECONDS", 0.4)  # ticks every 0.1 s
    with render_session():
        assert signal.getitimer(signal.ITIMER_REAL)[1] == pytest.approx(0.1)
        for _ in range(3):
            with render_budget():  # within its budget: ticks come and go
                end = time.monotonic() + 0.25
                while time.monotonic() < end:
                    pass
            time.sleep(0.3)  # between renders: a tick finds no deadline
        started = time.monotonic()
        with pytest.raises(BudgetExceeded, match="time budget"), render_budget():
            _busy()
        assert time.monotonic() - started < 2.0  # stopped by a tick past the deadline (0.4 s), not left running
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
