"""Corpus-wide curation on the SFT track (sft/corpus.py): exact and near-duplicate removal on prompts and on
whole conversations, decontamination, through ``run_sft`` and the CLI's step builder, counted by reason,
reported in the manifest, the same bytes with 1 or 2 workers and on a rerun that resumes."""

from __future__ import annotations

import hashlib
import json

import chatkit as ck
import pytest

import statekit
from tokenmill.errors import ConfigError
from tokenmill.sft.corpus import build_sft_steps
from tokenmill.sft.run import run_sft
from tokenmill.shards import open_shards

WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa".split()


def _chat(prompt: str, answer: str) -> dict:
    return {"messages": [{"role": "user", "content": prompt}, {"role": "assistant", "content": answer}]}


def _sentence(k: int, n: int = 14) -> str:
    return " ".join(WORDS[(k * 7 + i * 3) % len(WORDS)] + str(k) for i in range(n))


ROWS = [
    _chat("What is two plus two?", "Four."),                       # 1
    _chat("What is two plus two?", "Four."),                       # 2: exact copy of 1
    _chat("What is two plus two?", "It is four, of course."),      # 3: same prompt as 1, other answer
    _chat(_sentence(1), _sentence(2)),                             # 4
    _chat(_sentence(1), _sentence(2) + " oscar2 extra"),           # 5: near copy of 4, same prompt
    _chat("Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
          "How many clips did Natalia sell altogether in April and May?", "72."),  # 6: a GSM8K question
    _chat("Name a colour.", "Blue."),                              # 7
]


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory):
    return ck.build_tokenizer_dir(tmp_path_factory.mktemp("tok"))


@pytest.fixture()
def inputs(tmp_path):
    """The rows split over two files, so that duplicates cross files and work units."""
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text("".join(json.dumps(r) + "\n" for r in ROWS[:3]))
    b.write_text("".join(json.dumps(r) + "\n" for r in ROWS[3:]))
    return [str(a), str(b)]


def _run(inputs, out, tok_dir, specs, **options):
    steps = build_sft_steps(specs)
    return run_sft(inputs, out=out, tokenizer=str(tok_dir), progress=False, verify=0, steps=steps,
                   unit_bytes=256, **{"workers": 1, **options})


def _digest(out) -> str:
    h = hashlib.sha256()
    for p in sorted(out.glob("shard-*")):
        h.update(p.name.encode() + p.read_bytes())
    return h.hexdigest()


def test_exact_dedup_on_prompts(inputs, tmp_path, tok_dir):
    m = _run(inputs, tmp_path / "out", tok_dir, [{"name": "exact_dedup", "on": "prompt"}])
    assert m["counts"]["kept"] == 4  # 2 and 3 repeat the prompt of 1, 5 that of 4
    assert m["counts"]["filtered"] == {"exact_dedup_prompt_v1:duplicate": 3}
    assert m["counts"]["balanced"]
    assert m["report"]["curation"]["exact_dedup_prompt"] == {
        "on": "prompt", "input": 7, "kept": 4, "removed": {"exact_dedup_prompt_v1:duplicate": 3}}
    assert len(open_shards(tmp_path / "out")) == 4


def test_exact_dedup_on_conversations_keeps_other_answers(inputs, tmp_path, tok_dir):
    m = _run(inputs, tmp_path / "out", tok_dir, [{"name": "exact_dedup"}])
    assert m["counts"]["kept"] == 6
    assert m["counts"]["filtered"] == {"exact_dedup_conversation_v1:duplicate": 1}


def test_near_duplicates_then_decontamination(inputs, tmp_path, tok_dir):
    evals = tmp_path / "gsm8k_test.jsonl"
    evals.write_text(json.dumps({"question": ROWS[5]["messages"][0]["content"], "answer": "72"}) + "\n")
    specs = [{"name": "minhash_dedup", "on": "conversation", "threshold": 0.7},
             {"name": "decontaminate", "eval": [str(evals)], "on": "prompt"}]
    m = _run(inputs, tmp_path / "out", tok_dir, specs)
    filtered = m["counts"]["filtered"]
    assert filtered.pop("minhash_dedup_conversation_v1:duplicate") == 2  # 2 (exact copy of 1) and 5 (near 4)
    assert list(filtered) == ["decontaminate_v2:gsm8k_test"] and filtered["decontaminate_v2:gsm8k_test"] == 1
    assert m["counts"]["kept"] == 4
    assert m["config"]["steps"][0]["on"] == "conversation"


def test_one_or_two_workers_and_a_resumed_rerun_give_the_same_bytes(inputs, tmp_path, tok_dir):
    specs = [{"name": "exact_dedup", "on": "prompt"}, {"name": "minhash_dedup"}]
    one = tmp_path / "one"
    _run(inputs, one, tok_dir, specs)
    two = tmp_path / "two"
    _run(inputs, two, tok_dir, specs, workers=2)
    assert _digest(one) == _digest(two)
    done = sorted(statekit.reopen(one, "shards_v1").glob("*.json"))  # as if killed before the stage's index
    assert len(done) > 1, "several work units"
    lost = json.loads(done[0].read_text())["outputs"]  # as a run killed before this unit committed
    done[0].unlink()
    for rel in lost:
        (one / rel).unlink()
    (one / "manifest.json").unlink()
    before = _digest(two)
    _run(inputs, one, tok_dir, specs)
    assert _digest(one) == before


def test_bad_specs_are_config_errors():
    with pytest.raises(ConfigError, match=r"steps\[0\]\.on"):
        build_sft_steps([{"name": "exact_dedup", "on": "answer"}])
    with pytest.raises(ConfigError, match="listed twice"):
        from tokenmill.sft.corpus import split_steps

        split_steps(build_sft_steps([{"name": "exact_dedup"}, {"name": "exact_dedup"}]))


def test_pipeline_file_steps_reach_the_sft_command(inputs, tmp_path, tok_dir):
    from tokenmill.cli import main

    cfg = tmp_path / "sft.yaml"
    cfg.write_text("track: sft\nsteps:\n  - {name: exact_dedup, on: prompt}\n")
    out = tmp_path / "cli"
    assert main(["sft", *inputs, "--out", str(out), "--config", str(cfg), "--tokenizer", str(tok_dir),
                 "--workers", "1", "--verify", "0", "--no-progress"]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["counts"]["filtered"] == {"exact_dedup_prompt_v1:duplicate": 3}


def test_an_exact_count_split_with_corpus_steps_is_refused_before_any_work(inputs, tmp_path, tok_dir):
    out = tmp_path / "out"
    with pytest.raises(ConfigError, match="--val-count cannot be combined with corpus-wide steps"):
        _run(inputs, out, tok_dir, [{"name": "exact_dedup", "on": "prompt"}], val_count=3)
    assert not out.exists()
    _run(inputs, out, tok_dir, [{"name": "exact_dedup", "on": "prompt"}], val_fraction=0.3)  # a fraction works
    assert (out / "val" / "manifest.json").is_file()
