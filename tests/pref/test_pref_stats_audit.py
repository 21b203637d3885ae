"""tokenmill stats counts pairs and the share saved by the prompt stored once; tokenmill audit shows a pair side by
side with its trained spans marked, and does not warn of the prompts it never trains."""

from __future__ import annotations

import json

import prefkit as pk

from tokenmill.job.options import JobOptions
from tokenmill.loader.stats import shard_stats
from tokenmill.pref.run import run_pref
from tokenmill.shards.audit import audit, render_audit
from tokenmill.shards.pairs import PreferenceDataset


def _out(tmp_path, n=6):
    src = tmp_path / "pairs.jsonl"
    pk.write_pairs(src, n, bad=False)
    out = tmp_path / "out"
    run_pref([str(src)], out=out, tokenizer="default", options=JobOptions(workers=1))
    return out


def test_stats_counts_pairs_tokens_and_the_saving(tmp_path):
    out = _out(tmp_path)
    s = shard_stats(out)
    ds = PreferenceDataset(out)
    prompt = sum(len(ds[i]["prompt_ids"]) for i in range(len(ds)))
    chosen = sum(len(ds[i]["chosen_ids"]) for i in range(len(ds)))
    rejected = sum(len(ds[i]["rejected_ids"]) for i in range(len(ds)))
    assert (s["track"], s["pairs"], s["documents"]) == ("pref", 6, 18)
    assert (s["prompt_tokens"], s["chosen_tokens"], s["rejected_tokens"]) == (prompt, chosen, rejected)
    assert abs(s["prompt_stored_once_saved_share"] - prompt / (prompt * 2 + chosen + rejected)) < 1e-12
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["report"]["tokens"]["saved_share"] == round(s["prompt_stored_once_saved_share"], 6)


def test_audit_shows_pairs_side_by_side_with_trained_spans(tmp_path):
    out = _out(tmp_path)
    result = audit(out, n=2)
    assert not result["problems"] and not result["warnings"]  # prompts are untrained by design: no warning
    assert [p["pair"] for p in result["pairs"]] == [0, 5]
    text = render_audit(result)
    first = pk.good_pair(0)
    assert f"question 0: {pk.text(0, 6)}?" in text
    row = next(line for line in text.splitlines() if line.startswith("[[") and " | [[" in line)
    chosen, rejected = row.split(" | ")
    assert chosen.strip() == f"[[{first['chosen'][0]['content']}<|im_end|>]]"
    assert rejected.strip() == f"[[{first['rejected'][0]['content']}<|im_end|>]]"
