"""Quality classifier: training with the default settings, held-out scores, the step, the corpus-wide cut."""

from __future__ import annotations

import json
import pickle
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytest.importorskip("fasttext")

from dedupkit import tree  # noqa: E402

from tokenmill.cli import main  # noqa: E402
from tokenmill.curate.quality.classifier import Quality, auc, normalise, train_quality  # noqa: E402
from tokenmill.curate.quality.top import BINS, cut_from_histogram  # noqa: E402
from tokenmill.engine import LocalExecutor, Stage, StagePlan, Unit, UnitResult, run_workflow  # noqa: E402
from tokenmill.steps.contract import is_corpus_step
from tokenmill.steps.registry import step_class  # noqa: E402

FORMAL = ("the committee examined evidence regarding historical economic development population "
          "government university research policy analysis century national scientific methods").split()
SPAM = ("click here buy now cheap deal free shipping lol omg subscribe best price win prize "
        "limited offer sale discount").split()


def _texts(words, n, seed):
    rng = random.Random(seed)
    return [" ".join(rng.choice(words) for _ in range(rng.randint(30, 80))) + "." for _ in range(n)]


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("model") / "quality.bin"
    # the full model; the quantised default has its own tests below (training it costs seconds)
    train_quality(_texts(FORMAL, 300, 1), _texts(SPAM, 300, 2), out=out, quantize=False)
    return str(out)


def test_auc_matches_pairwise_definition():
    rng = np.random.default_rng(0)
    s, y = rng.random(200).round(2), rng.random(200) > 0.4  # rounded: ties
    pairs = [(a > b) + 0.5 * (a == b) for a, ya in zip(s, y) if ya for b, yb in zip(s, y) if not yb]
    assert auc(s, y) == pytest.approx(np.mean(pairs))


def test_normalise_lowercases_splits_punctuation_and_collapses_whitespace():
    assert normalise(["Hello,  World!\n\nNew line."]).to_pylist() == ["hello , world ! new line ."]


def test_training_writes_model_and_card_with_heldout_scores(model):
    card = json.loads(Path(model + ".card.json").read_text())
    assert card["scores"]["auc"] > 0.95 and card["scores"]["accuracy"] > 0.9
    assert card["params"]["wordNgrams"] == 2 and card["sha256"]


def test_training_is_deterministic(tmp_path):
    pos, neg = _texts(FORMAL, 60, 3), _texts(SPAM, 60, 4)
    a, b = tmp_path / "a.bin", tmp_path / "b.bin"
    train_quality(pos, neg, out=a)
    train_quality(pos, neg, out=b)
    assert a.read_bytes() == b.read_bytes()


def test_step_scores_and_decides_by_threshold(model):
    step = Quality(model=model, threshold=0.5)
    batch = pa.record_batch({"text": pa.array(_texts(FORMAL, 3, 9) + _texts(SPAM, 3, 9), type=pa.large_string())})
    scores = step.score(batch).scores
    assert (scores["score"][:3] > 0.5).all() and (scores["score"][3:] < 0.5).all()
    assert list(step.decide(scores)) == [None] * 3 + ["low_quality"] * 3
    assert not is_corpus_step(step) and is_corpus_step(Quality(model=model, top_fraction=0.1))
    assert pickle.loads(pickle.dumps(step)) == step
    assert step_class("quality") is Quality


def test_step_refuses_bad_parameters(model, tmp_path):
    with pytest.raises(ValueError, match="not found"):
        Quality(model=str(tmp_path / "missing.bin"))
    with pytest.raises(ValueError, match="not both"):
        Quality(model=model, threshold=0.5, top_fraction=0.1)
    with pytest.raises(ValueError, match="top_fraction"):
        Quality(model=model, top_fraction=1.5)


def test_cut_keeps_at_least_the_fraction():
    scores = np.linspace(0, 1, 1001)
    hist = np.bincount(np.minimum((scores * BINS).astype(int), BINS - 1), minlength=BINS)
    cut = cut_from_histogram(hist, 0.1)
    assert (scores >= cut).sum() == 101


@dataclass(frozen=True)
class WriteDocs:
    """A documents stage for the tests: unit i holds some formal and some spam documents."""

    def __call__(self, unit: Unit, staging: Path) -> UnitResult:
        texts = _texts(FORMAL, 5 + unit.index, unit.index) + _texts(SPAM, 20, 100 + unit.index)
        table = pa.table({"id": [f"{unit.name}:{i}" for i in range(len(texts))], "text": texts,
                          "source": ["s"] * len(texts)})
        rel = f"_work/source/docs/{unit.name}.parquet"
        (staging / rel).parent.mkdir(parents=True)
        pq.write_table(table, staging / rel)
        return UnitResult(outputs=[rel], data={"docs": rel, "ledger": None})


def _source_stage():
    return Stage("source", 1, lambda ctx: StagePlan([Unit(i, f"unit-{i:06d}") for i in range(3)], WriteDocs()))


def _tree(root: Path) -> dict:
    return tree(root)  # files in segments by their own paths and bytes (dedupkit)


def test_top_fraction_is_a_corpus_wide_cut(model, tmp_path):
    step = Quality(model=model, top_fraction=0.2)
    stages = [_source_stage(), *step.stages("source")]
    res = run_workflow(stages, out=tmp_path / "a", fingerprint="f", executor=LocalExecutor(workers=1))
    kept = sum(r.stats.kept for r in res["quality_apply"])
    n = sum(r.stats.input for r in res["quality_apply"])
    assert n == 78 and kept >= round(0.2 * n) and kept <= round(0.2 * n) + 2
    ledger = pa.concat_tables(pq.read_table(tmp_path / "a" / r.data["ledger"]) for r in res["quality_apply"])
    assert set(ledger.column_names) >= {"id", "source", "quality.score", "kept", "reason"}
    assert set(ledger.column("reason").drop_null().to_pylist()) == {"quality_v1:low_quality"}
    run_workflow(stages, out=tmp_path / "b", fingerprint="f", executor=LocalExecutor(workers=2))
    assert _tree(tmp_path / "a") == _tree(tmp_path / "b")


def test_cli_trains_from_labelled_jsonl(tmp_path, capsys):
    rows = [{"text": t, "label": 1} for t in _texts(FORMAL, 80, 5)] + [{"text": t, "label": 0} for t in _texts(SPAM, 80, 6)]
    rows.append({"text": 5, "label": 1})  # unusable: counted, not fatal
    f = tmp_path / "labelled.jsonl"
    f.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert main(["quality", "train", "--labelled", str(f), "--label-field", "label", "--param", "quantize=0",
                 "--out", str(tmp_path / "m")]) == 0
    out = capsys.readouterr().out
    assert "80 positive and 80 negative" in out and "1 unusable" in out and "AUC" in out
    assert (tmp_path / "m" / "model.bin.card.json").exists()


def test_cli_requires_a_label_field(tmp_path, capsys):
    f = tmp_path / "x.jsonl"
    f.write_text('{"text": "a", "label": 1}\n')
    assert main(["quality", "train", "--labelled", str(f), "--out", str(tmp_path / "m.bin")]) != 0
    assert "--label-field" in capsys.readouterr().err


def test_cli_writes_a_quantised_model_by_default_with_both_aucs(tmp_path, capfd):
    rows = [{"text": t, "label": 1} for t in _texts(FORMAL, 120, 7)] + [{"text": t, "label": 0} for t in _texts(SPAM, 120, 8)]
    f = tmp_path / "labelled.jsonl"
    f.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    small, full = tmp_path / "q" / "model.bin", tmp_path / "full" / "model.bin"
    base = ["quality", "train", "--labelled", str(f), "--label-field", "label"]
    assert main([*base, "--out", str(small.parent)]) == 0
    printed = capfd.readouterr()  # the fit's phase lines come from the worker that runs it
    assert "quantised" in printed.out
    phases = [line for line in printed.err.splitlines() if line.startswith("quality train: ")]
    assert [line.split()[2] for line in phases] == ["reading", "training", "quantising"], printed.err
    assert "1 labelled file" in phases[0] and "224 examples" in phases[1] and "25 epochs" in phases[1]
    assert main([*base, "--param", "quantize=0", "--out", str(full.parent)]) == 0
    q_card = json.loads(Path(str(small) + ".card.json").read_text())
    f_card = json.loads(Path(str(full) + ".card.json").read_text())
    assert small.stat().st_size * 4 < full.stat().st_size
    assert q_card["quantized"] and f_card["quantized"] is None and "unquantised" not in f_card["scores"]
    assert q_card["scores"]["unquantised"]["auc"] == f_card["scores"]["auc"]  # the same training, scored before quantising
    assert abs(q_card["scores"]["auc"] - f_card["scores"]["auc"]) <= 0.01
    texts = _texts(FORMAL, 3, 9) + _texts(SPAM, 3, 9)
    scores = Quality(model=str(small.parent), threshold=0.5).score(pa.record_batch({"text": pa.array(texts, pa.large_string())}))
    assert (scores.scores["score"][:3] > 0.5).all() and (scores.scores["score"][3:] < 0.5).all()
