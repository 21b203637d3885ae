"""``tokenmill select`` and the ``dsir`` step: the drawn documents, the ledger, the same bytes at any worker
count and after a kill -9, the errors that name what to change."""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from selectkit import WIKI, tree, write_pool

import statekit
from tokenmill.cli import main
from tokenmill.curate.select.dsir import Dsir
from tokenmill.curate.workflows.curate import run_curate
from tokenmill.errors import ConfigError
from tokenmill.steps.build import build_step

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _select(raw, ref, out, *extra) -> int:
    return main(["select", "--target", ref, "--from", *raw, "--n", "30", "--out", str(out), "--no-progress", *extra])


def test_select_draws_reference_like_documents_and_the_ledger_says_why(tmp_path, capsys):
    raw, ref = write_pool(tmp_path)
    assert _select(raw, ref, tmp_path / "out") == 0
    assert "select: drew 30 of 165 documents (5 under 100 words never drawn)" in capsys.readouterr().out
    drawn = pq.read_table(tmp_path / "out" / "documents").column("text").to_pylist()
    assert len(drawn) == 30 and all(set(t.lower().rstrip(".").split()) <= set(WIKI) for t in drawn)
    ledger = pq.read_table(tmp_path / "out" / "ledger").to_pylist()
    assert len(ledger) == 165 and sum(r["kept"] for r in ledger) == 30
    reasons = {r["reason"] for r in ledger if not r["kept"]}
    assert reasons == {"dsir_v1:not_drawn", "dsir_v1:too_short"}
    assert all(isinstance(r["dsir.log_weight"], float) for r in ledger)
    lowest_drawn = min(r["dsir.log_weight"] for r in ledger if r["kept"])
    shop = [r["dsir.log_weight"] for r in ledger if r["reason"] == "dsir_v1:not_drawn" and r["dsir.log_weight"] < 0]
    assert shop and max(shop) < lowest_drawn
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["track"] == "select" and manifest["steps"][0]["name"] == "dsir"
    assert (tmp_path / "out" / "datacard.md").exists()


def test_the_same_documents_and_ledger_at_any_worker_count_and_unit_size(tmp_path):
    raw, ref = write_pool(tmp_path, files=3)
    assert _select(raw, ref, tmp_path / "a", "--workers", "1") == 0
    assert _select(raw, ref, tmp_path / "b", "--workers", "2", "--unit-bytes", "20000") == 0
    one, two = (pq.read_table(tmp_path / d / "ledger").sort_by([("source", "ascending"), ("loc", "ascending")])
                for d in "ab")
    assert one.column("kept").to_pylist() == two.column("kept").to_pylist()
    assert one.column("dsir.log_weight").to_pylist() == two.column("dsir.log_weight").to_pylist()


def test_the_seed_changes_the_draw_and_fixes_it(tmp_path):
    _, ref = write_pool(tmp_path)
    same = " ".join(WIKI * 4)  # equal weights: the draw is the Gumbel noise alone
    (tmp_path / "same.jsonl").write_text((json.dumps({"text": same}) + "\n") * 60)
    raw = [str(tmp_path / "same.jsonl")]
    for name, seed in (("a", "1"), ("b", "1"), ("c", "2")):
        assert _select(raw, ref, tmp_path / name, "--seed", seed, "--n", "20") == 0
    kept = {n: pq.read_table(tmp_path / n / "ledger").column("kept").to_pylist() for n in "abc"}
    assert kept["a"] == kept["b"] and kept["a"] != kept["c"]


def test_fraction_draws_that_share_of_the_pool(tmp_path):
    raw, ref = write_pool(tmp_path)
    m = run_curate(raw, out=tmp_path / "out", steps=[{"name": "dsir", "target": ref, "fraction": 0.25}],
                   progress=False, report=False)
    assert m["counts"]["kept"] == 40  # a quarter of the 160 documents of at least 100 words


def test_a_run_killed_with_sigkill_resumes_to_the_same_bytes(tmp_path):
    raw, ref = write_pool(tmp_path, shop=400, wiki=100, files=4)
    args = ["select", "--target", ref, "--from", *raw, "--n", "50", "--workers", "1", "--unit-bytes", "20000",
            "--no-progress"]
    code = f"import sys; from tokenmill.cli import main; sys.exit(main({args + ['--out', str(tmp_path / 'a')]!r}))"
    env = {**os.environ, "PYTHONPATH": SRC}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)
    killed = tmp_path / "b"
    proc = subprocess.Popen([sys.executable, "-c", code.replace(str(tmp_path / "a"), str(killed))], env=env,
                            start_new_session=True)
    done = killed / "_state" / "dsir_score_v1" / "done"
    while proc.poll() is None and not statekit.count(done):
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (killed / "manifest.json").exists()  # killed mid-run
    subprocess.run([sys.executable, "-c", code.replace(str(tmp_path / "a"), str(killed))], check=True, env=env)
    assert tree(killed) == tree(tmp_path / "a")


def test_an_empty_reference_is_refused_before_any_work(tmp_path, capsys):
    raw, _ = write_pool(tmp_path)
    (tmp_path / "empty.jsonl").write_text('{"text": "  "}\n')
    assert _select(raw, str(tmp_path / "empty.jsonl"), tmp_path / "out") == 1
    err = capsys.readouterr().err
    assert "empty.jsonl holds no document with a non-blank 'text' (an empty reference)" in err
    assert not (tmp_path / "out").exists()


def test_n_above_the_pool_fails_at_the_draw_naming_what_to_change(tmp_path, capsys):
    raw, ref = write_pool(tmp_path)
    assert main(["select", "--target", ref, "--from", *raw, "--n", "500", "--out", str(tmp_path / "out"),
                 "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "n=500 but the pool holds 160 documents of at least min_words=100 words: lower n" in err
    assert not (tmp_path / "out" / "documents").exists()


@pytest.mark.parametrize("spec, message", [
    ({"target": "REF"}, "give n (documents to draw) or fraction"),
    ({"target": "REF", "n": 3, "fraction": 0.5}, "give n (documents to draw) or fraction"),
    ({"target": "REF", "n": 0}, "n: expected a whole number >= 1"),
    ({"target": "REF", "fraction": 1.5}, "fraction: expected a share in (0, 1]"),
    ({"target": [], "n": 3}, "target: give the reference files"),
])
def test_bad_step_parameters_name_the_parameter(tmp_path, spec, message):
    _, ref = write_pool(tmp_path)
    spec = {k: ref if v == "REF" else v for k, v in spec.items()}
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)").replace("]", r"\]")):
        build_step({"name": "dsir", **spec}, where="steps[0]")


def test_usage_without_n_or_target_is_a_usage_error(tmp_path, capsys):
    raw, ref = write_pool(tmp_path)
    assert main(["select", "--target", ref, "--from", *raw, "--out", str(tmp_path / "o")]) == 2
    assert "give --n N (documents to draw) or --fraction F" in capsys.readouterr().err
    assert main(["select", "--from", *raw, "--n", "3", "--out", str(tmp_path / "o")]) == 2


def test_the_step_survives_pickle_and_a_changed_reference_is_a_new_step(tmp_path):
    _, ref = write_pool(tmp_path)
    step = Dsir(target=ref, n=3)
    assert pickle.loads(pickle.dumps(step)) == step
    Path(ref).write_text(Path(ref).read_text() + '{"text": "another reference document"}\n')
    assert Dsir(target=ref, n=3).target_sha256 != step.target_sha256


def test_a_missing_reference_is_named_as_the_reference(tmp_path, capsys):
    raw, _ = write_pool(tmp_path)
    assert _select(raw, str(tmp_path / "nope.jsonl"), tmp_path / "out") == 1
    assert "target: input" in capsys.readouterr().err and not (tmp_path / "out").exists()


def test_dry_run_writes_nothing_and_limit_reads_the_first_records(tmp_path, capsys):
    raw, ref = write_pool(tmp_path)
    assert _select(raw, ref, tmp_path / "dry", "--dry-run") == 0
    assert "steps: dsir_v1" in capsys.readouterr().out and not (tmp_path / "dry").exists()
    assert main(["select", "--target", ref, "--from", *raw, "--n", "5", "--min-words", "0", "--limit", "10",
                 "--out", str(tmp_path / "lim"), "--no-progress"]) == 0
    assert json.loads((tmp_path / "lim" / "manifest.json").read_text())["counts"]["input"] == 20  # 10 per file


def test_a_finished_run_run_again_is_resumed_with_the_same_bytes(tmp_path):
    """The fit stage's features and the model are dropped once the run has used them: the same command on the
    finished output reads no dropped file and writes the same documents and ledger (it was a traceback)."""
    raw, ref = write_pool(tmp_path)
    assert _select(raw, ref, tmp_path / "out") == 0
    before = {p.relative_to(tmp_path / "out"): p.read_bytes() for p in (tmp_path / "out").rglob("*.parquet")}
    assert _select(raw, ref, tmp_path / "out") == 0
    after = {p.relative_to(tmp_path / "out"): p.read_bytes() for p in (tmp_path / "out").rglob("*.parquet")}
    assert after == before and before
