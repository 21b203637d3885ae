"""A template that cannot render tools (Qwen2-instruct's, as the tutorial uses it) on a tool-call file: each
reject's detail says what the template lacks, and the summary says it once, with the count. A template that
does not compile, or fails on every record of the sample, stops the run before any work (exit 1)."""

from __future__ import annotations

import json
from pathlib import Path

import chatkit as ck
import pytest

from tokenmill.cli import main

pytest.importorskip("transformers")

# Qwen2-1.5B-Instruct's chat template (tokenizer_config.json): it reads only `content`, knows no tools.
QWEN2 = ("{% set system_message = 'You are a helpful assistant.' %}{% if messages[0]['role'] == 'system' %}"
         "{% set system_message = messages[0]['content'] %}{% endif %}{% if system_message is defined %}"
         "{{ '<|im_start|>system\n' + system_message + '<|im_end|>\n' }}{% endif %}{% for message in messages %}"
         "{% set content = message['content'] %}{% if message['role'] == 'user' %}"
         "{{ '<|im_start|>user\n' + content + '<|im_end|>\n<|im_start|>assistant\n' }}"
         "{% elif message['role'] == 'assistant' %}{{ content + '<|im_end|>' + '\n' }}{% endif %}{% endfor %}")
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather.",
                                           "parameters": {"type": "object", "properties": {}}}}]


def _rows(tool_rows: int, plain_rows: int) -> list[dict]:
    call = {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
                                                 "function": {"name": "get_weather", "arguments": "{}"}}]}
    tools = [{"id": f"t{i}", "tools": TOOLS, "messages": [{"role": "user", "content": f"Weather {i}?"}, call,
              {"role": "tool", "content": "Sunny."}, {"role": "assistant", "content": "It is sunny."}]}
             for i in range(tool_rows)]
    plain = [{"id": f"p{i}", "messages": [{"role": "user", "content": f"hi {i}"},
                                          {"role": "assistant", "content": "hello"}]} for i in range(plain_rows)]
    return [r for pair in zip(plain, tools) for r in pair] + plain[len(tools):] + tools[len(plain):]


@pytest.fixture()
def setup(tmp_path):
    tok = ck.build_tokenizer_dir(tmp_path / "tok", eos="<|im_end|>")
    tpl = tmp_path / "qwen2.jinja"
    tpl.write_text(QWEN2)
    return tmp_path, tok, tpl


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_a_template_without_tools_says_so_once_with_the_count(setup, capsys):
    tmp, tok, tpl = setup
    src = _write(tmp / "tools.jsonl", _rows(12, 12))
    assert main(["sft", src, "--tokenizer", str(tok), "--chat-template", str(tpl), "--out", str(tmp / "out"),
                 "--workers", "1", "--no-progress"]) == 0
    printed = capsys.readouterr().out
    line = next(x for x in printed.splitlines() if "does not render" in x)
    assert "12" in line and "`tools`" in line and "use one that does" in line
    assert sum("does not render" in x for x in printed.splitlines()) == 1
    rejects = [json.loads(x) for x in (tmp / "out" / "rejects.jsonl").read_text().splitlines()]
    assert len(rejects) == 12
    assert all("this chat template does not render `tools`" in r["detail"] for r in rejects), rejects[0]["detail"]
    manifest = json.loads((tmp / "out" / "manifest.json").read_text())
    assert sum(manifest["report"]["template_lacks"].values()) == 12


def test_a_message_less_template_error_still_says_something(setup):
    from tokenmill.errors import TemplateError
    from tokenmill.sft.render import render_conversation
    from tokenmill.sft.template import load_template
    from tokenmill.tokenize import load_tokenizer

    _, tok, _ = setup
    template = load_template("{%- for m in messages %}{{ raise_exception('') }}{%- endfor %}")
    with pytest.raises(TemplateError, match="raised without a message"):
        render_conversation(ck.conv(("user", "hi"), ("assistant", "yo")), tokenizer=load_tokenizer(tok),
                            template=template)


def test_a_template_that_does_not_compile_stops_before_any_work(setup, capsys):
    tmp, tok, _ = setup
    bad = tmp / "bad.jinja"
    bad.write_text("{% for m in messages %}{{ m.content }")
    src = _write(tmp / "chats.jsonl", _rows(0, 5))
    assert main(["sft", src, "--tokenizer", str(tok), "--chat-template", str(bad), "--out", str(tmp / "out"),
                 "--workers", "1", "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "does not compile" in err and "Traceback" not in err
    assert not (tmp / "out" / "manifest.json").exists()


def test_a_template_failing_alike_on_every_record_stops_before_any_work(setup, capsys):
    tmp, tok, tpl = setup
    src = _write(tmp / "tools.jsonl", _rows(20, 0))  # only tool calls: Qwen2's template renders none of them
    assert main(["sft", src, "--tokenizer", str(tok), "--chat-template", str(tpl), "--out", str(tmp / "out"),
                 "--workers", "1", "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "fails on every one of the first 16 records the same way" in err and "does not render `tools`" in err
    assert not (tmp / "out" / "manifest.json").exists()
    raising = tmp / "raising.jinja"
    raising.write_text("{%- for m in messages %}{{ raise_exception('this template takes no ' + m.role) }}"
                       "{%- endfor %}")
    src = _write(tmp / "chats.jsonl", _rows(0, 5))
    assert main(["sft", src, "--tokenizer", str(tok), "--chat-template", str(raising), "--out",
                 str(tmp / "out2"), "--workers", "1", "--no-progress"]) == 1
    assert "this template takes no user" in capsys.readouterr().err


def test_an_example_the_packer_drops_is_counted_in_the_summary_and_manifest(setup, capsys):
    tmp, tok, _ = setup
    rows = [{"id": f"c{i}", "messages": [{"role": "user", "content": f"hi {i}"},
                                         {"role": "assistant", "content": "hello there"}]} for i in range(6)]
    rows.append({"id": "long", "messages": [{"role": "user", "content": "tell me"},
                                            {"role": "assistant", "content": "the quick brown fox " * 60}]})
    src = _write(tmp / "chats.jsonl", rows)
    assert main(["sft", src, "--tokenizer", str(tok), "--out", str(tmp / "out"), "--seq-len", "64",
                 "--workers", "1", "--no-progress"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if "packing at seq_len 64" in x)
    assert "1 example longer than 64 tokens dropped" in line, line
    packing = json.loads((tmp / "out" / "manifest.json").read_text())["report"]["packing"]
    assert packing["dropped_over_length"] == 1 and packing["empty"] == 0


def test_a_template_needing_tools_says_so_for_a_record_without(setup):
    from tokenmill.errors import TemplateError
    from tokenmill.sft.render import render_conversation
    from tokenmill.sft.template import load_template
    from tokenmill.tokenize import load_tokenizer

    hermes3 = Path(__file__).parent / "fixtures" / "hermes3_tool_use.jinja"
    _, tok, _ = setup
    with pytest.raises(TemplateError, match="renders only with a tool list"):
        render_conversation(ck.conv(("user", "hi"), ("assistant", "yo")), tokenizer=load_tokenizer(tok),
                            template=load_template(hermes3))


def test_the_preflight_renders_without_building_an_encoder(setup):
    """The preflight runs in the main process before the workers start: it renders its sample and encodes
    nothing, so it builds no encoder there (the workers build their own, or find the fork server's)."""
    from tokenmill.job.inputs import plan_inputs
    from tokenmill.job.options import JobOptions
    from tokenmill.job.run import Run
    from tokenmill.sft.preflight import preflight
    from tokenmill.sft.render import MaskPolicy
    from tokenmill.sft.template import load_template
    from tokenmill.tokenize import load_tokenizer

    tmp, tok, tpl = setup
    src = _write(tmp / "tools.jsonl", _rows(20, 0))
    tokenizer = load_tokenizer(str(tok))
    tokenizer.release()
    run = Run(None, plan_inputs("sft", [src]), tmp / "out", None, JobOptions(), tokenizer, {}, 0.0)
    with pytest.raises(Exception, match="fails on every one of the first 16 records"):
        preflight(load_template(str(tpl)), run, policy=MaskPolicy(), allow_consecutive=False)
    assert tokenizer._fast is None and tokenizer._ref is None and "_piece_table" not in tokenizer.__dict__


def _tool_list_rows(n: int, plain: int) -> list[dict]:
    """``n`` conversations that offer a tool list and call none of it, then ``plain`` ones without tools."""
    offered = [{"id": f"o{i}", "tools": TOOLS, "messages": [
        {"role": "user", "content": f"Can you check the weather {i}?"},
        {"role": "assistant", "content": "I can call get_weather for that."}]} for i in range(n)]
    return offered + _rows(0, plain)


def test_a_tool_list_the_template_cannot_show_is_rejected_and_said_once(setup, capsys):
    """Qwen2's template renders the conversation without its tool list: the model would learn to mention a
    function it never saw. Rejected as ``tools_not_rendered``, said once with the count."""
    tmp, tok, tpl = setup
    src = _write(tmp / "offered.jsonl", _tool_list_rows(5, 20))
    assert main(["sft", src, "--tokenizer", str(tok), "--chat-template", str(tpl), "--out", str(tmp / "out"),
                 "--workers", "1", "--no-progress"]) == 0
    printed = capsys.readouterr().out.splitlines()
    said = [x for x in printed if "does not render `tools`" in x]
    assert len(said) == 1 and "rejected 5 records" in said[0], printed
    rejects = [json.loads(x) for x in (tmp / "out" / "rejects.jsonl").read_text().splitlines()]
    assert sorted(r["raw"]["id"] for r in rejects) == [f"o{i}" for i in range(5)]
    assert {r["reason"] for r in rejects} == {"tools_not_rendered"}
    assert all("does not render `tools`" in r["detail"] for r in rejects), rejects[0]["detail"]
    manifest = json.loads((tmp / "out" / "manifest.json").read_text())
    assert manifest["counts"]["rejected"] == {"tools_not_rendered": 5} and manifest["counts"]["kept"] == 20
    assert manifest["report"]["template_lacks"] == {"`tools`": 5}


def test_keep_unrendered_tools_keeps_them_and_counts_them(setup, capsys):
    tmp, tok, tpl = setup
    src = _write(tmp / "offered.jsonl", _tool_list_rows(5, 20))
    assert main(["sft", src, "--tokenizer", str(tok), "--chat-template", str(tpl), "--out", str(tmp / "out"),
                 "--workers", "1", "--no-progress", "--keep-unrendered-tools"]) == 0
    printed = capsys.readouterr().out.splitlines()
    said = [x for x in printed if "does not render `tools`" in x]
    assert len(said) == 1 and "kept 5 records" in said[0] and "without" in said[0], printed
    manifest = json.loads((tmp / "out" / "manifest.json").read_text())
    assert manifest["counts"]["kept"] == 25 and not manifest["counts"]["rejected"]
    assert manifest["report"]["tools_not_rendered_kept"] == {"`tools`": 5}


def test_a_sample_whose_every_tool_list_is_lost_stops_before_any_work(setup, capsys):
    tmp, tok, tpl = setup
    src = _write(tmp / "offered.jsonl", _tool_list_rows(20, 0))
    assert main(["sft", src, "--tokenizer", str(tok), "--chat-template", str(tpl), "--out", str(tmp / "out"),
                 "--workers", "1", "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "fails on every one of the first 16 records" in err and "does not render `tools`" in err, err
    assert not (tmp / "out" / "manifest.json").exists()


@pytest.mark.realdata
def test_real_glaive_records_offering_tools_without_a_call_are_rejected(setup, shared_data, capsys):
    """LLaMA-Factory's Glaive tool-call demo under Qwen2's template: the records that offer tools and call none
    (38 of 300) rendered fine and were trained without their tools."""
    tmp, tok, tpl = setup
    path = shared_data / "sft" / "llamafactory_glaive_toolcall_en_demo.json"
    rows = json.loads(path.read_text(encoding="utf-8"))
    offered = sum(1 for r in rows if r.get("tools") and json.loads(r["tools"])
                  and not any(m["from"] == "function_call" for m in r["conversations"]))
    assert main(["sft", str(path), "--tokenizer", str(tok), "--chat-template", str(tpl), "--out", str(tmp / "out"),
                 "--workers", "1", "--no-progress", "--verify", "0"]) == 0
    counts = json.loads((tmp / "out" / "manifest.json").read_text())["counts"]
    assert offered > 0 and counts["rejected"].get("tools_not_rendered") == offered, counts
