"""The presets that share the heuristic steps write the same documents and ledger on real web text as the
code before those steps' fast paths (real-data tier).

``curate ../shared/data/pretrain --preset P --workers 1`` for ``gopher``, ``c4``, ``fineweb``, ``refinedweb``
and ``dclm`` (its model trained here from the shared quality sets, one thread, a fixed seed). Each output
table (``documents/``, ``ledger/`` and the stages' ledger parts, read in their packs) is digested by its content (its schema
and every value, written as one Arrow IPC stream), so the check does not depend on the Parquet writer's
version; ``golden/realdata_presets.json`` holds the digests taken from commit 889b348, before the fast
paths, then once more when the language step's probabilities became the same bits on every CPU (they had
depended on OpenBLAS's kernel for the machine: only the ``language.score`` column changed, in the ledger
and the first stage's ledger part). Regenerate only for an intended change of the output:
``TOKENMILL_UPDATE_GOLDEN=1``.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tokenmill.cli import main
from tokenmill.report.ledger import open_part

GOLDEN = Path(__file__).parent / "golden" / "realdata_presets.json"
PRESETS = ["gopher", "c4", "fineweb", "refinedweb", "dclm"]


def content_digest(path: Path) -> str:
    table = pq.read_table(open_part(path))  # a stage's part is read in its pack
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table.combine_chunks())
    return hashlib.sha256(sink.getvalue().to_pybytes()).hexdigest()


def kept(rel: str) -> bool:
    """An output table a finished run keeps: documents, the ledger and the stages' ledger parts (a stage's
    intermediate copy of the documents, ``steps/<stage>/docs/``, is dropped once its last reader has run)."""
    return rel.startswith(("documents/", "ledger/")) or "/ledger/" in rel


def tables(out: Path) -> dict[str, str]:
    """Each output table's digest by its logical path (a stage's ledger parts, packed once the run has ended,
    by the paths the manifest names them by)."""
    manifest = json.loads((out / "manifest.json").read_text())
    parts = [rel for files in manifest["stage_ledgers"].values() for rel in files]
    loose = [p.relative_to(out).as_posix() for p in out.rglob("*.parquet")]
    assert not [rel for rel in loose if "/ledger/" in rel], "a stage's part left unpacked"
    return {rel: content_digest(out / rel) for rel in sorted({*loose, *parts}) if kept(rel)}


@pytest.fixture
def model(realdata_quality_model) -> str:
    return realdata_quality_model[0]  # `tokenmill quality train` on the shared quality sets, one seed


@pytest.mark.realdata
@pytest.mark.parametrize("preset", PRESETS)
def test_preset_tables_match_the_golden_run(preset, shared_data, model, tmp_path):
    out = tmp_path / "out"
    extra = ["--quality-model", model] if preset == "dclm" else []
    assert main(["curate", str(shared_data / "pretrain"), "--preset", preset, *extra, "--out", str(out),
                 "--workers", "1", "--no-progress"]) == 0
    found = tables(out)
    assert any(k.startswith("documents/") for k in found) and any(k.startswith("ledger/") for k in found)
    golden = json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}
    if os.environ.get("TOKENMILL_UPDATE_GOLDEN") == "1":
        golden[preset] = found
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(json.dumps(golden, indent=1, sort_keys=True) + "\n")
    want = {name: digest for name, digest in golden[preset].items() if kept(name)}
    assert sorted(found) == sorted(want), "other output tables than the golden run"
    differing = [name for name in found if found[name] != want[name]]
    assert not differing, f"{preset}: tables differ from the golden run in {differing}"
