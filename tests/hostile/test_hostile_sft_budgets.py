"""15.8 and 15.9: a huge message or a runaway template costs one reject, not the worker."""

from __future__ import annotations

import json
import time

import hostilekit as hk

from tokenmill.sft.run import run_sft


def _chat(i: int, answer: str = "", user: str = "") -> dict:
    return {"id": f"c{i}", "messages": [{"role": "user", "content": user or f"question {i}?"},
                                        {"role": "assistant", "content": answer or f"answer {i}."}]}


def _write(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _sft(path, out, **kw):
    return run_sft([str(path)], out=str(out), tokenizer="default", workers=1, verify=0, progress=False, **kw)


def test_a_20mb_message_is_too_long_before_encoding(tmp_path):
    rows = [_chat(0), _chat(1, answer="word " * 4_000_000), _chat(2)]
    src = _write(tmp_path / "in" / "chats.jsonl", rows)
    started = time.monotonic()
    manifest = _sft(src, tmp_path / "out", max_length=4096)
    assert manifest["counts"]["kept"] == 2 and manifest["counts"]["rejected"] == {"too_long": 1}
    assert "before encoding" in hk.rejects(tmp_path / "out")[0]["detail"]
    assert time.monotonic() - started < 60


def test_an_old_huge_exchange_is_dropped_without_encoding(tmp_path):
    conv = {"id": "c0", "messages": [
        {"role": "user", "content": "1, " * 6_000_000}, {"role": "assistant", "content": "too much."},
        {"role": "user", "content": "short question?"}, {"role": "assistant", "content": "short answer."}]}
    src = _write(tmp_path / "in" / "chats.jsonl", [conv])
    out = tmp_path / "out"
    result = hk.cli("sft", src, "--out", out, "--max-length", "512", "--verify", "0", "--workers", "1",
                    "--no-progress", timeout=200)
    assert result.returncode == 0, result.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["counts"]["kept"] == 1
    # encoding the 18 MB message before dropping it took well over a gigabyte
    assert manifest["run"]["peak_rss"]["main_mb"] < 1000, manifest["run"]["peak_rss"]


def test_a_huge_render_without_max_length_is_capped(tmp_path):
    src = _write(tmp_path / "in" / "chats.jsonl", [_chat(0), _chat(1, answer="x" * 12_000_000)])
    manifest = _sft(src, tmp_path / "out")
    assert manifest["counts"]["rejected"] == {"too_long": 1}
    assert "size budget" in hk.rejects(tmp_path / "out")[0]["detail"]


LOOPING = ("{% for message in messages %}{% if 'loop?' in message.content %}{% for i in range(100000) %}"
           "{% for j in range(100000) %}{% endfor %}{% endfor %}{% endif %}"
           "<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n{% endfor %}")
BLOATING = ("{% for message in messages %}<|im_start|>{{ message.role }}\n{{ message.content }}"
            "{{ 'x' * 200000000 if 'bloat?' in message.content else '' }}<|im_end|>\n{% endfor %}")


def test_a_template_looping_forever_is_a_template_error_naming_the_budget(tmp_path):
    src = _write(tmp_path / "in" / "chats.jsonl", [_chat(0, user="loop?"), _chat(1)])
    template = tmp_path / "loop.jinja"
    template.write_text(LOOPING)
    started = time.monotonic()
    manifest = _sft(src, tmp_path / "out", chat_template=str(template))
    assert time.monotonic() - started < 60
    assert manifest["counts"]["rejected"] == {"template_error": 1} and manifest["counts"]["kept"] == 1
    assert "budget" in hk.rejects(tmp_path / "out")[0]["detail"]


def test_a_template_that_always_loops_rejects_every_record_naming_the_budget(tmp_path):
    """Calibration cannot render the template either; that no longer aborts the run: each record is a
    counted ``template_error`` naming the budget, and the run ends in bounded time without a traceback."""
    src = _write(tmp_path / "in" / "chats.jsonl", [_chat(0)])
    template = tmp_path / "loop.jinja"
    template.write_text(LOOPING.replace("'loop?' in message.content", "true"))
    result = hk.cli("sft", src, "--out", tmp_path / "out", "--chat-template", template, "--verify", "0",
                    "--workers", "1", "--no-progress", timeout=120)
    assert "Traceback" not in result.stderr
    if result.returncode == 0:
        rejects = hk.rejects(tmp_path / "out")
        assert [r["reason"] for r in rejects] == ["template_error"] and "budget" in rejects[0]["detail"]
    else:
        assert "budget" in result.stderr


def test_a_template_rendering_200mb_is_refused_before_it_is_built(tmp_path):
    src = _write(tmp_path / "in" / "chats.jsonl", [_chat(0), _chat(1, user="bloat?")])
    template = tmp_path / "bloat.jinja"
    template.write_text(BLOATING)
    manifest = _sft(src, tmp_path / "out", chat_template=str(template))
    assert manifest["counts"]["kept"] == 1 and manifest["counts"]["rejected"] == {"too_long": 1}
