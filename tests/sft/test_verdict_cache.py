"""Cached SFT parity verdicts (sft/verdicts.py): a re-run trusts the shapes an earlier run checked, builds no
reference for them, writes the same bytes, and checks again whatever changed (a new shape, the template, the
rendering options); a run with a real difference vouches for nothing."""

from __future__ import annotations

import hashlib
import json

import chatkit as ck
import pytest

from tokenmill.sft import run as run_module
from tokenmill.sft.report import render_report
from tokenmill.sft.run import run_sft

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory):
    return ck.build_tokenizer_dir(tmp_path_factory.mktemp("tok"))


def _row(i: int, *messages) -> str:
    return json.dumps({"id": f"r{i}", "messages": list(messages)}) + "\n"


def _plain(i: int) -> str:
    return _row(i, {"role": "user", "content": f"Hello {i}"}, {"role": "assistant", "content": f"Hi {i}."})


SYSTEM = _row(100, {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
              {"role": "assistant", "content": "Hello."})


def _run(src, out, tok_dir, **kw):
    return run_sft([str(src)], out=out, tokenizer=str(tok_dir), workers=1, progress=False, **kw)


def _digests(out) -> dict:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(out.iterdir())
            if p.suffix in (".bin", ".idx", ".npy", ".json", ".parquet") and p.name != "manifest.json"}


class _NoReference:
    """Fails any test that builds or uses a reference when the cached verdicts should have made it unneeded."""

    def __getattr__(self, name):
        raise AssertionError(f"the reference was used ({name}) although every shape was trusted")


def test_a_rerun_trusts_checked_shapes_and_writes_the_same_bytes(tok_dir, tmp_path, monkeypatch):
    src = tmp_path / "chats.jsonl"
    src.write_text("".join(_plain(i) for i in range(10)))
    first = _run(src, tmp_path / "a", tok_dir, verify=4)
    assert first["report"]["parity"]["checked"] == 4 and first["report"]["parity"]["skipped_cached"] == 0
    from tokenmill.tokenize import load_tokenizer

    monkeypatch.setitem(run_module._ORACLES, run_module.oracle_key(load_tokenizer(tok_dir)), (_NoReference(), ""))
    second = _run(src, tmp_path / "b", tok_dir, verify=4)
    assert second["report"]["parity"]["checked"] == 0 and second["report"]["parity"]["skipped_cached"] == 4
    assert _digests(tmp_path / "a") == _digests(tmp_path / "b") and _digests(tmp_path / "a")
    line = next(x for x in render_report(second["report"]).splitlines() if "parity vs" in x)
    assert "4 trusted from cached verdicts" in line and "0 identical" not in line, line  # not "nothing checked"


def test_a_new_shape_is_still_checked(tok_dir, tmp_path):
    src = tmp_path / "chats.jsonl"
    src.write_text("".join(_plain(i) for i in range(6)))
    _run(src, tmp_path / "a", tok_dir, verify=2)
    src.write_text("".join(_plain(i) for i in range(6)) + SYSTEM)
    parity = _run(src, tmp_path / "b", tok_dir, verify=2)["report"]["parity"]
    assert parity["checked"] == 1 and parity["shapes_checked"]["system"] == 1 and parity["skipped_cached"] == 2


@pytest.mark.parametrize("change", [{"train_on": "all"}, {"chat_template": "edited"}, {"max_length": 4096}])
def test_what_decides_the_ids_is_checked_again(tok_dir, tmp_path, change):
    from tokenmill.sft.template import CHATML

    src = tmp_path / "chats.jsonl"
    src.write_text("".join(_plain(i) for i in range(6)))
    _run(src, tmp_path / "a", tok_dir, verify=2)
    if change.get("chat_template"):
        edited = tmp_path / "edited.jinja"
        edited.write_text(CHATML + "{# the same output, another template #}")
        change = {"chat_template": str(edited)}
    parity = _run(src, tmp_path / "b", tok_dir, **{"verify": 2, **change})["report"]["parity"]
    assert parity["checked"] == 2 and parity["skipped_cached"] == 0


def test_a_run_with_a_real_difference_caches_nothing(tok_dir, tmp_path, monkeypatch):
    from test_verify_shapes import _OneWrongId

    from tokenmill.tokenize import load_tokenizer

    src = tmp_path / "chats.jsonl"
    src.write_text("".join(_plain(i) for i in range(6)))
    key = run_module.oracle_key(load_tokenizer(tok_dir))
    monkeypatch.setitem(run_module._ORACLES, key, (_OneWrongId(ck.hf_tokenizer(tok_dir)), ""))
    bad = _run(src, tmp_path / "a", tok_dir, verify=8, on_mismatch="reject")
    assert bad["report"]["parity"]["real_differences"] == 1
    monkeypatch.delitem(run_module._ORACLES, key)
    again = _run(src, tmp_path / "b", tok_dir, verify=8)["report"]["parity"]
    assert again["checked"] == 6 and again["skipped_cached"] == 0


def test_a_first_run_checks_what_it_checked_without_a_cache(tok_dir, tmp_path):
    """Verdicts a run records are trusted from the next run on: its own later units still check, so what a run
    checks does not depend on the order its units finish in."""
    src = tmp_path / "chats.jsonl"
    src.write_text("".join(_plain(i) for i in range(40)))
    m = _run(src, tmp_path / "a", tok_dir, verify=2, unit_bytes=1024)
    assert m["run"]["units"] >= 2
    assert m["report"]["parity"]["checked"] == 2 * m["run"]["units"] and m["report"]["parity"]["skipped_cached"] == 0
