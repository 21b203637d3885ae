"""`tokenmill funnel`: recomputed from the ledger, equal to a full rerun with the changed parameters."""

from __future__ import annotations

import json

import pytest
from curatekit import write_corpus

from tokenmill.cli import main
from tokenmill.curate.report.funnel import parse_sets, recompute
from tokenmill.curate.workflows.curate import run_curate
from tokenmill.errors import ConfigError
from tokenmill.steps.build import missing_steps

STEPS = [{"name": "url", "block_domains": ["blocked.test"]},
         {"name": "language", "languages": ["en"], "threshold": 0.9},
         {"name": "pii"}, {"name": "length", "min_chars": 99}]


def _counts(funnel):
    return [(r["step"], r["reached"], r["removed"], r["rules"]) for r in funnel["rows"]], funnel["kept"]


@pytest.mark.parametrize("change", [
    {("language", "threshold"): 0.999},  # tighten
    {("language", "languages"): ["en", "de"], ("language", "threshold"): 0.5},  # loosen an earlier step
    {("length", "min_chars"): 10, ("url", "soft_threshold"): 1},
])
def test_funnel_set_equals_a_full_rerun(tmp_path, change):
    src = write_corpus(tmp_path / "web.jsonl")
    run_curate([str(src)], out=tmp_path / "a", steps=STEPS, workers=1, report=False)
    replayed = recompute(tmp_path / "a", change)
    changed = [dict(s) for s in STEPS]
    for (name, param), value in change.items():
        next(s for s in changed if s["name"] == name)[param] = value
    rerun = run_curate([str(src)], out=tmp_path / "b", steps=changed, workers=1, report=False)
    assert _counts(replayed) == _counts(rerun["funnel"])
    assert replayed["unscored"] == 0


def test_survivors_only_says_when_a_loosened_threshold_lacks_scores(tmp_path):
    src = write_corpus(tmp_path / "web.jsonl")
    run_curate([str(src)], out=tmp_path / "a", steps=STEPS, workers=1, score_removed=False, report=False)
    tightened = recompute(tmp_path / "a", {("language", "threshold"): 0.999})
    assert tightened["unscored"] == 0
    loosened = recompute(tmp_path / "a", {("url", "soft_threshold"): 1, ("language", "threshold"): 0.0,
                                          ("language", "languages"): []})
    assert loosened["unscored"] > 0


def test_funnel_cli_json_and_errors(tmp_path, capsys):
    src = write_corpus(tmp_path / "web.jsonl")
    run_curate([str(src)], out=tmp_path / "a", steps=STEPS, workers=1, report=False)
    assert main(["funnel", str(tmp_path / "a"), "--json"]) == 0
    funnel = json.loads(capsys.readouterr().out)
    assert funnel["rows"][0]["step"] == "rejected" and funnel["kept"] >= 0
    assert main(["funnel", str(tmp_path / "a"), "--set", "nope.x=1", "--set", "language.bogus=2",
                 "--set", "url.block_domains=[]", "--set", "bad"]) == 1
    err = capsys.readouterr().err
    assert "--set 'bad'" in err
    assert main(["funnel", str(tmp_path / "a"), "--set", "nope.x=1", "--set", "language.bogus=2",
                 "--set", "url.block_domains=[]"]) == 1
    err = capsys.readouterr().err
    assert "no step 'nope'" in err and "no parameter 'bogus'" in err and "ledger cannot replay" in err
    assert main(["funnel", str(tmp_path)]) == 1 and "no manifest.json" in capsys.readouterr().err


def test_parse_sets_reads_yaml_values():
    assert parse_sets(["a.b=3", "a.c=[en, de]", "x.y=0.5"]) == {("a", "b"): 3, ("a", "c"): ["en", "de"], ("x", "y"): 0.5}
    with pytest.raises(ConfigError):
        parse_sets(["noequals"])


GOPHER = [{"name": "gopher_quality"}]


@pytest.mark.skipif(bool(missing_steps(GOPHER)), reason=f"steps not in this installation: {missing_steps(GOPHER)}")
def test_funnel_min_stop_words_equals_rerun(tmp_path):
    src = write_corpus(tmp_path / "web.jsonl")
    steps = [{"name": "language", "languages": ["en"]}, {"name": "gopher_quality"}]
    run_curate([str(src)], out=tmp_path / "a", steps=steps, workers=1, report=False)
    replayed = recompute(tmp_path / "a", {("gopher_quality", "min_stop_words"): 3})
    rerun = run_curate([str(src)], out=tmp_path / "b", workers=1, report=False,
                       steps=[steps[0], {"name": "gopher_quality", "min_stop_words": 3}])
    assert _counts(replayed) == _counts(rerun["funnel"])


FINEWEB = [{"name": "fineweb"}]


@pytest.mark.skipif(bool(missing_steps(FINEWEB)), reason=f"steps not in this installation: {missing_steps(FINEWEB)}")
def test_a_parameter_that_changes_the_scores_is_refused_naming_those_that_replay(tmp_path, capsys):
    src = write_corpus(tmp_path / "web.jsonl")
    run_curate([str(src)], out=tmp_path / "a", steps=FINEWEB, workers=1, report=False)
    with pytest.raises(ConfigError) as err:
        recompute(tmp_path / "a", {("fineweb", "short_line_length"): 5})
    assert err.value.problems == [
        "--set fineweb.short_line_length: changes how fineweb scores documents, which the ledger cannot replay; "
        "rerun `tokenmill curate` (the parameters that replay: line_punct_thr, line_punct_exclude_zero, "
        "short_line_thr, char_duplicates_ratio, new_line_ratio)"]
    assert main(["funnel", str(tmp_path / "a"), "--set", "fineweb.short_line_length=5"]) == 1
    assert "fineweb.short_line_length: changes how fineweb scores" in capsys.readouterr().err
    replayed = recompute(tmp_path / "a", {("fineweb", "short_line_thr"): 0.1})  # a threshold replays
    rerun = run_curate([str(src)], out=tmp_path / "b", workers=1, report=False,
                       steps=[{"name": "fineweb", "short_line_thr": 0.1}])
    assert _counts(replayed) == _counts(rerun["funnel"])


def test_every_registered_document_step_names_the_parameters_that_replay():
    """``funnel --set`` replays only a step's ``decision_params``: a step that names none cannot be replayed."""
    import dataclasses

    from tokenmill.steps.build import resolve
    from tokenmill.steps.registry import STEP_CLASSES

    for name in STEP_CLASSES:
        try:
            cls = resolve(name)
        except LookupError:
            continue
        if not hasattr(cls, "decide"):  # a corpus step: only a quality step's top_fraction replays
            continue
        declared = getattr(cls, "decision_params", None)
        assert declared is not None, name
        fields = {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set(declared)
        assert set(declared) <= fields, name
