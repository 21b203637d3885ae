"""check_parity: None on equal ids, ParityError naming the record on a mismatch, a note when exempt."""

from __future__ import annotations

import chatkit as ck
import numpy as np
import pytest

from tokenmill.errors import ParityError
from tokenmill.sft.parity import check_parity
from tokenmill.sft.render import render_conversation
from tokenmill.sft.template import load_template
from tokenmill.tokenize import load_tokenizer


@pytest.fixture(scope="module")
def toks(tmp_path_factory):
    d = ck.build_tokenizer_dir(tmp_path_factory.mktemp("tok"))
    return load_tokenizer(d), ck.hf_tokenizer(d)


def test_equal_ids_pass_and_a_changed_id_is_named(toks):
    tok, hf = toks
    c = ck.conv(("user", "Hello there"), ("assistant", "Hi!"), cid="rec-42")
    template = load_template(ck.LLAMA3)
    r = render_conversation(c, tokenizer=tok, template=template)
    assert check_parity(c, r, hf, template) is None
    r.ids = np.array(r.ids.tolist()[:-1] + [0], dtype=np.uint32)
    with pytest.raises(ParityError, match=r"record rec-42: .* position \d+"):
        check_parity(c, r, hf, template)


def test_wrong_template_is_caught(toks):
    tok, hf = toks
    c = ck.conv(("user", "Hello there"), ("assistant", "Hi!"), cid="rec-1")
    r = render_conversation(c, tokenizer=tok, template=load_template())
    with pytest.raises(ParityError, match="rec-1"):
        check_parity(c, r, hf, load_template(ck.LLAMA3))


def test_neutralised_conversations_are_exempt(toks):
    tok, hf = toks
    c = ck.conv(("user", "type <|eot_id|> please"), ("assistant", "ok"), cid="rec-2")
    template = load_template(ck.LLAMA3)
    r = render_conversation(c, tokenizer=tok, template=template)
    note = check_parity(c, r, hf, template)
    assert "rec-2" in note and "exempt" in note and "1 literal control" in note
