"""A template that stamps the current time (``strftime_now``: SmolLM3, Granite 3.3) is rendered at a fixed day,
the ``date`` option (``--date``; 2025-01-01 by default), recorded in the manifest: two renders, and the reference's,
are the same whatever the clock says, so the verification does not stop the run."""

from __future__ import annotations

import json

import chatkit as ck
import pytest
import stockkit as sk

from tokenmill.errors import ConfigError
from tokenmill.sft.render import render_conversation
from tokenmill.sft.run import SftOptions
from tokenmill.sft.template import ChatTemplate, load_template

pytest.importorskip("transformers")

NAME = "HuggingFaceTB-SmolLM3-3B.jinja"
CONV = ck.conv(("user", "Hello there"), ("assistant", "Hi! How are you?"), cid="c")


def test_the_template_is_rendered_at_the_fixed_day(tmp_path):
    _, tok, hf = sk.toks_for(NAME, tmp_path / "tok")
    r, runs = sk.check_render(CONV, NAME, tok, hf)  # ids and masks equal the reference at the same day
    assert "Today Date: 01 January 2025\n" in r.text and runs == ["Hi! How are you?<|im_end|>"]
    other = ChatTemplate(sk.stock_template(NAME), date="2024-02-29")
    assert "Today Date: 29 February 2024\n" in render_conversation(CONV, tokenizer=tok, template=other).text


@pytest.mark.parametrize("name", [NAME, "ibm-granite-granite-3.3-2B-Instruct.jinja"])
def test_a_run_with_a_date_records_it_and_verifies(tmp_path, name):
    from tokenmill.cli import main

    d, _, _ = sk.toks_for(name, tmp_path / "tok")
    src = tmp_path / "chats.jsonl"
    src.write_text(json.dumps({"id": "c", "messages": [{"role": "user", "content": "Hello there"},
                                                       {"role": "assistant", "content": "Hi!"}]}) + "\n")
    out = tmp_path / "out"
    assert main(["sft", str(src), "--out", str(out), "--tokenizer", str(d), "--workers", "1", "--no-progress",
                 "--date", "2024-02-29"]) == 0
    m = json.loads((out / "manifest.json").read_text())
    assert m["config"]["sft"]["date"] == "2024-02-29"
    assert m["counts"]["kept"] == 1 and m["report"]["parity"]["checked"] == 1


def test_a_bad_date_is_a_config_error():
    with pytest.raises(ConfigError, match="ISO 8601"):
        SftOptions(date="29/02/2024")


def test_a_template_that_reads_no_clock_gets_no_clock():
    assert load_template(sk.stock_template("GLM-4.6.jinja")).clock == {}
