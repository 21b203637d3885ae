"""tokenmill export --to hf of a pref output: TRL's tokenized columns, equal to what TRL's own DPO preparation makes
of the same records, and what its DataCollatorForPreference batches."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import prefkit as pk
import pytest

from tokenmill.errors import ConfigError
from tokenmill.job.options import JobOptions
from tokenmill.pref.run import run_pref
from tokenmill.sft.template import load_template
from tokenmill.shards.export import export

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sft"))
import chatkit as ck  # noqa: E402


def test_hf_export_is_trls_prepared_dataset(tmp_path):
    datasets = pytest.importorskip("datasets")
    dpo = pytest.importorskip("trl.trainer.dpo_trainer")
    tok_dir = ck.build_tokenizer_dir(tmp_path / "tok", chat_template=load_template().source)
    rows = [pk.good_pair(i) for i in range(7)]
    src = tmp_path / "pairs.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run_pref([str(src)], out=tmp_path / "out", tokenizer=str(tok_dir), options=JobOptions(workers=1))
    summary = export(tmp_path / "out", to="hf", out=tmp_path / "hf")
    got = datasets.load_from_disk(str(tmp_path / "hf"))
    assert summary["n_sequences"] == 7 and got.column_names == ["prompt_ids", "chosen_ids", "rejected_ids", "id"]

    hf = ck.hf_tokenizer(tok_dir)
    hf.chat_template = load_template().source
    args = SimpleNamespace(dataset_num_proc=None, max_length=None, truncation_mode="keep_start")
    want = dpo.DPOTrainer._prepare_dataset(SimpleNamespace(_tokenizer=hf), datasets.Dataset.from_list(rows), hf, args, "t")
    columns = ("prompt_ids", "chosen_ids", "rejected_ids")
    assert [[g[c] for c in columns] for g in got] == [[w[c] for c in columns] for w in want]
    batch = dpo.DataCollatorForPreference(pad_token_id=0)([got[0], got[1]])
    assert batch["input_ids"][0, :len(got[0]["prompt_ids"]) + len(got[0]["chosen_ids"])].tolist() == \
        got[0]["prompt_ids"] + got[0]["chosen_ids"]


def test_a_pref_output_exports_whole_pairs_to_hf_only(tmp_path):
    src = tmp_path / "pairs.jsonl"
    pk.write_pairs(src, 3, bad=False)
    run_pref([str(src)], out=tmp_path / "out", tokenizer="default", options=JobOptions(workers=1))
    with pytest.raises(ConfigError, match="--to hf"):
        export(tmp_path / "out", to="megatron", out=tmp_path / "m")
    with pytest.raises(ConfigError, match="never cut into windows"):
        export(tmp_path / "out", to="hf", out=tmp_path / "hf", seq_len=64)


def test_kto_output_reads_and_exports_completions_with_labels(tmp_path):
    datasets = pytest.importorskip("datasets")
    from tokenmill.shards.pairs import PreferenceDataset

    rows = [{"messages": [{"role": "user", "content": f"q {i}?"}, {"role": "assistant", "content": pk.text(i, 4)}],
             "label": i % 3 != 0} for i in range(6)]
    src = tmp_path / "kto.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run_pref([str(src)], out=tmp_path / "out", tokenizer="default", options=JobOptions(workers=1))
    ds = PreferenceDataset(tmp_path / "out")
    assert [ds[i]["label"] for i in range(6)] == [r["label"] for r in rows]
    assert set(ds[0]) == {"pair_id", "prompt_ids", "completion_ids", "completion_mask", "label"}
    export(tmp_path / "out", to="hf", out=tmp_path / "hf")
    got = datasets.load_from_disk(str(tmp_path / "hf"))
    assert got.column_names == ["prompt_ids", "completion_ids", "label", "id"]
    assert got["completion_ids"][2] == ds[2]["completion_ids"].tolist() and got["label"] == [r["label"] for r in rows]
