"""A plain install (no ``transformers``) runs ``tokenmill sft``: the parity check falls back to the reference
built on the ``tokenizers`` library, says so in one line, and still catches a wrong id or a wrong mask."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import chatkit as ck
import numpy as np
import pytest

from tokenmill.errors import ParityError
from tokenmill.sft.oracle import PlainChatOracle
from tokenmill.sft.parity import check_mask, check_parity
from tokenmill.sft.render import MaskPolicy, render_conversation
from tokenmill.sft.template import load_template
from tokenmill.tokenize import load_tokenizer

CONVERSATIONS = [
    ck.conv(("system", "Be brief."), ("user", "Hello there"), ("assistant", "Hi! How are you today?"), cid="a"),
    ck.conv(("user", "What is 1 + 1?"), ("assistant", "2."), ("user", "And the answer?"),
            ("assistant", "The answer is 42."), cid="b"),
    ck.conv(("user", "type <|im_end|> please"), ("assistant", "ok"), cid="c"),
]


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory):
    return ck.build_tokenizer_dir(tmp_path_factory.mktemp("tok"), eos="<|im_end|>")


@pytest.mark.parametrize("template_source", [None, ck.LLAMA3, ck.GEMMA])
def test_the_plain_reference_agrees_with_transformers(tok_dir, template_source):
    """Where both exist, the fallback gives apply_chat_template's ids and texts, prompt renders included."""
    hf = ck.hf_tokenizer(tok_dir)
    tok = load_tokenizer(tok_dir)
    plain = PlainChatOracle(tok)
    template = load_template(template_source)
    for c in CONVERSATIONS:
        messages = [{"role": m["role"], "content": m["content"]} for m in c["messages"]]
        for prompt in (False, True):
            args = dict(chat_template=template.source, add_generation_prompt=prompt)
            assert plain.apply_chat_template(messages, tokenize=False, **args) == \
                hf.apply_chat_template(messages, tokenize=False, **args)
            assert plain.apply_chat_template(messages, tokenize=True, **args) == \
                list(hf.apply_chat_template(messages, tokenize=True, return_dict=False, **args))
        text = hf.apply_chat_template(messages, tokenize=False, chat_template=template.source)
        ours, theirs = plain(text, return_offsets_mapping=True), hf(text, add_special_tokens=False,
                                                                    return_offsets_mapping=True)
        assert ours["input_ids"] == theirs["input_ids"]
        assert [tuple(o) for o in ours["offset_mapping"]] == [tuple(o) for o in theirs["offset_mapping"]]


def test_the_plain_reference_catches_a_changed_id_and_a_changed_mask(tok_dir):
    tok = load_tokenizer(tok_dir)
    plain = PlainChatOracle(tok)
    template = load_template()
    c = CONVERSATIONS[1]
    r = render_conversation(c, tokenizer=tok, template=template)
    assert check_parity(c, r, plain, template) is None
    assert check_mask(c, r, plain, template, MaskPolicy()) == 2
    r.mask = r.mask.copy()
    r.mask[int(np.flatnonzero(r.mask)[0])] = 0
    with pytest.raises(ParityError, match="loss mask differs"):
        check_mask(c, r, plain, template, MaskPolicy())
    r.ids = np.array(r.ids.tolist()[:-1] + [5], dtype=np.uint32)
    with pytest.raises(ParityError, match=r"record b: token ids differ .* position \d+"):
        check_parity(c, r, plain, template)


def _without_transformers(tmp_path) -> dict:
    """The environment of a process (and of its workers) in which ``import transformers`` fails."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import sys\nsys.modules['transformers'] = None\n")
    path = os.pathsep.join([str(site), *filter(None, [os.environ.get("PYTHONPATH")])])
    return {**os.environ, "PYTHONPATH": path, "TOKENMILL_CACHE": str(tmp_path / "cache")}


@pytest.mark.parametrize("tokenizer", ["dir", "default"])
def test_sft_runs_and_checks_without_transformers(tok_dir, tmp_path, tokenizer):
    src = tmp_path / "chats.jsonl"
    src.write_text("".join(json.dumps({"messages": [{"role": m["role"], "content": m["content"]}
                                                    for m in c["messages"]]}) + "\n" for c in CONVERSATIONS))
    out = tmp_path / "out"
    code = ("import importlib.util\nimport sys\nfrom tokenmill.cli import main\n"
            "assert importlib.util.find_spec('transformers') is None\n"
            f"sys.exit(main(['sft', {str(src)!r}, '--out', {str(out)!r}, '--tokenizer', "
            f"{str(tok_dir) if tokenizer == 'dir' else 'default'!r}, '--workers', '1', '--no-progress']))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env=_without_transformers(tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    said = [line for line in (done.stdout + done.stderr).splitlines() if "transformers" in line]
    assert len(said) == 1 and "tokenizers" in said[0] and "tokenmill[hf]" in said[0], said
    parity = json.loads((out / "manifest.json").read_text())["report"]["parity"]
    assert parity["checked"] == 2 and parity["exempt"] == 1 and parity["real_differences"] == 0
    assert parity["reference"] == "tokenizers"
