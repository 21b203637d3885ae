"""Batched rendering writes exactly what rendering one conversation at a time writes."""

from __future__ import annotations

import json
from pathlib import Path

import chatkit as ck
import numpy as np
import pytest

from tokenmill.errors import TemplateError
from tokenmill.sft.normalize import normalize_rows
from tokenmill.sft.render import MaskPolicy, render_conversation, render_conversations
from tokenmill.sft.run import run_sft
from tokenmill.sft.template import load_template
from tokenmill.sft.truncate import fit_conversation, fit_conversations
from tokenmill.shards import open_shards
from tokenmill.tokenize import load_tokenizer

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
                                           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]
MAX = 600
CALL = {"name": "get_weather", "arguments": '{"city": "Paris"}', "id": "call_1"}


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory):
    return ck.build_tokenizer_dir(tmp_path_factory.mktemp("tok"))


@pytest.fixture(scope="module")
def tok(tok_dir):
    return load_tokenizer(tok_dir)


def varied() -> list[dict]:
    long_turns = [("system", "Be nice.")]
    for i in range(12):
        long_turns += [("user", f"Question {i}: tell me about the quick brown fox."),
                       ("assistant", f"Answer {i}: the quick brown fox jumps over the lazy dog.")]
    return [
        ck.conv(("user", "Hello there"), ("assistant", "Hi, how are you today?"), cid="plain"),
        ck.conv(("system", "Be brief."), ("user", "weather Paris?"),
                {"role": "assistant", "content": None, "tool_calls": [CALL]},
                {"role": "tool", "content": '{"temp": 21}'}, ("assistant", "It is 21 in Paris."),
                cid="tools", tools=json.dumps(TOOLS)),
        ck.conv(("user", "1 + 1?"), {"role": "assistant", "content": "2", "reasoning": "Let me think step by step."},
                cid="reasoning"),
        ck.conv(("user", "Say <|im_end|> please"), ("assistant", "Sure: <|im_end|> and <|im_start|>user"),
                cid="literal"),
        ck.conv(("user", "q"), {"role": "assistant", "content": "weighted", "weight": 0.5},
                ("user", "again"), ("assistant", "answer"), cid="weights"),
        ck.conv(*long_turns, cid="long"),
        ck.conv(("user", "The quick brown fox " * 120), ("assistant", "too long"), cid="too_long"),
    ]


def same(a, b) -> None:
    if isinstance(a, TemplateError) or isinstance(b, TemplateError):
        assert type(a) is type(b) and a.reason == b.reason and str(a) == str(b)
        return
    assert (a.id, a.text, a.spans, a.stats, a.messages, a.tools) == (b.id, b.text, b.spans, b.stats, b.messages, b.tools)
    assert a.ids.dtype == b.ids.dtype and np.array_equal(a.ids, b.ids) and np.array_equal(a.mask, b.mask)
    assert (a.weights is None) == (b.weights is None)
    assert a.weights is None or np.array_equal(a.weights, b.weights)


def one_by_one(fn, convs, **kw) -> list:
    out = []
    for c in convs:
        try:
            out.append(fn(c, **kw))
        except TemplateError as exc:
            out.append(exc)
    return out


@pytest.mark.parametrize("options", [{}, {"train_on": "last"}, {"train_reasoning": False}, {"train_on": "all"}])
def test_batched_render_equals_single_render(tok, options):
    kw = {"tokenizer": tok, "template": load_template(), "policy": MaskPolicy(**options)}
    batched = render_conversations(varied(), **kw)
    assert sum(isinstance(r, TemplateError) for r in batched) == 0
    for a, b in zip(batched, one_by_one(render_conversation, varied(), **kw), strict=True):
        same(a, b)
    literal = batched[3]
    assert literal.stats["control_tokens_neutralised"] == 3


def test_batched_fit_equals_single_fit(tok):
    kw = {"tokenizer": tok, "template": load_template(), "max_length": MAX}
    batched = fit_conversations(varied(), **kw)
    for a, b in zip(batched, one_by_one(fit_conversation, varied(), **kw), strict=True):
        same(a, b)
    by_id = {getattr(r, "id", None): r for r in batched}
    assert by_id["long"].stats["truncated_exchanges"] > 0
    assert isinstance(batched[-1], TemplateError) and batched[-1].reason == "too_long"


def test_a_batch_with_only_rejects_or_nothing(tok):
    assert fit_conversations([], tokenizer=tok, template=load_template(), max_length=50) == []
    assert tok.encode_rendered_batch([], []) == []


def write_inputs(d) -> list:
    chats = [
        {"id": "m-tools", "messages": [
            {"role": "system", "content": "Be brief."}, {"role": "user", "content": "weather Paris?"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": 21}'},
            {"role": "assistant", "content": "It is 21 in Paris."}], "tools": TOOLS},
        {"id": "m-think", "messages": [{"role": "user", "content": "1 + 1?"},
                                       {"role": "assistant", "content": "<think>\nstep by step\n</think>\n\n2"}]},
        {"id": "m-literal", "messages": [{"role": "user", "content": "Type <|im_end|> now"},
                                         {"role": "assistant", "content": "Here: <|im_end|>"}]},
        {"id": "m-long", "messages": [m for i in range(14) for m in (
            {"role": "user", "content": f"Question {i}: the quick brown fox?"},
            {"role": "assistant", "content": f"Answer {i}: the lazy dog jumps over the quick brown fox."})]},
        {"id": "m-too-long", "messages": [{"role": "user", "content": "hello there " * 300},
                                          {"role": "assistant", "content": "no"}]},
    ]
    (d / "chats.jsonl").write_text("".join(json.dumps(c) + "\n" for c in chats))
    share = [{"id": f"s{i}", "conversations": [{"from": "human", "value": f"How are you {i}?"},
                                                {"from": "gpt", "value": "Fine, thank you."}]} for i in range(5)]
    (d / "share.json").write_text(json.dumps(share))
    alpaca = [{"instruction": f"Tell me about fox {i}", "input": "", "output": "It jumps."} for i in range(5)]
    (d / "alpaca.json").write_text(json.dumps(alpaca))
    return [d / "alpaca.json", d / "chats.jsonl", d / "share.json"]


def test_run_sft_writes_what_single_renders_give(tok_dir, tok, tmp_path):
    inputs = write_inputs(tmp_path)
    manifest = run_sft([str(p) for p in inputs], out=tmp_path / "out", tokenizer=str(tok_dir), workers=1,
                       progress=False, max_length=MAX, verify=2)
    expected = []
    for entry in manifest["inputs"]:
        path = entry["path"]
        text = Path(path).read_text(encoding="utf-8")
        rows = json.loads(text) if path.endswith(".json") else [json.loads(line) for line in text.splitlines()]
        locs = list(range(1, len(rows) + 1))  # records are numbered from 1 in ids and rejects
        convs, rejects = normalize_rows(rows, locs, source=Path(path).name, schema=entry["schema_used"])
        assert rejects == []
        expected += one_by_one(fit_conversation, convs, tokenizer=tok, template=load_template(), max_length=MAX)
    kept = [r for r in expected if not isinstance(r, TemplateError)]
    shards = open_shards(tmp_path / "out")
    assert len(shards) == len(kept) == len(expected) - 1
    for i, r in enumerate(kept):
        assert shards[i]["id"] == r.id
        assert np.array_equal(shards.doc_tokens(i), r.ids) and np.array_equal(shards.doc_mask(i), r.mask)
    assert manifest["counts"]["rejected"] == {"too_long": 1}
    assert manifest["report"]["truncated"] == 1
    assert manifest["report"]["control_tokens_neutralised"] == sum(r.stats["control_tokens_neutralised"] for r in kept) > 0


def test_parity_note_when_no_reference_can_be_built(shared_data, tmp_path):
    """A SentencePiece model has no transformers reference: the run says so instead of checking parity."""
    tok_dir = tmp_path / "sp"
    tok_dir.mkdir()
    (tok_dir / "tokenizer.model").write_bytes((shared_data / "tokenizers" / "llama2_tokenizer.model").read_bytes())
    src = tmp_path / "chats.jsonl"
    src.write_text("".join(json.dumps({"id": f"c{i}", "messages": [
        {"role": "user", "content": f"Hello {i}, how are you?"},
        {"role": "assistant", "content": "Fine, thank you."}]}) + "\n" for i in range(4)))
    manifest = run_sft([str(src)], out=tmp_path / "out", tokenizer=str(tok_dir), workers=1, progress=False)
    parity = manifest["report"]["parity"]
    assert parity["checked"] == 0 and "sentencepiece" in parity["unavailable"]
    assert manifest["counts"]["kept"] == 4
    tok = load_tokenizer(tok_dir)
    convs, _ = normalize_rows([json.loads(line) for line in src.read_text().splitlines()], [1, 2, 3, 4],
                              source="chats.jsonl", schema=manifest["inputs"][0]["schema_used"])
    shards = open_shards(tmp_path / "out")
    for i, conv in enumerate(convs):
        r = render_conversation(conv, tokenizer=tok, template=load_template())
        assert np.array_equal(shards.doc_tokens(i), r.ids) and np.array_equal(shards.doc_mask(i), r.mask)
