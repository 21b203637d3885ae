"""The ``dclm`` preset and corpus steps inside one ``tokenmill curate`` run: dedup, then the corpus-wide
quality cut; the funnel follows every document from stage to stage; a kill in any stage resumes to the
same bytes; the real-data tier trains a model with ``tokenmill quality train`` and runs the whole preset."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

pytest.importorskip("fasttext")

from tokenmill.cli import main  # noqa: E402
from tokenmill.curate.quality.classifier import train_quality  # noqa: E402
from tokenmill.curate.report.funnel import recompute  # noqa: E402
from tokenmill.curate.workflows.curate import run_curate  # noqa: E402
from tokenmill.curate.workflows.presets import PRESETS, preset_specs  # noqa: E402
from tokenmill.errors import ConfigError  # noqa: E402
from tokenmill.report.ledger import file_schema  # noqa: E402

HERE = Path(__file__).resolve().parent
SRC = HERE.parents[1] / "src"
FORMAL = ("the committee examined evidence regarding historical economic development population government "
          "university research policy analysis century national scientific methods").split()
SPAM = "click here buy now cheap deal free shipping lol omg subscribe best price win prize limited offer".split()


def _texts(words: list[str], n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(words) for _ in range(60)) + "." for _ in range(n)]


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("model") / "quality.bin"
    # the full model: on texts drawn from two 20-word vocabularies the quantised one gives tied top scores, and
    # the percentile tests below need the formal documents' scores to differ (the quantised default: test_quality.py)
    train_quality(_texts(FORMAL, 200, 1), _texts(SPAM, 200, 2), out=out, quantize=False)
    return str(out)


def write_inputs(directory: Path) -> tuple[Path, dict]:
    """Three JSONL files: 12 formal and 12 spam documents, 3 exact copies (case and spacing changed) and
    2 near copies (one word changed) of formal documents, spread over the files; and a German page."""
    formal, spam = _texts(FORMAL, 12, 3), _texts(SPAM, 12, 4)
    exact = [formal[0].upper(), "  " + formal[1].replace(" ", "   "), formal[0]]
    near = [formal[2].replace(formal[2].split()[30], "zebra", 1), formal[3].replace(formal[3].split()[10], "quasar", 1)]
    files = [formal[:6] + spam[:6], formal[6:] + exact + spam[6:9], spam[9:] + near + ["Ein deutscher Satz über das Wetter."]]
    directory.mkdir(parents=True, exist_ok=True)
    for i, texts in enumerate(files):
        (directory / f"part-{i}.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    return directory, {"documents": sum(map(len, files)), "exact": 3, "near": 2}


def steps_with(model: str) -> list[dict]:
    return [{"name": "language", "languages": ["en"], "threshold": 0.3}, {"name": "exact_dedup"},
            {"name": "minhash_dedup"}, {"name": "quality", "model": model, "top_fraction": 0.5}]


def test_dclm_preset_order_and_its_model():
    names = [s["name"] for s in PRESETS["dclm"]]
    assert names == [s["name"] for s in PRESETS["refinedweb"]] + ["exact_dedup", "minhash_dedup", "quality"]
    with pytest.raises(ConfigError, match=r"needs a model.*tokenmill quality train.*--quality-model"):
        preset_specs("dclm")
    with pytest.raises(ConfigError, match="no such file"):
        preset_specs("dclm", quality_model="/nonexistent/quality.bin")
    with pytest.raises(ConfigError, match="has no quality step"):
        preset_specs("fineweb", quality_model=__file__)
    assert preset_specs("dclm", quality_model=__file__)[-1] == {"name": "quality", "top_fraction": 0.1,
                                                               "model": __file__}


def test_cli_refuses_dclm_without_a_model_before_any_work(tmp_path, capsys):
    src, _ = write_inputs(tmp_path / "in")
    assert main(["curate", str(src), "--preset", "dclm", "--out", str(tmp_path / "out")]) == 1
    assert "tokenmill quality train" in capsys.readouterr().err and not (tmp_path / "out").exists()
    assert main(["pretrain", str(src), "--preset", "dclm", "--out", str(tmp_path / "p")]) == 1
    assert "curate first" in capsys.readouterr().err and not (tmp_path / "p").exists()
    cfg = tmp_path / "p.yaml"
    cfg.write_text("steps:\n  - {name: language}\n  - {name: exact_dedup}\n")
    assert main(["pretrain", str(src), "--config", str(cfg), "--out", str(tmp_path / "p")]) == 1
    err = capsys.readouterr().err
    assert "steps[1]: exact_dedup is a corpus step" in err and "tokenmill curate" in err and "steps[0]" not in err


def test_pretrain_refuses_a_corpus_wide_quality_cut(model, tmp_path, capsys):
    src, _ = write_inputs(tmp_path / "in")
    cfg = tmp_path / "p.yaml"
    cfg.write_text(f"steps:\n  - {{name: quality, model: {model}, top_fraction: 0.1}}\n")
    assert main(["pretrain", str(src), "--config", str(cfg), "--out", str(tmp_path / "p")]) == 1
    assert "quality is a corpus step" in capsys.readouterr().err


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and "_state" not in p.parts and p.name != "manifest.json"}


@pytest.fixture(scope="module")
def dclm_run(model, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dclm")
    src, planted = write_inputs(tmp / "in")
    manifest = run_curate([str(src)], out=tmp / "out", steps=steps_with(model), workers=1, progress=False)
    return tmp, manifest, planted


def test_dedup_then_top_fraction_in_one_curate_run(dclm_run):
    tmp, m, planted = dclm_run
    rows = {r["step"]: r for r in m["funnel"]["rows"]}
    assert m["counts"]["balanced"] and m["counts"]["input"] == planted["documents"]
    assert rows["language_v1"]["removed"] == 1
    assert rows["exact_dedup_v1"]["removed"] == planted["exact"]
    assert rows["minhash_dedup_v1"]["removed"] == planted["near"]
    reached = rows["quality_v1"]["reached"]
    assert reached == 24 and rows["quality_v1"]["left"] == m["counts"]["kept"] == 12  # the formal half
    kept = pq.read_table(tmp / "out" / "documents").column("text").to_pylist()
    assert len(kept) == 12 and all(t.split()[0] in FORMAL for t in kept)
    # every corpus stage names its files after the input units and carries the input line to its ledger
    for stage in ("exact_dedup", "minhash_dedup", "quality_apply"):
        files = m["stage_ledgers"][stage]
        assert [Path(f).stem for f in files] == [Path(f).stem for f in m["documents"]]
        assert "loc" in file_schema(tmp / "out" / files[0]).names
    assert m["stage_ledgers"]["quality_apply"][0].startswith("steps/quality/ledger/")
    assert set(m["run"]["stage_seconds"]) == set(m["stages"])  # wall seconds of every stage


def test_funnel_recomputed_from_the_ledger_matches_the_run(dclm_run):
    tmp, m, _ = dclm_run
    again = recompute(tmp / "out", {})
    assert [(r["step"], r["removed"]) for r in again["rows"]] == [(r["step"], r["removed"]) for r in m["funnel"]["rows"]]
    assert again["kept"] == m["counts"]["kept"] and again["unscored"] == 0
    looser = recompute(tmp / "out", {("language", "languages"): ["en", "de"]})  # the German page reaches dedup
    assert looser["rows"][0]["removed"] == 0 and looser["unscored"] == 1


KILLER = r'''
import json, os, signal, sys
from tokenmill.curate.workflows.curate import run_curate
from tokenmill.engine.local import commit_unit

KILL = sys.argv[4]

class KillingExecutor:
    """Commits the first unit of stage KILL, then dies by SIGKILL (a one-unit stage: its files staged)."""
    def run(self, task, units, state, progress=None):
        if hasattr(task, "setup"):
            task.setup()
        results = {}
        for i, unit in enumerate(units):
            if state.key == KILL + "_v1":
                if len(units) == 1:
                    task(unit, state.staging(unit).mkdir(parents=True, exist_ok=True) or state.staging(unit))
                    os.kill(os.getpid(), signal.SIGKILL)
                if i == 1:
                    os.kill(os.getpid(), signal.SIGKILL)
            results[unit.index] = commit_unit(task, unit, state)
        return results

run_curate([sys.argv[1]], out=sys.argv[2], steps=json.loads(sys.argv[3]), executor=KillingExecutor(),
           progress=False)
'''
STAGES = ["curate", "exact_dedup.hash", "exact_dedup.groups", "exact_dedup", "minhash_dedup.signatures",
          "minhash_dedup.buckets", "minhash_dedup.verify", "minhash_dedup.components", "minhash_dedup",
          "quality_score", "quality_apply", "curate_11", "ledger"]


def test_the_run_has_the_stages_the_kill_test_names(dclm_run):
    assert [k.removesuffix("_v1") for k in dclm_run[1]["stages"]] == STAGES


# one stage of each kind (a one-unit stage dies with its files staged; the others after one committed unit);
# tests/curate/test_dedup_minhash.py kills each MinHash stage on its own
@pytest.mark.parametrize("stage", ["exact_dedup.groups", "minhash_dedup.components", "quality_score", "quality_apply",
                                   "ledger"])
def test_killed_in_a_stage_resumes_to_the_same_bytes(stage, dclm_run, model, tmp_path):
    clean = _tree(dclm_run[0] / "out")
    src = dclm_run[0] / "in"  # the same input paths: the manifest and the report name them
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    proc = subprocess.run([sys.executable, "-c", KILLER, str(src), str(tmp_path / "out"),
                           json.dumps(steps_with(model)), stage], env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert not (tmp_path / "out" / "manifest.json").exists()
    m = run_curate([str(src)], out=tmp_path / "out", steps=steps_with(model), workers=1, progress=False)
    assert _tree(tmp_path / "out") == clean and m["funnel"] == dclm_run[1]["funnel"]


def test_real_data_dclm_preset_with_a_model_trained_by_the_cli(shared_data, realdata_quality_model, tmp_path, capsys):
    model, trained = realdata_quality_model  # `tokenmill quality train` on the shared quality sets
    assert "held-out: accuracy" in trained
    out = tmp_path / "out"
    assert main(["curate", str(shared_data / "pretrain"), "--preset", "dclm", "--quality-model", str(model),
                 "--out", str(out), "--no-progress", "--workers", "1"]) == 0
    printed = capsys.readouterr().out
    assert "exact_dedup_v1" in printed and "minhash_dedup_v1" in printed and "quality_v1" in printed
    m = json.loads((out / "manifest.json").read_text())
    rows = {r["step"]: r for r in m["funnel"]["rows"]}
    assert m["counts"]["balanced"] and [r["step"] for r in m["funnel"]["rows"]][-3:] == [
        "exact_dedup_v1", "minhash_dedup_v1", "quality_v1"]
    assert rows["exact_dedup_v1"]["reached"] == rows["refinedweb_v1"]["left"] > 100
    q = rows["quality_v1"]
    assert q["reached"] > 50 and q["left"] >= 0.1 * q["reached"] and q["left"] <= 0.1 * q["reached"] + 2
    assert sum(pq.read_metadata(out / f).num_rows for f in m["documents"]) == q["left"] == m["counts"]["kept"]


def test_funnel_shows_cluster_sizes_and_the_score_histogram(dclm_run, capsys):
    tmp, m, _ = dclm_run
    rows = {r["step"]: r for r in m["funnel"]["rows"]}
    exact = rows["exact_dedup_v1"]["clusters"]
    assert exact["column"] == "exact_dedup.group_size" and exact["largest"] == 3
    assert exact["sizes"] == [{"size": 2, "clusters": 1, "documents": 2, "removed": 1},
                              {"size": 3, "clusters": 1, "documents": 3, "removed": 2}]
    near = rows["minhash_dedup_v1"]["clusters"]
    assert near["sizes"] == [{"size": 2, "clusters": 2, "documents": 4, "removed": 2}]
    assert sum(r["removed"] for r in near["sizes"]) == rows["minhash_dedup_v1"]["removed"]
    hist = rows["quality_v1"]["histogram"]
    assert hist["column"] == "quality.score" and sum(hist["counts"]) == hist["documents"] == 24
    cut = m["steps"][-1]["cut"]
    assert hist["cut"] == cut and 0 < cut < 1
    assert sum(hist["counts"][int(cut * 20):]) >= 12  # the kept half lies at or above the cut's bin
    assert "clusters" not in rows["language_v1"] and "histogram" not in rows["exact_dedup_v1"]
    assert recompute(tmp / "out", {})["rows"][-1]["histogram"] == hist  # `tokenmill funnel` shows them too
    assert main(["funnel", str(tmp / "out")]) == 0
    printed = capsys.readouterr().out
    assert "clusters: 2 of 5 documents (count x size: 1x2, 1x3)" in printed and f"cut {cut:.4g}" in printed


def test_threshold_mode_has_the_histogram_with_its_threshold(model, tmp_path):
    src, _ = write_inputs(tmp_path / "in")
    m = run_curate([str(src)], out=tmp_path / "out", steps=[{"name": "quality", "model": model, "threshold": 0.5}],
                   workers=1, progress=False)
    hist = m["funnel"]["rows"][0]["histogram"]
    assert hist["cut"] == 0.5 and sum(hist["counts"]) == m["counts"]["input"] == 30
    assert sum(hist["counts"][10:]) == m["counts"]["kept"]  # kept: scores >= 0.5, bins 10..19


def test_report_shows_cluster_sizes_and_the_score_histogram(dclm_run):
    from test_report import CHROMIUM, _elements, load

    html = (dclm_run[0] / "out" / "report.html").read_text()
    el = _elements(html)
    assert el.count("svg", "clusters") == 2 and el.count("table", "clusters") == 2
    assert el.count("svg", "score-hist") == 1
    assert 'data-column="exact_dedup.group"' not in html and 'data-column="minhash_dedup.cluster"' not in html
    assert "2 cluster(s) of duplicates holding 5 documents (largest 3)" in html
    if CHROMIUM is None:
        pytest.skip("chromium not installed: the page was checked as HTML only")
    dom, errors = load(dclm_run[0] / "out" / "report.html")
    assert errors == []
    el = _elements(dom)
    assert el.count("svg", "clusters") == 2 and el.count("svg", "score-hist") == 1
    assert el.count("line", "threshold") >= 1


def test_funnel_set_top_fraction_equals_a_rerun(dclm_run, model, tmp_path, capsys):
    tmp, m, _ = dclm_run
    again = recompute(tmp / "out", {("quality", "top_fraction"): 0.25})
    steps = steps_with(model)
    steps[-1]["top_fraction"] = 0.25
    rerun = run_curate([str(tmp / "in")], out=tmp_path / "rerun", steps=steps, workers=1, progress=False)
    assert again["kept"] == rerun["counts"]["kept"] < m["counts"]["kept"]
    assert again["rows"][-1]["rules"] == rerun["funnel"]["rows"][-1]["rules"]
    assert again["rows"][-1]["histogram"]["cut"] == rerun["steps"][-1]["cut"] > m["steps"][-1]["cut"]
    assert main(["funnel", str(tmp / "out"), "--set", "exact_dedup.keep=longest"]) == 1
    assert "exact_dedup is a corpus step" in capsys.readouterr().err
    assert main(["funnel", str(tmp / "out"), "--set", "quality.top_fraction=2"]) == 1
    assert "expected a fraction" in capsys.readouterr().err


def test_a_finished_run_leaves_one_state_file_per_stage_and_no_intermediate(dclm_run, model):
    tmp, m, _ = dclm_run
    out = tmp / "out"
    files = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert [f for f in files if f.startswith("_work/")] == ["_work/quality_score/cut.json"]
    steps = [f for f in files if f.startswith("steps/")]  # no step's documents copy, no loose ledger part
    assert steps == sorted(f"steps/{Path(rel).parent.parent.name}/ledger-000000.zip"
                           for rel in {files[0] for files in m["stage_ledgers"].values() if files})
    assert not [f for f in files if "/done/" in f or "/tmp/" in f]
    assert sorted(f for f in files if f.endswith("index.jsonl")) == sorted(f"_state/{k}/index.jsonl" for k in m["stages"])
    before = _tree(out)
    again = run_curate([str(tmp / "in")], out=out, steps=steps_with(model), workers=1, progress=False)
    assert _tree(out) == before and again["funnel"] == m["funnel"]  # planned again without the dropped files


DIES_AS_IT_ENDS = r'''
import os, shutil, signal, sys
from tokenmill.curate.workflows.curate import run_curate
from tokenmill.engine import workflow

KEY, POINT = sys.argv[4], sys.argv[5]
write = workflow.atomic_write_lines

def write_index(path, lines):
    write(path, lines)
    if path.parent.name == KEY and POINT == "index":
        os.kill(os.getpid(), signal.SIGKILL)  # the index renamed in, the markers and the dropped dirs still there

def remove(path, *args, **kwargs):
    if POINT == "drop" and "/_state/" not in str(path) and os.path.isdir(path) and os.listdir(path):
        victims = sorted(os.listdir(path))
        for name in victims[: max(1, len(victims) // 2)]:
            p = os.path.join(path, name)
            shutil.rmtree(p) if os.path.isdir(p) else os.unlink(p)
        os.kill(os.getpid(), signal.SIGKILL)  # half of the first dropped directory removed
    shutil.rmtree(path, *args, **kwargs)

workflow.atomic_write_lines = write_index
workflow.shutil = type("Shutil", (), {"rmtree": staticmethod(remove)})
run_curate([sys.argv[1]], out=sys.argv[2], steps=__import__("json").loads(sys.argv[3]), workers=1, progress=False)
'''


@pytest.mark.parametrize("key,point", [("exact_dedup.groups_v1", "index"), ("minhash_dedup_v1", "index"),
                                       ("quality_apply_v1", "index"), ("any", "drop")])
def test_killed_as_a_stage_ends_resumes_to_the_same_bytes(key, point, dclm_run, model, tmp_path):
    """Killed after a stage's index is renamed in (its markers and the directories it drops still there), or
    half-way through the first directory a stage drops: the resumed run ends with the same bytes."""
    clean = _tree(dclm_run[0] / "out")
    src = dclm_run[0] / "in"
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    proc = subprocess.run([sys.executable, "-c", DIES_AS_IT_ENDS, str(src), str(tmp_path / "out"),
                           json.dumps(steps_with(model)), key, point], env=env, capture_output=True, text=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert not (tmp_path / "out" / "manifest.json").exists()
    m = run_curate([str(src)], out=tmp_path / "out", steps=steps_with(model), workers=1, progress=False)
    assert _tree(tmp_path / "out") == clean and m["funnel"] == dclm_run[1]["funnel"]
    assert not list((tmp_path / "out").rglob("done")) and not list((tmp_path / "out").rglob("*.tmp"))
