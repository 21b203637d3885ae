"""Budgets that keep one record from hanging or exhausting a worker: render size, steps and time, and
too-long messages refused before they reach the tokenizer.

* **Render budget.** A chat template is user code. Each render may take at most ``MAX_RENDER_SECONDS``
  seconds (a timer in the worker's main thread interrupts even a loop that calls nothing), at most
  ``MAX_RENDER_STEPS`` loop steps over ``range`` and calls, and produce at most ``MAX_RENDER_CHARS``
  characters (a string repeated past it is refused before it is built). Past the time or step budget the
  record is rejected as ``template_error`` naming the budget; past the size budget as ``too_long``.
* **Too long before encoding.** No token of a real tokenizer spans more than ``MAX_CHARS_PER_TOKEN``
  characters, so a message longer than ``max_length * MAX_CHARS_PER_TOKEN`` characters can never be part
  of an example that fits. The exchanges holding one are dropped before the first render (truncation
  would drop them anyway, after encoding them at great cost); when the system messages or the final
  exchange hold one, the record is rejected as ``too_long`` without encoding anything.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from jinja2.sandbox import MAX_RANGE, ImmutableSandboxedEnvironment

from tokenmill.errors import TemplateError

MAX_RENDER_CHARS = 8 << 20  # about 2 M tokens: longer than any context window
MAX_RENDER_STEPS = 1_000_000
MAX_RENDER_SECONDS = 10.0
MAX_CHARS_PER_TOKEN = 256


class BudgetExceeded(Exception):
    def __init__(self, message: str, reason: str = "template_error"):
        super().__init__(message)
        self.reason = reason


class _Budget(threading.local):
    steps = 0
    deadline = float("inf")
    session = False  # a render_session of this thread has installed the alarm handler


_BUDGET = _Budget()


def _tick() -> None:
    _BUDGET.steps += 1
    if _BUDGET.steps > MAX_RENDER_STEPS:
        raise BudgetExceeded(f"the render took more than {MAX_RENDER_STEPS:,} steps (step budget)")
    if not _BUDGET.steps & 1023 and time.monotonic() > _BUDGET.deadline:
        raise BudgetExceeded(f"the render took more than {MAX_RENDER_SECONDS:g} s (time budget)")


class CountedRange:
    """``range`` for templates: each step counts against the render's step budget."""

    def __init__(self, *args: int):
        self._range = range(*args)
        if len(self._range) > MAX_RANGE:  # the sandbox's own bound on one range, as jinja2's safe_range
            raise OverflowError(f"range too big: {len(self._range):,} items, the sandbox allows {MAX_RANGE:,}")

    def __iter__(self) -> Iterator[int]:
        for value in self._range:
            _tick()
            yield value

    def __len__(self) -> int:
        return len(self._range)

    def __getitem__(self, index):
        return self._range[index]

    def __reversed__(self) -> Iterator[int]:
        for value in reversed(self._range):
            _tick()
            yield value


_DICT_ATTRIBUTES = frozenset(dir(dict))


class BudgetedSandbox(ImmutableSandboxedEnvironment):
    """The sandbox with every call counted and string or list repetition bounded by the size budget."""

    intercepted_binops = frozenset({"*"})

    def getattr(self, obj: Any, attribute: str) -> Any:
        """``message.role`` on a plain dict: the sandbox tries the attribute first and, a dict having none of
        that name, takes the item in its ``except AttributeError`` (a raised and caught exception for each of
        the ~10 lookups of a message, a third of a render). The same value, or the same undefined, without it."""
        if type(obj) is dict and attribute not in _DICT_ATTRIBUTES:
            try:
                return obj[attribute]
            except KeyError:
                return self.undefined(obj=obj, name=attribute)
        return super().getattr(obj, attribute)

    def call_binop(self, context, operator: str, left: Any, right: Any) -> Any:
        if operator == "*":
            _check_repeat(left, right)
        return super().call_binop(context, operator, left, right)

    def call(__self, __context, __obj, *args, **kwargs):
        _tick()
        return super().call(__context, __obj, *args, **kwargs)


def _check_repeat(left: Any, right: Any) -> None:
    for seq, n in ((left, right), (right, left)):
        if isinstance(seq, (str, list, tuple)) and isinstance(n, int) and len(seq) * n > MAX_RENDER_CHARS:
            raise BudgetExceeded(f"the render would exceed {MAX_RENDER_CHARS:,} characters (size budget)",
                                 reason="too_long")


class render_budget:
    """Steps and time of one render counted from zero; a timer interrupts it past the time budget.

    Outside a :func:`render_session` the alarm is installed, armed and put back for this render. Inside one,
    entering and leaving only set the render's deadline: the session's ticking alarm raises once the
    deadline has passed (no system call per render, and no ``signal.getsignal``, which builds an enum)."""

    __slots__ = ("_timer", "_previous")

    def __enter__(self) -> None:
        _BUDGET.steps, _BUDGET.deadline = 0, time.monotonic() + MAX_RENDER_SECONDS
        self._timer = not _BUDGET.session and _alarm_usable()
        if self._timer:
            self._previous = signal.signal(signal.SIGALRM, _on_alarm)
            signal.setitimer(signal.ITIMER_REAL, MAX_RENDER_SECONDS)

    def __exit__(self, *exc_info: object) -> None:
        _BUDGET.deadline = float("inf")
        if self._timer:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, signal.SIG_DFL if self._previous is None else self._previous)


@contextmanager
def render_session() -> Iterator[None]:
    """Many renders under one alarm: installed once, ticking every :func:`_tick_seconds` until the session
    ends, raising in the render whose deadline has passed; the previous handler is put back at the end."""
    if not _alarm_usable() or _BUDGET.session or signal.getsignal(signal.SIGALRM) is _on_alarm:
        yield
        return
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    _BUDGET.session = True
    tick = _tick_seconds()
    signal.setitimer(signal.ITIMER_REAL, tick, tick)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        _BUDGET.session = False
        signal.signal(signal.SIGALRM, previous)


def _tick_seconds() -> float:
    """How often a session's alarm looks at the render's deadline: a render stops at most this late."""
    return min(0.5, MAX_RENDER_SECONDS / 4)


def _alarm_usable() -> bool:
    """Whether this thread can set the render alarm (signal handlers belong to the main thread)."""
    return threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")


def _on_alarm(signum, frame) -> None:
    if _BUDGET.session and time.monotonic() <= _BUDGET.deadline:
        return  # a session's tick between renders, or within a render's budget
    raise BudgetExceeded(f"the render took more than {MAX_RENDER_SECONDS:g} s (time budget)")


def join_within_budget(chunks: Iterable[str]) -> str:
    """The rendered chunks joined, refusing past the size budget as soon as it is crossed."""
    parts, size = [], 0
    for chunk in chunks:
        size += len(chunk)
        if size > MAX_RENDER_CHARS:
            raise BudgetExceeded(f"the render exceeded {MAX_RENDER_CHARS:,} characters (size budget)",
                                 reason="too_long")
        parts.append(chunk)
    return "".join(parts)


def drop_unfittable(conv: dict, *, max_length: int, exchanges) -> tuple[dict, int]:
    """``conv`` without the oldest exchanges up to the last one holding a message that cannot fit.

    Returns (conversation, exchanges dropped); raises ``TemplateError`` (``too_long``) when a system message
    or the final exchange holds one. ``exchanges`` is the truncation's own grouping function.
    """
    messages = conv.get("messages") or []
    limit = max_length * MAX_CHARS_PER_TOKEN
    huge = [i for i, m in enumerate(messages) if _chars(m) > limit]
    if not huge:
        return conv, 0
    system, groups = exchanges(messages)
    last = max(k for k, g in enumerate(groups) if set(g) & set(huge)) if groups else -1
    if set(system) & set(huge) or last == len(groups) - 1:
        longest = max(_chars(messages[i]) for i in huge)
        raise TemplateError(f"record {conv.get('id', '?')}: a message of {longest:,} characters cannot fit in "
                            f"max_length={max_length} tokens (no token spans more than {MAX_CHARS_PER_TOKEN} "
                            "characters); rejected before encoding", reason="too_long")
    keep = system + [i for g in groups[last + 1:] for i in g]
    return {**conv, "messages": [messages[i] for i in keep]}, last + 1


def _chars(message: dict) -> int:
    """Characters of a message's text, reasoning and tool-call arguments (what a template can render)."""
    total = 0
    for key in ("content", "reasoning", "reasoning_content"):
        value = message.get(key)
        if isinstance(value, str):
            total += len(value)
        elif isinstance(value, list):
            total += sum(len(p.get("text") or "") for p in value if isinstance(p, dict))
    for call in message.get("tool_calls") or []:
        if isinstance(call, dict):
            total += len(str(call.get("arguments") or (call.get("function") or {}).get("arguments") or ""))
    return total
