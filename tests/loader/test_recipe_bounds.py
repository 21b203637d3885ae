"""Hostile recipes: keys given twice, aliases that expand without end, numbers that are not numbers or too
large to run, files that are not UTF-8; and every problem of a file reported in one error."""

from __future__ import annotations

import time

import pytest

from tokenmill.config import read_config
from tokenmill.errors import ConfigError
from tokenmill.loader.recipe import load_recipe, parse_recipe

GOOD = """\
seq_len: 64
total_tokens: 40_000
sources:
  web: {path: shards/web}
phases:
  - {name: stable, share: 1.0, weights: {web: 1.0}}
"""


def _write(tmp_path, text, name="recipe.yaml"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _problems(doc) -> list[str]:
    with pytest.raises(ConfigError) as err:
        parse_recipe(doc)
    return err.value.problems


def _doc(**top) -> dict:
    doc = {"seq_len": 64, "total_tokens": 40_000, "sources": {"web": {"path": "x"}},
           "phases": [{"name": "a", "share": 1.0, "weights": {"web": 1.0}}]}
    doc.update(top)
    return doc


def test_the_good_recipe_parses(tmp_path):
    recipe = load_recipe(_write(tmp_path, GOOD))
    assert recipe.seq_len == 64 and recipe.phases[0].weights == (("web", 1.0),)


def test_a_key_given_twice_is_refused_naming_both_lines(tmp_path):
    path = _write(tmp_path, GOOD.replace("seq_len: 64\n", "seq_len: 64\nseq_len: 128\n"))
    with pytest.raises(ConfigError) as err:
        load_recipe(path)
    assert "line 2: key 'seq_len' is given twice (first on line 1)" in str(err.value)
    nested = GOOD.replace("{web: 1.0}", "{web: 1.0, web: 0.5}")
    with pytest.raises(ConfigError, match="key 'web' is given twice"):
        load_recipe(_write(tmp_path, nested))


def test_a_merge_key_is_not_a_duplicate(tmp_path):
    text = GOOD.replace("sources:\n  web: {path: shards/web}",
                        "base: &b {path: shards/web}\nsources:\n  web: {<<: *b, path: shards/web2}")
    with pytest.raises(ConfigError) as err:  # 'base' is an unknown field; the merge itself is accepted
        load_recipe(_write(tmp_path, text))
    assert err.value.problems == ["base: unknown field (known: batch, grad_accum, phases, seed, seq_len, sources, "
                                  "total_tokens, world_size)"]


def test_an_alias_bomb_is_refused_at_once(tmp_path):
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    bomb = GOOD + "\n".join(lines) + "\n"
    began = time.perf_counter()
    with pytest.raises(ConfigError, match="expands to more than 100,000 nodes"):
        load_recipe(_write(tmp_path, bomb))
    assert time.perf_counter() - began < 2
    with pytest.raises(ConfigError, match="expands to more than"):  # the same in a pipeline file
        read_config(_write(tmp_path, "steps:\n" + "\n".join("  " + x for x in lines) + "\n", "pipe.yaml"))


def test_nesting_too_deep_for_the_parser_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="nested too deep"):
        load_recipe(_write(tmp_path, "seq_len: " + "[" * 5000 + "]" * 5000 + "\n"))


def test_a_recipe_that_is_not_utf8_names_the_byte(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes(GOOD.encode() + "# café\n".encode("latin-1"))
    with pytest.raises(ConfigError) as err:
        load_recipe(path)
    offset = len(GOOD.encode()) + len("# caf")
    assert f"{path}: the recipe is not UTF-8 text (byte offset {offset}: b'\\xe9')" in str(err.value)


def test_a_pipeline_file_that_is_not_utf8_or_repeats_a_key_is_refused(tmp_path):
    path = tmp_path / "pipe.yaml"
    path.write_bytes(b"out: x\n# \xff\n")
    with pytest.raises(ConfigError, match="pipeline file is not UTF-8 text \\(byte offset 9"):
        read_config(path)
    with pytest.raises(ConfigError, match="key 'workers' is given twice"):
        read_config(_write(tmp_path, "workers: 2\nworkers: 8\n", "twice.yaml"))


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -1.0, 0, "3", 10 ** 7])
def test_max_epochs_must_be_a_finite_positive_number(value):
    doc = _doc(sources={"web": {"path": "x", "max_epochs": value}})
    assert any(p.startswith("sources.web.max_epochs: expected a number > 0 and <= 1,000,000") for p in _problems(doc))


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -0.5, 1e7, True])
def test_a_weight_must_be_a_finite_number_in_bounds(value):
    doc = _doc(phases=[{"name": "a", "share": 1.0, "weights": {"web": 1.0, "other": value}}],
               sources={"web": {"path": "x"}, "other": {"path": "y"}})
    assert any(p.startswith("phases[0].weights.other: expected a number >= 0 and <= 1,000,000")
               for p in _problems(doc))


@pytest.mark.parametrize("field, value, bound", [
    ("total_tokens", 10 ** 20, "total_tokens: expected a whole number >= 1 and <= 100,000,000,000,000"),
    ("total_tokens", 10 ** 26, "total_tokens: expected a whole number >= 1 and <= 100,000,000,000,000"),
    ("seq_len", 1 << 40, "seq_len: expected a whole number >= 1 and <= 1,048,576"),
    ("batch", 10 ** 9, "batch: expected a whole number >= 1 and <= 65,536"),
    ("world_size", 10 ** 9, "world_size: expected a whole number >= 1 and <= 65,536"),
    ("grad_accum", 10 ** 9, "grad_accum: expected a whole number >= 1 and <= 65,536"),
    ("seed", 1 << 70, "seed: expected a whole number >= 0 and <= 9,223,372,036,854,775,807"),
])
def test_top_level_numbers_are_bounded(field, value, bound):
    assert any(p.startswith(bound) for p in _problems(_doc(**{field: value})))


def test_source_numbers_are_bounded():
    doc = _doc(sources={"web": {"path": "x", "cap_tokens": 10 ** 20,
                                "upsample_long": {"min_tokens": 512, "factor": 10 ** 9}}})
    problems = _problems(doc)
    assert any(p.startswith("sources.web.upsample_long.factor: expected a whole number >= 1 and <= 1,000")
               for p in problems)
    assert any(p.startswith("sources.web.cap_tokens: expected a whole number >= 1 and <= 100,000,000,000,000")
               for p in problems)


def test_phase_lengths_and_the_run_are_bounded():
    doc = _doc(total_tokens=None, phases=[{"name": "a", "tokens": 10 ** 20, "weights": {"web": 1}},
                                          {"name": "b", "steps": 10 ** 15, "weights": {"web": 1}}])
    problems = _problems(doc)
    assert any(p.startswith("phases[0].tokens: expected a whole number >= 1 and <= 100,000,000,000,000")
               for p in problems)
    assert any(p.startswith("phases[1].steps: expected a whole number >= 1 and <= 68,719,476,736") for p in problems)
    long_run = _doc(seq_len=8, batch=65_536, total_tokens=None,
                    phases=[{"name": "a", "steps": 10 ** 7, "weights": {"web": 1}}])
    assert any(p.startswith("phases: the run draws 655,360,000,000 samples, more than 68,719,476,736")
               for p in _problems(long_run))


def test_a_share_that_is_not_a_finite_fraction_is_refused():
    for value in (float("nan"), float("inf")):
        doc = _doc(phases=[{"name": "a", "share": value, "weights": {"web": 1}}])
        assert any(p.startswith("phases[0].share: expected a number in (0, 1]") for p in _problems(doc))


def test_every_problem_of_a_file_is_reported_at_once():
    doc = _doc(batch=0, sources={"web": {"path": "x", "max_epochs": float("nan")}},
               phases=[{"name": "a", "share": 1.0, "weights": {"code": 1}}, {"name": "b", "steps": 0,
                                                                            "weights": {"web": 1}}])
    problems = _problems(doc)
    assert [p.split(":")[0] for p in problems] == ["batch", "sources.web.max_epochs", "phases[0].weights.code",
                                                   "phases[1].steps"]


def test_every_source_that_cannot_be_opened_is_named_at_once(tmp_path):
    from tokenmill.loader.recipe_data import check_tokenizers

    recipe = parse_recipe(_doc(sources={"web": {"path": "nowhere"}, "sft": {"path": "neither"}},
                               phases=[{"name": "a", "share": 1.0, "weights": {"web": 1, "sft": 1}}]), base=tmp_path)
    with pytest.raises(ConfigError) as err:
        check_tokenizers(recipe)
    assert [p.split(":")[0] for p in err.value.problems] == ["sources.web.path", "sources.sft.path"]


def test_an_object_storage_source_is_kept_as_its_url(tmp_path):
    recipe = parse_recipe(_doc(sources={"web": {"path": "s3://bucket/runs/web"}}), base=tmp_path)
    assert recipe.source("web").path == "s3://bucket/runs/web"


def test_every_bound_is_stated_in_the_docs():
    from pathlib import Path

    from tokenmill.loader.recipe import MAX_EPOCHS, MAX_SAMPLES, MAX_WEIGHT, WHOLE

    text = (Path(__file__).resolve().parents[2] / "docs" / "recipes.md").read_text(encoding="utf-8")
    section = text[text.index("### Bounds"):]
    table = section[section.index("| field"):].split("\n\n")[0]
    rows = {line.split("|")[1]: line.split("|")[2] for line in table.splitlines()
            if line.startswith("| ") and "`" in line}
    stated = {key: bound for fields, bound in rows.items() for key in WHOLE if f"`{key}`" in fields
              or f".{key}`" in fields}
    assert set(stated) == set(WHOLE)
    spelled = {1 << 20: "1,048,576", 1 << 16: "65,536", (1 << 63) - 1: "2^63 - 1", 10 ** 14: "10^14",
               MAX_SAMPLES: "2^36", 1000: "1,000"}
    assert all(spelled[high] in stated[key] for key, (_, high) in WHOLE.items())
    assert f"{MAX_SAMPLES:,}" in table and f"{MAX_EPOCHS:,}" in rows[" `max_epochs` "] and f"{MAX_WEIGHT:,}" in table
