"""Presets: each published pipeline's steps in its order; the real-data tier runs `--preset fineweb`."""

from __future__ import annotations

import json

import pytest
from curatekit import write_corpus

from tokenmill.cli import main
from tokenmill.curate.workflows.curate import run_curate
from tokenmill.curate.workflows.presets import PRESETS, preset_specs
from tokenmill.errors import ConfigError
from tokenmill.steps.build import build_steps, missing_steps


def test_fineweb_order_and_known_presets():
    assert [s["name"] for s in preset_specs("fineweb")] == ["url", "language", "gopher_repetition", "gopher_quality",
                                                           "c4", "fineweb"]
    assert set(PRESETS) == {"gopher", "c4", "fineweb", "refinedweb", "dclm", "consent", "none"}
    with pytest.raises(ConfigError, match="known: gopher"):
        preset_specs("fineweeb")
    with pytest.raises(ConfigError, match="tokenmill quality train"):
        preset_specs("dclm")  # its quality step needs a model (tests/curate/test_dclm.py runs it with one)
    with pytest.raises(ConfigError, match="--robots-snapshot PATH"):
        preset_specs("consent+fineweb")  # its robots step needs a snapshot (tests/curate/test_consent.py)
    with pytest.raises(ConfigError, match="has no robots step"):
        preset_specs("fineweb", robots_snapshot=".")
    with pytest.raises(ConfigError, match="unknown preset"):
        preset_specs("consent+finewbe")
    both = preset_specs("consent+fineweb", robots_snapshot=".")
    assert [s["name"] for s in both] == ["robots", "tdm_optout", "license"] + [s["name"] for s in preset_specs("fineweb")]
    assert both[0]["snapshot"] == both[1]["snapshot"] == "."


@pytest.mark.parametrize("name", sorted(set(PRESETS) - {"dclm", "consent"}))  # those two need a file each
def test_preset_runs(name, tmp_path):
    specs = preset_specs(name)
    missing = missing_steps(specs)
    if missing:
        pytest.skip(f"preset {name}: steps not in this installation yet: {', '.join(missing)}")
    build_steps(specs)  # every preset parameter is a real parameter of its step
    src = write_corpus(tmp_path / "web.jsonl")
    m = run_curate([str(src)], out=tmp_path / "out", preset=name, workers=1, report=False)
    ids = {s["id"] for s in m["steps"]}
    assert m["counts"]["balanced"] and all(k.split(":")[0] in ids for k in m["counts"]["filtered"])


def test_curate_cli_prints_the_funnel(tmp_path, capsys):
    src = write_corpus(tmp_path / "web.jsonl")
    cfg = tmp_path / "p.yaml"
    cfg.write_text("steps:\n  - {name: language, languages: [en]}\n  - {name: pii}\n")
    assert main(["curate", str(src), "--out", str(tmp_path / "out"), "--config", str(cfg), "--workers", "1"]) == 0
    out, err = capsys.readouterr()
    assert "no --tokenizer" not in err  # curate writes documents: no tokenizer warning
    assert "funnel:" in out and "language_v1" in out and "rewritten: pii:" in out and "input 13 = kept" in out
    for name in ("manifest.json", "rejects.jsonl", "report.html"):
        assert (tmp_path / "out" / name).is_file()
    assert main(["curate", str(src), "--out", str(tmp_path / "o2"), "--preset", "nope"]) == 1
    assert "unknown preset" in capsys.readouterr().err
    cfg.write_text("steps:\n  - {name: language, threshold: high}\n  - {name: url, domain_files: [nope.txt]}\n")
    assert main(["curate", str(src), "--out", str(tmp_path / "o3"), "--config", str(cfg)]) == 1
    err = capsys.readouterr().err
    assert "steps[0]: threshold" in err and "steps[1]: domain_files: no file 'nope.txt'" in err


def test_real_data_with_the_steps_available(shared_data, tmp_path):
    specs = [{"name": "url"}, {"name": "language", "languages": ["en"]}, {"name": "pii"}]
    m = run_curate([str(shared_data / "pretrain")], out=tmp_path / "out", steps=specs, workers=2)
    assert m["counts"]["balanced"] and m["counts"]["input"] > 500 and 0 < m["counts"]["kept"] <= m["counts"]["input"]
    assert (tmp_path / "out" / "report.html").stat().st_size > 1000


def test_real_data_fineweb_preset(shared_data, tmp_path, capsys):
    missing = missing_steps(preset_specs("fineweb"))
    if missing:
        pytest.skip(f"preset fineweb: steps not in this installation yet: {', '.join(missing)}")
    assert main(["curate", str(shared_data / "pretrain"), "--preset", "fineweb", "--out", str(tmp_path / "out")]) == 0
    assert "funnel:" in capsys.readouterr().out
    m = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert m["counts"]["balanced"] and list((tmp_path / "out" / "ledger").glob("*.parquet"))
    assert main(["funnel", str(tmp_path / "out"), "--set", "gopher_quality.min_stop_words=3"]) == 0
