"""Real-data tier: every file of ../shared/data/pretrain and ../shared/data/sft reads cleanly."""

import pytest
from io_helpers import read_all

from tokenmill.io import expand_inputs, plan_units, sample_records

pytestmark = pytest.mark.realdata

# record counts stated in ../shared/data/SOURCES.md (WARC: HTML responses; WET: conversion records)
EXPECTED = {
    "pretrain/llamafactory_c4_demo.jsonl": 300,
    "pretrain/dolma_provided_documents_000.json.gz": 10,
    "pretrain/dolma_sample-0000.warc.gz": 22,
    "pretrain/cc_whirlwind.warc.gz": 1,
    "pretrain/cc_whirlwind.warc.wet.gz": 1,
    "pretrain/llamafactory_wiki_demo.txt": 30,
    "pretrain/dclm_quality_agreement_data.jsonl": 281,
    "sft/gsm8k_train.jsonl": 7473,
    "sft/llamafactory_alpaca_en_demo.json": 999,
    "sft/llamafactory_glaive_toolcall_en_demo.json": 300,
    "sft/fastchat_dummy_conversation_sharegpt.json": 500,
    "sft/reasoning_deepseek_r1_openrouter_outputs.json": 5,
}


def test_every_real_file_reads(shared_data):
    files = expand_inputs([str(shared_data / "pretrain"), str(shared_data / "sft")])
    assert len(files) >= 20
    units = plan_units(files, unit_bytes=256 << 10)
    for f in files:
        key = f"{'pretrain' if '/pretrain/' in f.path else 'sft'}/{f.rel}"
        rows, locs, rejects, _, _ = read_all([u for u in units if u.file == f])
        assert len(rows) > 0, key
        assert locs == sorted(locs) and len(set(locs)) == len(locs), key
        if key in EXPECTED:
            assert len(rows) == EXPECTED[key], key
            assert not rejects, key
        sample, slocs, _ = sample_records(f, n=3)
        assert sample == rows[:3] or f.format == "text", key
        assert slocs == locs[:3], key


def test_real_warc_and_wet_content(shared_data):
    files = expand_inputs([str(shared_data / "pretrain" / "cc_whirlwind.warc*")])
    by_format = {f.format: f for f in files}
    (warc,), _, _, _, _ = read_all(plan_units([by_format["warc"]]))
    (wet,), wet_locs, _, _, _ = read_all(plan_units([by_format["wet"]]))
    assert warc["url"] == wet["url"] == "https://an.wikipedia.org/wiki/Escopete"
    assert "Escopete" in warc["text"] and "<" not in warc["text"][:200]
    assert wet["language"] == "spa" and wet_locs == [2]


def test_real_text_auto_mode(shared_data):
    wiki, book = expand_inputs(
        [
            str(shared_data / "pretrain" / "llamafactory_wiki_demo.txt"),
            str(shared_data / "pretrain" / "gutenberg_1342_pride_and_prejudice.txt"),
        ]
    )
    assert len(read_all(plan_units([wiki]))[0]) == 30  # one article per long line
    (doc,), locs, _, _, _ = read_all(plan_units([book]))  # a book is one document
    assert locs == [1] and "Bennet" in doc["text"]
