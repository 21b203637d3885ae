"""The fail-closed checks (sft/failclosed.py): an example that would train nothing, lose its supervision to
truncation, train a turn without its end mark, or train ids that do not decode to the render stops the run by
default, and with ``on_unsafe="reject"`` is rejected, counted by reason in the report and the summary."""

from __future__ import annotations

import json

import chatkit as ck
import pytest

from tokenmill.errors import ConfigError, TemplateError
from tokenmill.sft.render import render_conversation
from tokenmill.sft.report import render_report
from tokenmill.sft.run import run_sft
from tokenmill.sft.template import load_template
from tokenmill.tokenize import load_tokenizer

# eos after the conversation's last reply only, nothing after the others: a turn that text follows has no end mark
EOS_LAST_ONLY = ("{{ bos_token }}{% for m in messages %}{{ m.role + ': ' + m.content + '\n' }}"
                 "{% if loop.last and m.role == 'assistant' %}{{ eos_token }}{% endif %}{% endfor %}"
                 "{% if add_generation_prompt %}{{ 'assistant: ' }}{% endif %}")


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory):
    return ck.build_tokenizer_dir(tmp_path_factory.mktemp("tok"))


def _chat(cid: str, *weights, first: str = "Question") -> dict:
    turns = []
    for k, w in enumerate(weights):
        turns.append({"role": "user", "content": f"{first if k == 0 else 'Question'} {k} of {cid}?"})
        turns.append({"role": "assistant", "content": f"Answer {k} of {cid}.",
                      **({} if w is None else {"loss_weight": w})})
    return {"id": cid, "messages": turns}


def _run(tmp_path, tok_dir, rows, **options):
    src = tmp_path / "chats.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run_sft([str(src)], out=tmp_path / "out", tokenizer=str(tok_dir), workers=1, progress=False, **options)


def _length(tok_dir, row) -> int:
    conv = ck.conv(*[(m["role"], m["content"]) for m in row["messages"]], cid=row["id"])
    return len(render_conversation(conv, tokenizer=load_tokenizer(tok_dir), template=load_template()).ids)


def _late(tok_dir):
    """A conversation whose only weighted turn is in the exchange truncation drops, and a max_length that drops it."""
    row = _chat("late", 1.0, 0.0, first="A long first question " * 20)
    final = _chat("late", 0.0)
    return row, _length(tok_dir, final) + 8


def test_an_example_that_trains_nothing_stops_the_run(tmp_path, tok_dir):
    with pytest.raises(TemplateError, match=r"record zero: no token .* trained.*on-unsafe reject"):
        _run(tmp_path, tok_dir, [_chat("ok", None), _chat("zero", 0.0, 0.0)])


def test_a_truncation_that_removes_every_trained_token_stops_the_run(tmp_path, tok_dir):
    row, max_length = _late(tok_dir)
    assert _length(tok_dir, row) > max_length
    with pytest.raises(TemplateError, match=r"record late: truncation .* dropped every trained token"):
        _run(tmp_path, tok_dir, [row], max_length=max_length)


def test_a_trained_turn_without_an_end_mark_stops_the_run(tmp_path, tok_dir):
    template = tmp_path / "eos_last.jinja"
    template.write_text(EOS_LAST_ONLY)
    rows = [_chat("one", None), _chat("two", None, None)]
    with pytest.raises(TemplateError, match=r"record two: assistant message 1 is trained but no end-of-turn token"):
        _run(tmp_path, tok_dir, rows, chat_template=str(template))
    m = _run(tmp_path, tok_dir, rows, chat_template=str(template), on_unsafe="reject", overwrite=True)
    assert m["counts"]["kept"] == 1 and m["counts"]["rejected"] == {"turn_without_stop": 1}


def test_ids_that_do_not_decode_to_the_render_stop_the_run(tmp_path, tok_dir):
    lower = tmp_path / "lower"
    lower.mkdir()
    spec = json.loads((tok_dir / "tokenizer.json").read_text())
    spec["normalizer"] = {"type": "Lowercase"}  # the model would see "hello" where the template wrote "Hello"
    (lower / "tokenizer.json").write_text(json.dumps(spec))
    (lower / "tokenizer_config.json").write_text((tok_dir / "tokenizer_config.json").read_text())
    with pytest.raises(TemplateError, match=r"record ok: the ids do not decode to the rendered text"):
        _run(tmp_path, lower, [_chat("ok", None)], verify=0)


def test_on_unsafe_reject_rejects_counts_and_goes_on(tmp_path, tok_dir):
    late, max_length = _late(tok_dir)
    m = _run(tmp_path, tok_dir, [_chat("ok", None), _chat("zero", 0.0, 0.0), late], on_unsafe="reject",
             max_length=max_length)
    assert m["counts"]["kept"] == 1
    assert m["counts"]["rejected"] == {"no_trained_tokens": 1, "truncated_away": 1}
    assert m["report"]["unsafe"] == {"no_trained_tokens": 1, "truncated_away": 1}
    assert "fail-closed checks rejected 2 examples: no_trained_tokens 1, truncated_away 1" in render_report(m["report"])


def test_on_unsafe_takes_stop_or_reject(tmp_path, tok_dir):
    with pytest.raises(ConfigError, match="on_unsafe='warn'"):
        _run(tmp_path, tok_dir, [_chat("ok", None)], on_unsafe="warn")
