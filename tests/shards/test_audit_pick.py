"""``tokenmill audit --source/--id/--shape``: the examples shown are the documents asked for, found through
the document tables and the masks (checked against a loop over every document)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_audit import encode_sft

from tokenmill.cli import main
from tokenmill.errors import ConfigError
from tokenmill.shards import ShardWriter, open_shards
from tokenmill.shards import pick as pick_module
from tokenmill.shards.audit import audit, render_audit
from tokenmill.shards.pick import Pick, matching
from tokenmill.tokenize import load_tokenizer


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer("default", fast=False)


def _two_turns(tok, k: int):
    a_ids, a_mask = encode_sft(tok, f"q{k}?", f"answer {k}.")
    b_ids, b_mask = encode_sft(tok, "and then?", "more.")
    return np.concatenate([a_ids, b_ids]), np.concatenate([a_mask, b_mask])


@pytest.fixture
def mixed(tmp_path, tok):
    """Twelve documents over several shards: sources gsm8k/alpaca alternating, longer with k; #3 untrained,
    #5 unstopped (its stop token not trained), #7 and #10 two turns."""
    out = tmp_path / "mixed"
    with ShardWriter(out, stem_prefix="sft", tokenizer_info=tok.info(), with_mask=True, max_tokens=120) as writer:
        for k in range(12):
            train_stop, train = k != 5, k != 3
            ids, mask = (_two_turns(tok, k) if k in (7, 10) else
                         encode_sft(tok, f"question {k}?" * (k + 1), f"answer {k}.", train_stop=train_stop, train=train))
            source = "data/gsm8k/train.jsonl" if k % 2 == 0 else "data/alpaca.json"
            writer.add(ids, rec_id=f"ex-{k}", source=source, mask=mask)
    return out


def _loop(shards, want) -> list[int]:
    return [i for i in range(len(shards)) if want(shards[i])]


def test_pick_by_source_glob_file_name_and_id_equals_a_loop(mixed):
    shards = open_shards(mixed)
    assert len(shards.shards) >= 2
    gsm = _loop(shards, lambda d: "gsm8k" in d["source"])
    assert matching(shards, Pick(sources=("*gsm8k*",)), None).tolist() == gsm
    alpaca = _loop(shards, lambda d: d["source"].endswith("alpaca.json"))
    assert matching(shards, Pick(sources=("alpaca.json",)), None).tolist() == alpaca
    assert matching(shards, Pick(ids=("ex-4", "ex-9", "nope")), None).tolist() == [4, 9]
    assert matching(shards, Pick(sources=("*gsm8k*",), ids=("ex-4", "ex-9")), None).tolist() == [4]


def test_mask_shapes_equal_a_loop_over_every_document(mixed, tok, monkeypatch):
    monkeypatch.setattr(pick_module, "_SCAN_TOKENS", 40)  # many chunks, documents cut across none
    shards = open_shards(mixed)
    stops = np.array(sorted({*tok.special_tokens.values(), tok.eos_id}), dtype=np.int64)

    def runs(mask):
        return int(np.sum(mask & ~np.concatenate(([False], mask[:-1]))))

    def unstopped(d):
        m = d["loss_mask"]
        ends = np.flatnonzero(m & ~np.concatenate((m[1:], [False])))
        return any(d["input_ids"][e] not in stops for e in ends)

    assert matching(shards, Pick(shape="untrained"), stops).tolist() == _loop(shards, lambda d: runs(d["loss_mask"]) == 0) == [3]
    turns = _loop(shards, lambda d: runs(d["loss_mask"]) >= 2)
    assert matching(shards, Pick(shape="multi-turn"), stops).tolist() == turns == [7, 10]
    assert matching(shards, Pick(shape="unstopped"), stops).tolist() == _loop(shards, unstopped) == [5]


def test_audit_shows_the_longest_of_a_source_and_says_what_it_picked(mixed, capsys):
    shards = open_shards(mixed)
    gsm = sorted(_loop(shards, lambda d: "gsm8k" in d["source"]), key=lambda i: -len(shards[i]["input_ids"]))
    result = audit(mixed, n=2, pick=Pick(sources=("*gsm8k*",), shape="longest"))
    assert [e["index"] for e in result["examples"]] == sorted(gsm[:2]) == [6, 8]
    assert result["picked"] == {"by": "source *gsm8k*, shape longest", "matching": 6}
    assert "examples (2 of 6 matching source *gsm8k*, shape longest" in render_audit(result)
    assert main(["audit", str(mixed), "--id", "ex-5", "--json"]) == 0
    assert [e["id"] for e in json.loads(capsys.readouterr().out)["examples"]] == ["ex-5"]


def test_nothing_matching_names_the_sources_there_and_a_bad_shape_is_one_line(mixed, capsys):
    result = audit(mixed, pick=Pick(sources=("dolly*",)))
    assert result["examples"] == [] and result["picked"]["matching"] == 0
    assert "no document matches source dolly*; sources here: data/gsm8k/train.jsonl, data/alpaca.json" in render_audit(result)
    assert main(["audit", str(mixed), "--shape", "round"]) != 0
    assert "--shape 'round': expected one of untrained, unstopped, multi-turn, longest, shortest" in capsys.readouterr().err


def test_mask_shapes_on_pretraining_shards_are_refused(tmp_path, tok):
    with ShardWriter(tmp_path / "pt", stem_prefix="pretrain", tokenizer_info=tok.info()) as writer:
        writer.add(np.array([*tok.encode("plain text"), tok.eos_id]), rec_id="d", source="web.jsonl")
    with pytest.raises(ConfigError, match="no loss mask"):
        audit(tmp_path / "pt", pick=Pick(shape="untrained"))
