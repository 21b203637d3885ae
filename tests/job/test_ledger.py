"""The decision ledger tells the truth: one row per input record (rejects included, with their reason),
the final ``kept``, the reason of the step that removed it (corpus stages included), every step's
statistics; on every preset, with corpus steps, inside ``pretrain --preset``, and read back by the funnel."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "curate"))

from curatekit import write_corpus  # noqa: E402
from raykit import write_web_corpus  # noqa: E402

from tokenmill.base import segments  # noqa: E402
from tokenmill.curate.report.funnel import recompute  # noqa: E402
from tokenmill.curate.workflows.curate import run_curate  # noqa: E402
from tokenmill.pretrain import run_pretrain  # noqa: E402
from tokenmill.report.ledger import ledger_problems, read_ledger  # noqa: E402


def _documents(out: Path) -> int:
    return sum(pq.read_metadata(p).num_rows for p in (out / "documents").glob("*.parquet"))


def _inputs(tmp_path: Path) -> list[str]:
    web = write_web_corpus(tmp_path / "in" / "web.jsonl", 40)
    mixed = write_corpus(tmp_path / "in" / "mixed.jsonl")
    return [str(web), str(mixed)]


@pytest.mark.parametrize("preset", ["none", "gopher", "c4", "fineweb", "refinedweb"])
def test_every_preset_writes_one_truthful_row_per_input_record(preset, tmp_path):
    out = tmp_path / "out"
    manifest = run_curate(_inputs(tmp_path), out=out, preset=preset, workers=1, unit_bytes=4_000, progress=False,
                          report=False)
    assert ledger_problems(out, manifest, kept_documents=_documents(out)) == []
    table = read_ledger(out, manifest)
    assert set(manifest["decision_ledger"]["files"]) == {f"ledger/{p.name}" for p in (out / "ledger").glob("*")}
    rejected = [r for r in table.column("reason").to_pylist() if r and r.startswith("rejected:")]
    assert sorted(rejected) == sorted(f"rejected:{k}" for k, v in manifest["counts"]["rejected"].items() for _ in range(v))
    assert len(rejected) >= 3  # the corpus's broken lines are rows too


def test_only_units_with_rejects_write_a_rejects_file(tmp_path):
    out = tmp_path / "out"
    manifest = run_curate(_inputs(tmp_path), out=out, workers=1, unit_bytes=4_000, progress=False, report=False)
    rejecting = {Path(rel).stem for rel in manifest["decision_ledger"]["files"]
                 if any(r and r.startswith("rejected:") for r in pq.read_table(out / rel).column("reason").to_pylist())}
    files = {p.stem for p in (out / "_state" / "rejects").glob("*.jsonl")}
    assert files == rejecting and 0 < len(files) < len(manifest["decision_ledger"]["files"])
    lines = (out / "rejects.jsonl").read_bytes().count(b"\n")
    assert lines == sum(manifest["counts"]["rejected"].values()) >= 3


def test_corpus_steps_put_their_reason_and_statistics_in_the_one_table(tmp_path):
    out = tmp_path / "out"
    steps = [{"name": "url"}, {"name": "gopher_quality"}, {"name": "exact_dedup"},
             {"name": "minhash_dedup", "partition_edges": 40}, {"name": "length", "min_chars": 10}]
    manifest = run_curate(_inputs(tmp_path), out=out, steps=steps, workers=2, unit_bytes=4_000, progress=False,
                          report=False)
    assert ledger_problems(out, manifest, kept_documents=_documents(out)) == []
    table = read_ledger(out, manifest)
    reasons = set(table.column("reason").to_pylist())
    assert {"exact_dedup_v1:duplicate", "minhash_dedup_v1:duplicate"} <= reasons
    for column in ("exact_dedup.group_size", "minhash_dedup.cluster_size", "gopher_quality.stop_words", "url.host"):
        assert column in table.column_names, column
    dup = table.filter(pc.equal(table.column("reason"), "exact_dedup_v1:duplicate"))
    assert min(dup.column("exact_dedup.group_size").to_pylist()) >= 2
    # nothing but the one table is under ledger/; the stages' own parts are packed under steps/<stage>/
    stages = {s["stage"] for s in manifest["steps"]}
    packed = sorted(p.relative_to(out).as_posix() for p in (out / "steps").rglob("*") if p.is_file())
    assert packed == sorted(manifest["stage_packs"]) and {Path(p).parent.name for p in packed} <= stages
    assert all(Path(p).name == "ledger-000000.zip" for p in packed)
    funnel = recompute(out, {})
    assert funnel["kept"] == manifest["counts"]["kept"] == _documents(out)


def _outputs(out: Path) -> dict[str, bytes]:
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file() and p.parts[len(out.parts)] in ("documents", "ledger", "steps")}


def test_a_ledger_stage_killed_between_packs_resumes_to_the_same_bytes(tmp_path, monkeypatch):
    from tokenmill.curate.workflows import join
    from tokenmill.errors import StageError

    monkeypatch.setattr(join, "PACK_UNITS", 2)  # several packs out of a small input
    inputs = _inputs(tmp_path)
    steps = [{"name": "gopher_quality"}, {"name": "exact_dedup"}]
    a = run_curate(inputs, out=tmp_path / "a", steps=steps, workers=1, unit_bytes=4_000, progress=False, report=False)
    assert len(a["stage_packs"]) > 2 and {Path(p).name for p in a["stage_packs"]} >= {"ledger-000000.zip",
                                                                                      "ledger-000001.zip"}
    call = join.JoinTask.__call__

    def dies_at_the_second_pack(self, unit, staging):
        if unit.index == 1:
            raise StageError("killed")
        return call(self, unit, staging)

    monkeypatch.setattr(join.JoinTask, "__call__", dies_at_the_second_pack)
    with pytest.raises(StageError):
        run_curate(inputs, out=tmp_path / "b", steps=steps, workers=1, unit_bytes=4_000, progress=False, report=False)
    b = tmp_path / "b"
    assert (b / "ledger").is_dir() and (b / "steps" / "curate" / "ledger").is_dir()  # loose parts kept until the end
    for stage in ("curate", "exact_dedup"):  # in one segment file per stage (one worker), not a file per unit
        folder = b / "steps" / stage / "ledger"
        held = sorted(p.name for p in folder.iterdir())
        assert held == sorted([segments.INDEX, *(n for n in held if n.startswith(segments.PREFIX))]) and len(held) == 2
        assert segments.listing(folder) == sorted(Path(rel).name for rel in a["stage_ledgers"][stage])
    monkeypatch.setattr(join.JoinTask, "__call__", call)
    resumed = run_curate(inputs, out=b, steps=steps, workers=2, unit_bytes=4_000, progress=False, report=False)
    assert _outputs(b) == _outputs(tmp_path / "a")  # no loose part left, every pack and ledger file the same
    assert resumed["decision_ledger"] == a["decision_ledger"] and resumed["funnel"] == a["funnel"]
    assert ledger_problems(b, resumed, kept_documents=_documents(b)) == []


def test_a_run_killed_after_the_ledger_stage_ended_drops_the_loose_parts_on_resume(tmp_path):
    import zipfile

    inputs = _inputs(tmp_path)
    steps = [{"name": "gopher_quality"}, {"name": "exact_dedup"}]
    a = run_curate(inputs, out=tmp_path / "a", steps=steps, workers=1, unit_bytes=4_000, progress=False, report=False)
    clean = _outputs(tmp_path / "a")
    for rel in a["stage_packs"]:  # the parts put back beside their packs, as a kill before the drop leaves them
        with zipfile.ZipFile(tmp_path / "a" / rel) as zf:
            zf.extractall(tmp_path / "a" / Path(rel).parent / "ledger")
    assert _outputs(tmp_path / "a") != clean
    again = run_curate(inputs, out=tmp_path / "a", steps=steps, workers=1, unit_bytes=4_000, progress=False,
                       report=False)
    assert _outputs(tmp_path / "a") == clean and again["funnel"] == a["funnel"]


def test_pretrain_with_a_preset_writes_the_same_kind_of_ledger(tmp_path):
    out = tmp_path / "shards"
    from tokenmill.curate.workflows.presets import step_specs
    from tokenmill.steps.build import build_steps

    steps = build_steps(step_specs("gopher", None), source="test")
    manifest = run_pretrain(_inputs(tmp_path), out=str(out), tokenizer="default", workers=1, progress=False,
                            steps=steps, unit_bytes=4_000, config={"preset": "gopher"})
    assert ledger_problems(out, manifest) == []
    assert manifest["decision_ledger"]["rows"] == manifest["counts"]["input"]


def test_a_ledger_row_names_its_input_file_and_line(tmp_path):
    src = tmp_path / "in" / "d.jsonl"
    src.parent.mkdir()
    rng = random.Random(0)
    rows = [{"text": " ".join(rng.choice(["alpha", "beta", "the", "and", "of"]) for _ in range(80)),
             "url": f"https://e.org/{i}"} for i in range(5)]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows) + "not json\n")
    out = tmp_path / "out"
    manifest = run_curate([str(src)], out=out, preset="none", workers=1, progress=False, report=False)
    table = read_ledger(out, manifest).to_pylist()
    assert [r["record"] for r in table] == [f"d.jsonl:{i}" for i in range(1, 7)]
    assert [r["url"] for r in table[:5]] == [f"https://e.org/{i}" for i in range(5)]
    assert table[5]["reason"] == "rejected:malformed_json" and table[5]["kept"] is False
