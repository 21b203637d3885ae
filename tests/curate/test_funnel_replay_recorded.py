"""``funnel --set`` rebuilds a step from its recorded entry, which holds derived values beside the parameters
(``quality``'s model digest): those are left out of the rebuild, and the replay equals a rerun."""

from __future__ import annotations

import pytest
from test_dclm import FORMAL, SPAM, _texts, write_inputs

from tokenmill.cli import main
from tokenmill.curate.quality.classifier import train_quality
from tokenmill.curate.report.funnel import recompute
from tokenmill.curate.workflows.curate import run_curate
from tokenmill.steps.build import recorded_options


@pytest.fixture(scope="module")
def quality_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("replay")
    train_quality(_texts(FORMAL, 200, 1), _texts(SPAM, 200, 2), out=tmp / "q.bin", quantize=False)
    write_inputs(tmp / "in")
    steps = [{"name": "quality", "model": str(tmp / "q.bin"), "threshold": 0.5}]
    manifest = run_curate([str(tmp / "in")], out=tmp / "out", steps=steps, workers=1, progress=False)
    return tmp, manifest


def test_a_quality_threshold_replayed_from_the_ledger_equals_a_rerun(quality_run, tmp_path, capsys):
    tmp, manifest = quality_run
    assert "model_sha256" in manifest["steps"][0]["params"]  # recorded, though not a parameter the step takes
    again = recompute(tmp / "out", {("quality", "threshold"): 0.9})
    steps = [{"name": "quality", "model": str(tmp / "q.bin"), "threshold": 0.9}]
    rerun = run_curate([str(tmp / "in")], out=tmp_path / "rerun", steps=steps, workers=1, progress=False)
    assert again["kept"] == rerun["counts"]["kept"] < manifest["counts"]["kept"]
    assert again["rows"][-1]["rules"] == rerun["funnel"]["rows"][-1]["rules"]
    assert again["rows"][-1]["histogram"]["cut"] == 0.9  # the histogram marks the threshold asked for
    assert main(["funnel", str(tmp / "out"), "--set", "quality.threshold=0.9"]) == 0
    assert "unknown parameter" not in capsys.readouterr().err


def test_recorded_options_keeps_what_the_step_takes():
    spec = {"name": "quality", "model": "m.bin", "threshold": 0.5, "model_sha256": "ab" * 32}
    assert recorded_options(spec) == {"name": "quality", "model": "m.bin", "threshold": 0.5}
    machine = {"name": "machine_text", "threshold": 0.9, "model_sha256": "cd" * 32}  # a parameter there: kept
    assert recorded_options(machine) == machine
