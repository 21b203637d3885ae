"""Real-data tier: every preference file of ../shared/data (SOURCES.md lists one, LLaMA-Factory's DPO demo set:
ShareGPT conversations with chosen/rejected turns) through `tokenmill pref`, its shards read back, its export
equal to TRL's own preparation. Skips, with the reason, when the data is absent."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tokenmill.job.options import JobOptions
from tokenmill.pref.run import run_pref
from tokenmill.sft.template import load_template
from tokenmill.shards.audit import audit
from tokenmill.shards.pairs import PreferenceDataset

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sft"))
import chatkit as ck  # noqa: E402

pytestmark = pytest.mark.realdata
DEMO = "sft/llamafactory_dpo_en_demo.json"


@pytest.fixture(scope="module")
def demo(shared_data):
    path = shared_data / DEMO
    if not path.is_file():
        pytest.skip(f"real-data tier: {path} not found (SOURCES.md lists it: LLaMA-Factory data/dpo_en_demo.json)")
    return path


def test_llamafactory_demo_end_to_end(demo, tmp_path):
    m = run_pref([str(demo)], out=tmp_path / "out", tokenizer="default", options=JobOptions(workers=2))
    records = json.loads(demo.read_text())
    assert m["counts"]["input"] == len(records) == 300
    assert m["counts"]["kept"] + sum(m["counts"]["rejected"].values()) + sum(m["counts"]["filtered"].values()) == 300
    bias = m["report"]["length_bias"]
    assert 0 < bias["chosen_longer_share"] < 1 and bias["median_length_ratio"] > 0
    assert m["report"]["tokens"]["saved_share"] > 0.1  # multi-turn prompts: storing them once saves a lot
    ds = PreferenceDataset(tmp_path / "out")
    assert len(ds) == m["counts"]["kept"]
    for i in (0, len(ds) // 2, len(ds) - 1):
        pair = ds[i]
        assert pair["chosen_mask"].any() and pair["rejected_mask"].any() and pair["prompt_ids"].size
    result = audit(tmp_path / "out", n=2)
    assert not result["problems"] and not result["warnings"]


def test_llamafactory_demo_equals_trls_preparation(demo, tmp_path):
    datasets = pytest.importorskip("datasets")
    dpo = pytest.importorskip("trl.trainer.dpo_trainer")
    records = json.loads(demo.read_text())[:40]
    roles = {"human": "user", "gpt": "assistant", "system": "system"}

    def turns(value):
        return [{"role": roles[t["from"]], "content": t["value"]} for t in (value if isinstance(value, list) else [value])]

    rows = [{"prompt": turns(r["conversations"]), "chosen": turns(r["chosen"]), "rejected": turns(r["rejected"])}
            for r in records]
    src = tmp_path / "subset.json"
    src.write_text(json.dumps(records))
    tok_dir = ck.build_tokenizer_dir(tmp_path / "tok", chat_template=load_template().source)
    run_pref([str(src)], out=tmp_path / "out", tokenizer=str(tok_dir), options=JobOptions(workers=1))
    hf = ck.hf_tokenizer(tok_dir)
    hf.chat_template = load_template().source
    args = SimpleNamespace(dataset_num_proc=None, max_length=None, truncation_mode="keep_start")
    want = dpo.DPOTrainer._prepare_dataset(SimpleNamespace(_tokenizer=hf), datasets.Dataset.from_list(rows), hf, args, "t")
    ds = PreferenceDataset(tmp_path / "out")
    assert len(ds) == len(rows)
    for i, w in enumerate(want):
        got = ds[i]
        assert [got[k].tolist() for k in ("prompt_ids", "chosen_ids", "rejected_ids")] == \
            [w["prompt_ids"], w["chosen_ids"], w["rejected_ids"]], f"pair {i}"
