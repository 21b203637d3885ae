"""The end mark a template writes after a reply is trained, whatever it is for that turn: ``<|im_end|>`` between
turns and ``eos_token`` after the last one (Ai2's OLMo template in open-instruct), ``eos_token`` after the last
reply only (open-instruct's ``simple_chat``), ``<|return|>`` after gpt-oss's final answer. A template that ends
no turn with a control token is refused, or with ``allow_untrained_stop`` warned about."""

from __future__ import annotations

import chatkit as ck
import pytest
import stockkit as sk

from tokenmill.errors import TemplateError
from tokenmill.sft.render import check_stop_token, render_conversation
from tokenmill.sft.template import load_template

pytest.importorskip("transformers")

TWO_TURNS = ck.conv(("user", "Hello there"), ("assistant", "Hi! How are you?"), ("user", "Fine."),
                    ("assistant", "The answer is 42."), cid="two")


def test_olmo_trains_im_end_between_turns_and_eos_after_the_last(tmp_path):
    name = "open-instruct-olmo.jinja"
    _, tok, hf = sk.toks_for(name, tmp_path / "tok")
    r, runs = sk.check_render(TWO_TURNS, name, tok, hf)
    assert runs == ["Hi! How are you?<|im_end|>", "The answer is 42.<|endoftext|>"]
    assert r.stats["stop_token_trained"]


def test_eos_written_after_the_last_reply_only_is_trained(tmp_path):
    name = "open-instruct-simple_chat.jinja"
    _, tok, hf = sk.toks_for(name, tmp_path / "tok")
    r, runs = sk.check_render(TWO_TURNS, name, tok, hf)
    assert runs == [" Hi! How are you?", " The answer is 42.</s>"]
    assert r.stats["stop_token_trained"]
    check_stop_token(load_template(sk.stock_template(name)), tok)  # the last turn's eos is a stop: no refusal


def test_gpt_oss_final_answer_trains_return(tmp_path):
    name = "openai-gpt-oss-120b.jinja"
    _, tok, hf = sk.toks_for(name, tmp_path / "tok")
    r = render_conversation(TWO_TURNS, tokenizer=tok, template=load_template(sk.stock_template(name)))
    runs = [hf.decode(run) for run in ck.trained_runs(r.ids, r.mask)]
    assert runs[0].endswith("How are you?<|end|>") and runs[-1].endswith("The answer is 42.<|return|>")
    assert r.stats["stop_token_trained"]


# open-instruct's simple_chat without its eos line: a template that writes no end mark after any reply
NO_STOP = ("{% for message in messages %}{{ '\\n\\n' if not loop.first else '' }}"
           "{{ message['role'].capitalize() + ': ' + message['content'] }}{% endfor %}")


def test_a_template_ending_no_turn_with_a_control_token_is_refused(tmp_path):
    _, tok, _ = sk.toks_for("open-instruct-simple_chat.jinja", tmp_path / "tok")
    template = load_template(NO_STOP)
    with pytest.raises(TemplateError, match="ends no assistant turn, the last one included"):
        check_stop_token(template, tok)
    with pytest.warns(UserWarning, match="going on"):
        check_stop_token(template, tok, allow=True)


def test_a_run_with_such_a_template_stops_before_work(tmp_path):
    import json

    from tokenmill.sft.run import run_sft

    d, _, _ = sk.toks_for("open-instruct-simple_chat.jinja", tmp_path / "tok")
    src = tmp_path / "chats.jsonl"
    src.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"},
                                            {"role": "assistant", "content": "yo"}]}) + "\n")
    (tmp_path / "t.jinja").write_text(NO_STOP)
    with pytest.raises(TemplateError, match="ends no assistant turn"):
        run_sft([str(src)], out=tmp_path / "out", tokenizer=str(d), chat_template=str(tmp_path / "t.jinja"),
                workers=1, progress=False)
    with pytest.warns(UserWarning, match="going on"):
        m = run_sft([str(src)], out=tmp_path / "out2", tokenizer=str(d), chat_template=str(tmp_path / "t.jinja"),
                    workers=1, progress=False, allow_untrained_stop=True)
    assert m["report"]["stop_token_trained"] == 0
