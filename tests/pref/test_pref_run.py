"""tokenmill pref end to end: a Job of the one driver (counts, rejects, manifest envelope, data card, resume),
its shards read back by PreferenceDataset as the pair contract's dicts, equal to the tokenization itself."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import prefkit as pk
import pytest

import statekit
from tokenmill.errors import ShardError
from tokenmill.job.options import JobOptions
from tokenmill.pref.inputs import read_pair
from tokenmill.pref.run import run_pref
from tokenmill.pref.tokenize import tokenize_pairs
from tokenmill.sft.render import MaskPolicy
from tokenmill.sft.template import load_template
from tokenmill.shards.pairs import PreferenceDataset
from tokenmill.tokenize import load_tokenizer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "track"))
import trackkit as tk  # noqa: E402

CONTRACT = {"pair_id": int, "prompt_ids": np.int32, "chosen_ids": np.int32, "rejected_ids": np.int32,
            "chosen_mask": np.uint8, "rejected_mask": np.uint8}


def run(src: Path, out: Path, **kw) -> dict:
    options = JobOptions(workers=1, no_progress=True, **kw.pop("job", {}))
    return run_pref([str(src)], out=out, tokenizer="default", options=options, **kw)


def test_counts_rejects_and_the_manifest_envelope(tmp_path):
    src = tmp_path / "pairs.jsonl"
    pk.write_pairs(src, 20)
    m = run(src, tmp_path / "out")
    assert m["track"] == "pref" and m["counts"]["input"] == 20 and m["counts"]["kept"] == 16
    assert m["counts"]["rejected"] == {"identical_completions": 1, "whitespace_only_difference": 1,
                                       "empty_completion": 1, "malformed_json": 1}
    rejects = [json.loads(line) for line in (tmp_path / "out" / "rejects.jsonl").read_text().splitlines()]
    assert {(r["source"], r["loc"], r["reason"]) for r in rejects} >= {("pairs.jsonl", 3, "identical_completions"),
                                                                        ("pairs.jsonl", 5, "whitespace_only_difference")}
    for key in ("tokenmill", "inputs", "config", "counts", "identity", "run", "rejects_file", "tokenizer", "shards"):
        assert key in m
    report = m["report"]
    assert report["pairs"] == 16 and 0 <= report["length_bias"]["chosen_longer_share"] <= 1
    card = (tmp_path / "out" / "datacard.md").read_text()
    assert "## Preference pairs" in card and "Length bias: the chosen completion is longer in" in card


def test_dataset_yields_the_contract_equal_to_the_tokenization(tmp_path):
    src = tmp_path / "pairs.jsonl"
    pk.write_pairs(src, 12, bad=False)
    run(src, tmp_path / "out")
    ds = PreferenceDataset(tmp_path / "out")
    assert len(ds) == 12
    tok = load_tokenizer("default")
    pairs = [read_pair(pk.good_pair(i), i + 1, source="pairs.jsonl", schema={
        "style": "preference", "prompt": "prompt", "chosen": "chosen", "rejected": "rejected"}) for i in range(12)]
    want = tokenize_pairs(pairs, tokenizer=tok, template=load_template(), policy=MaskPolicy())
    for i, w in enumerate(want):
        got = ds[i]
        assert set(got) == set(CONTRACT) and got["pair_id"] == i
        for key, dtype in CONTRACT.items():
            if key != "pair_id":
                assert got[key].dtype == dtype
                assert got[key].tolist() == getattr(w, key).tolist()
        assert not got["prompt_ids"].size or got["chosen_mask"].any()
    assert ds.record_id(0) == "pairs.jsonl:1"


def test_resume_after_a_kill_gives_the_same_bytes(tmp_path):
    src = tmp_path / "pairs.jsonl"
    pk.write_pairs(src, 120)
    reference, resumed = tmp_path / "reference", tmp_path / "resumed"
    run(src, reference, job={"unit_bytes": 4096})
    run(src, resumed, job={"unit_bytes": 4096})
    units = statekit.committed(resumed, "shards_v1")
    assert len(units) >= 4
    (resumed / "manifest.json").unlink()  # what a kill -9 after half the units leaves
    (resumed / "rejects.jsonl").unlink(missing_ok=True)
    for marker in sorted(statekit.reopen(resumed, "shards_v1").iterdir())[len(units) // 2:]:
        for f in resumed.glob(f"shard-{marker.stem.split('-')[-1]}*"):
            f.unlink()
        marker.unlink()
    run(src, resumed, job={"unit_bytes": 4096})
    assert tk.output_files(reference) == tk.output_files(resumed)
    a, b = (json.loads((d / "manifest.json").read_text()) for d in (reference, resumed))
    assert {k for k in a if a[k] != b.get(k)} <= {"run"}


def test_job_flags_limit_exclude_dry_run_and_the_guard(tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    pk.write_pairs(src / "a.jsonl", 10, bad=False)
    pk.write_pairs(src / "skip.jsonl", 10, bad=False)
    out = tmp_path / "out"
    r = pk.cli("pref", str(src), "--out", str(out), "--tokenizer", "default", "--limit", "3", "--exclude", "skip*",
               "--workers", "1", "--dry-run")
    assert r.returncode == 0, r.stderr
    assert not out.exists() and "a.jsonl" in r.stdout
    r = pk.cli("pref", str(src), "--out", str(out), "--tokenizer", "default", "--limit", "3", "--exclude", "skip*",
               "--workers", "1")
    assert r.returncode == 0, r.stderr
    assert "pairs: 3" in r.stdout and json.loads((out / "manifest.json").read_text())["config"]["excluded"] == ["skip.jsonl"]
    r = pk.cli("pref", str(src), "--out", str(out), "--tokenizer", "default", "--workers", "1")
    assert r.returncode == 1 and "--overwrite" in r.stderr  # another run's output: refused, not mixed
    r = pk.cli("pref", str(src), "--out", str(out), "--tokenizer", "default", "--workers", "1", "--overwrite")
    assert r.returncode == 0 and "pairs: 20" in r.stdout


def test_sft_shards_are_not_a_preference_dataset(tmp_path):
    chats = tmp_path / "chats.jsonl"
    chats.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"},
                                              {"role": "assistant", "content": "hello"}]}) + "\n")
    from tokenmill.sft.run import run_sft

    run_sft([str(chats)], out=tmp_path / "sft", tokenizer="default", workers=1, verify=0, progress=False)
    with pytest.raises(ShardError, match="tokenmill pref"):
        PreferenceDataset(tmp_path / "sft")


def test_kill_9_and_resume_gives_the_same_bytes(tmp_path):
    from test_track_resume import kill_after_commits

    src = tmp_path / "pairs.jsonl"
    pk.write_pairs(src, 600)
    reference, out = tmp_path / "reference", tmp_path / "out"
    args = ["pref", str(src), "--tokenizer", "default", "--workers", "2", "--unit-bytes", "2KB", "--no-progress"]
    assert pk.cli(*args, "--out", str(reference)).returncode == 0
    total = len(statekit.committed(reference, "shards_v1"))
    committed = kill_after_commits([*args, "--out", str(out)], out / tk.DONE, at_least=10)
    assert 10 <= committed < total and not (out / "manifest.json").exists()
    done = pk.cli(*args, "--out", str(out))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert tk.output_files(reference) == tk.output_files(out)
    a, b = (json.loads((d / "manifest.json").read_text()) for d in (reference, out))
    assert {k for k in a if a[k] != b.get(k)} <= {"run"}


def test_the_task_survives_pickle(tmp_path):
    import pickle

    from tokenmill.pref.run import PrefOptions, PrefTask

    task = PrefTask(load_tokenizer("default"), load_template(), {}, PrefOptions(max_length=64))
    again = pickle.loads(pickle.dumps(task))
    assert again.options == task.options and again.template.source == task.template.source
