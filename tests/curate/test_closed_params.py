"""Step parameters with a closed set of values are checked when the pipeline is built, before any work:
an unknown language code would otherwise remove every document and exit 0."""

from __future__ import annotations

import json

import pytest

from tokenmill.cli import main
from tokenmill.errors import ConfigError
from tokenmill.steps.build import build_steps

pytest.importorskip("py3langid")

BAD = [
    ({"name": "language", "languages": ["xx"]}, "'xx'"),
    ({"name": "language", "languages": ["en", "klingon"]}, "'klingon'"),
    ({"name": "language", "languages": ["de"], "candidates": ["en", "fr"]}, "'de'"),
    ({"name": "language", "candidates": ["xx"]}, "xx"),
    ({"name": "line_dedup", "keep": "sometimes"}, "keep"),
    ({"name": "minhash_dedup", "shingle": "sentence"}, "shingle"),
    ({"name": "license", "unknown": "maybe"}, "unknown"),
]


@pytest.mark.parametrize("spec, named", BAD, ids=[f"{s['name']}-{i}" for i, (s, _) in enumerate(BAD)])
def test_a_value_outside_the_closed_set_is_refused_when_the_steps_are_built(spec, named):
    with pytest.raises(ConfigError, match=named):
        build_steps([spec])


def test_known_codes_and_their_spellings_are_accepted():
    (step,) = build_steps([{"name": "language", "languages": ["EN", "deu", "pt-BR", "no"]}])
    assert step.languages == ["en", "de", "pt", "nb", "nn"]


def test_curate_with_an_unknown_language_code_stops_before_any_work(tmp_path, capsys):
    src = tmp_path / "docs.jsonl"
    src.write_text("".join(json.dumps({"text": f"This is an English sentence number {i}."}) + "\n" for i in range(5)))
    cfg = tmp_path / "pipeline.yaml"
    cfg.write_text(f"inputs: [{src}]\nout: {tmp_path / 'out'}\nsteps:\n  - {{name: language, languages: [xx]}}\n")
    assert main(["curate", "--config", str(cfg), "--no-progress", "--workers", "1"]) == 1
    err = capsys.readouterr().err
    assert "languages: 'xx'" in err and "every document would be removed" in err
    assert not (tmp_path / "out" / "documents").exists()
