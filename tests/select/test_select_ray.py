"""``tokenmill select`` on a local Ray cluster: the same drawn documents and ledger bytes as the local engine."""

from __future__ import annotations

import pytest

pytest.importorskip("ray", reason="ray is not installed (pip install 'tokenmill[ray]')")

from selectkit import tree, write_pool  # noqa: E402

from tokenmill.curate.workflows.curate import run_curate  # noqa: E402
from tokenmill.engine.ray import RayExecutor  # noqa: E402


def test_select_on_ray_draws_the_local_engines_documents(ray_cluster, tmp_path):
    raw, ref = write_pool(tmp_path, files=3)
    steps = [{"name": "dsir", "target": ref, "n": 25, "seed": 7}]
    local = run_curate(raw, out=tmp_path / "local", steps=steps, workers=1, unit_bytes=20_000, progress=False)
    on_ray = run_curate(raw, out=tmp_path / "ray", steps=steps, executor=RayExecutor(workers=2), unit_bytes=20_000,
                        progress=False)
    assert on_ray["run"]["engine"] == "ray" and on_ray["counts"] == local["counts"]
    assert tree(tmp_path / "ray") == tree(tmp_path / "local")
