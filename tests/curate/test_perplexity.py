"""The ``perplexity`` step (CCNet's filter): per-document perplexity in the ledger, ``max`` replayed exactly by
``funnel --set``, CCNet's head/middle/tail buckets over the whole run, the cut in report.html, and a model of
another kind or language refused before any work."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from tokenmill.cli import main
from tokenmill.curate.report.funnel import recompute
from tokenmill.curate.select.perplexity import BINS, Perplexity, bin_edge, percentile_bins, perplexities
from tokenmill.curate.workflows.curate import run_curate
from tokenmill.errors import ConfigError
from tokenmill.job.options import JobOptions
from tokenmill.lm.model import NgramModel
from tokenmill.lm.train import LmSettings, train
from tokenmill.report.ledger import read_stage_parts, stage_parts
from tokenmill.steps.build import build_step

WORDS = "the river runs through the old town and the bridge crosses it near the market square".split()


def _reference(n: int, seed: int) -> list[str]:
    """Sentences in the reference's own word order (shuffled windows of one text), so its n-grams recur."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        start = rng.randrange(len(WORDS) - 5)
        out.append(" ".join(WORDS[start:start + rng.randint(5, 10)]))
    return out


def _noise(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) + rng.choice("xyzqk") for _ in range(rng.randint(5, 12))) for _ in range(n)]


def _jsonl(path: Path, texts: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    return path


@pytest.fixture(scope="module")
def lm_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("lm")
    out = root / "lm"
    train([str(_jsonl(root / "ref.jsonl", _reference(300, 0)))], out=out, settings=LmSettings(order=3, language="en"),
          options=JobOptions(no_progress=True))
    return out


@pytest.fixture
def web(tmp_path) -> Path:
    """A pool from reference-like to noisy: each document a reference sentence or two with 0 to 8 made-up
    words put in (so no two score alike), and one of punctuation only (each mark a word)."""
    rng = random.Random(3)
    texts = []
    for i in range(80):
        words = " ".join(_reference(rng.randint(1, 2), seed=i)).split()
        for _ in range(rng.randint(0, 8)):
            words.insert(rng.randrange(len(words) + 1), rng.choice(WORDS) + rng.choice("xyzqk"))
        texts.append(" ".join(words))
    return _jsonl(tmp_path / "web.jsonl", [*texts, "... !!! ???"])


def _ledger(out: Path, manifest: dict, stage: str) -> pa.Table:
    return read_stage_parts(out, stage_parts(manifest)[stage])


def test_reference_like_text_has_lower_perplexity(lm_dir):
    model = NgramModel(lm_dir / "model.tmlm")
    ppl = perplexities(model, [_reference(1, 9)[0], _noise(1, 9)[0], "", "\n \n"])
    assert ppl[0] < ppl[1] / 10 and np.isinf(ppl[2]) and np.isinf(ppl[3])


def test_perplexity_is_ten_to_the_mean_negative_log10_p_per_token(lm_dir):
    """CCNet's formula: the lines' log10 p summed, over their words plus one </s> each."""
    model = NgramModel(lm_dir / "model.tmlm")
    doc = "The river runs.\n\nnear the market square"
    lines = [["the", "river", "runs", "."], ["near", "the", "market", "square"]]
    expected = 10 ** (-model.score(lines).sum() / (4 + 1 + 4 + 1))
    assert perplexities(model, [doc])[0] == pytest.approx(expected, rel=1e-12)


def test_max_removes_high_perplexity_and_funnel_set_replays_it_exactly(lm_dir, web, tmp_path):
    steps = [{"name": "perplexity", "model": str(lm_dir), "max": 10}]
    m = run_curate([str(web)], out=tmp_path / "a", steps=steps, workers=1, report=True)
    ledger = _ledger(tmp_path / "a", m, m["steps"][0]["stage"])
    ppl = ledger.column("perplexity.perplexity").to_numpy()
    reasons = ledger.column("reason").to_pylist()
    assert len(ppl) == 81
    assert all((r is None) == (p <= 10) for p, r in zip(ppl, reasons))
    assert 20 < sum(r is None for r in reasons) < 70
    tight = float(np.median(ppl[np.isfinite(ppl)]))
    replayed = recompute(tmp_path / "a", {("perplexity", "max"): tight})
    rerun = run_curate([str(web)], out=tmp_path / "b", workers=1, report=False,
                       steps=[{**steps[0], "max": tight}])
    assert replayed["kept"] == rerun["funnel"]["kept"]
    assert [r["rules"] for r in replayed["rows"]] == [r["rules"] for r in rerun["funnel"]["rows"]]
    html = (tmp_path / "a" / "report.html").read_text()
    assert 'data-column="perplexity.perplexity"' in html and "threshold 10" in html


def test_funnel_cli_takes_perplexity_max(lm_dir, web, tmp_path, capsys):
    run_curate([str(web)], out=tmp_path / "a", steps=[{"name": "perplexity", "model": str(lm_dir), "max": 10}],
               workers=1, report=False)
    capsys.readouterr()
    assert main(["funnel", str(tmp_path / "a"), "--set", "perplexity.max=3"]) == 0
    assert "high_perplexity" in capsys.readouterr().out


def test_buckets_are_the_runs_percentiles_at_any_worker_count(lm_dir, web, tmp_path):
    steps = [{"name": "perplexity", "model": str(lm_dir), "keep": ["head", "middle"]}]
    a = run_curate([str(web)], out=tmp_path / "a", steps=steps, workers=1, unit_bytes=2_000, report=True)
    b = run_curate([str(web)], out=tmp_path / "b", steps=steps, workers=2, unit_bytes=2_000, report=False)
    stage = a["steps"][0]["stage"]
    ledger = _ledger(tmp_path / "a", a, stage)
    assert len(stage_parts(a)[stage]) >= 3  # several units, one percentile over all of them
    ppl = ledger.column("perplexity.perplexity").to_numpy()
    bucket = np.array(ledger.column("perplexity.bucket").to_pylist())
    n = len(ppl)
    head, middle, tail = (ppl[bucket == b] for b in ("head", "middle", "tail"))
    assert head.max() < middle.min() and middle.max() < tail.min()
    assert 0.3 * n <= len(head) <= 0.3 * n + 2 and 0.6 * n <= len(head) + len(middle) <= 0.6 * n + 2
    kept = np.array([r is None for r in ledger.column("reason").to_pylist()])
    assert (kept == (bucket != "tail")).all()
    assert set(ledger.column("reason").drop_null().to_pylist()) <= {"perplexity_v1:bucket_tail",
                                                                     "perplexity_v1:no_words"}
    assert a["steps"][0]["cut"] == pytest.approx(middle.max(), rel=1e-3)
    assert _ledger(tmp_path / "b", b, stage).equals(ledger)
    assert a["funnel"] == b["funnel"]
    html = (tmp_path / "a" / "report.html").read_text()  # the generic histogram, the run's cut marked
    assert 'data-column="perplexity.perplexity"' in html and f"threshold {a['steps'][0]['cut']:.3g}" in html


def test_percentile_bins_leave_the_share_below():
    hist = np.zeros(BINS, dtype=np.int64)
    hist[[10, 20, 30, 40, 50, 60, 70, 80, 90, 100]] = 1
    assert percentile_bins(hist, (0.3, 0.6)) == [31, 61]
    assert bin_edge(0) == 1.0 and bin_edge(BINS) == pytest.approx(1e8)


def test_a_model_of_another_kind_is_refused(tmp_path, web, capsys):
    other = tmp_path / "quality.bin"
    other.write_bytes(b"\xba\x16\x4f\x2f" + b"\0" * 100)  # a fastText model's magic, not an n-gram model
    with pytest.raises(ConfigError, match="not a tokenmill n-gram model"):
        build_step({"name": "perplexity", "model": str(other), "max": 10}, where="steps[0]")
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text(f"steps:\n  - {{name: perplexity, model: {other}, max: 10}}\n")
    assert main(["curate", str(web), "--out", str(tmp_path / "out"), "--config", str(pipeline)]) == 1
    err = capsys.readouterr().err
    assert "not a tokenmill n-gram model" in err and "lm train" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_a_language_the_model_was_not_trained_on_is_refused(lm_dir):
    with pytest.raises(ValueError, match="trained on 'en' text, not 'de'.*--language de"):
        Perplexity(model=str(lm_dir), max=10, language="de")
    assert Perplexity(model=str(lm_dir), max=10, language="en").model_sha256


@pytest.mark.parametrize("params, says", [({"max": 10, "keep": ["head"]}, "give max"), ({}, "give max"),
                                          ({"keep": ["top"]}, "keep: expected"), ({"max": -1}, "max: expected"),
                                          ({"keep": ["head"], "percentiles": [60, 30]}, "percentiles")])
def test_bad_parameters_name_what_to_change(lm_dir, params, says):
    with pytest.raises(ValueError, match=says):
        Perplexity(model=str(lm_dir), **params)


def test_a_missing_model_says_how_to_make_one(tmp_path):
    with pytest.raises(ValueError, match="not found.*lm train"):
        Perplexity(model=str(tmp_path / "nope"), max=10)


def test_a_folder_without_the_binary_model_is_named_as_not_an_lm_train_output(tmp_path):
    """A folder holding only an ARPA file (a model another tool wrote) was reported as not found."""
    (tmp_path / "kenlm").mkdir()
    (tmp_path / "kenlm" / "model.arpa").write_text("\\data\\\nngram 1=1\n")
    with pytest.raises(ValueError, match="holds no model.tmlm.*ARPA file alone.*lm train"):
        Perplexity(model=str(tmp_path / "kenlm"), max=10)


def _documented_recipe() -> str:
    """The CCNet-style pipeline file of docs/curation.md, as written there."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "curation.md").read_text(encoding="utf-8")
    blocks = [b.split("```", 1)[0] for b in doc.split("```yaml\n")[1:]]
    return next(b for b in blocks if "track: curate" in b and "name: perplexity" in b)


def test_the_documented_ccnet_recipe_runs(lm_dir, web, tmp_path, capsys):
    recipe = _documented_recipe().replace("[web/]", f"[{web}]").replace("curated-en", str(tmp_path / "curated-en"))
    recipe = recipe.replace("lm-en/", str(lm_dir))
    (tmp_path / "ccnet-en.yaml").write_text(recipe)
    assert main(["curate", "--config", str(tmp_path / "ccnet-en.yaml"), "--no-progress"]) == 0
    m = json.loads((tmp_path / "curated-en" / "manifest.json").read_text())
    assert [e["name"] for e in m["steps"]] == ["exact_dedup", "language", "perplexity"]
    ledger = _ledger(tmp_path / "curated-en", m, m["steps"][-1]["stage"])
    assert set(ledger.column("perplexity.bucket").to_pylist()) == {"head", "middle", "tail"}
    assert main(["funnel", str(tmp_path / "curated-en")]) == 0
    assert "perplexity_v1" in capsys.readouterr().out
