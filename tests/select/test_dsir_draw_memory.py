"""The draw's cut is found holding at most ``2 n`` candidate keys and one unit's, not every document's key:
the same cut and ties as one sort of all the keys, and a peak that does not grow with the number of units."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from memkit import traced_peak
from tokenmill.curate.select.dsir import Dsir, best_keys, draw

DOCS = 5_000  # documents per unit


def _scores(root: Path, units: int) -> list[Path]:
    """``units`` score files of :data:`DOCS` documents, keys drawn from few values (ties across units)."""
    rng = np.random.default_rng(units)
    paths = []
    for u in range(units):
        paths.append(root / f"u{u:04d}.npz")
        key = rng.integers(0, 50, DOCS).astype(np.float64) / 7
        words = rng.integers(0, 300, DOCS)
        np.savez(paths[-1], weight=key, words=words, key=key)
    return paths


def _oracle(step: Dsir, paths: list[Path]) -> dict:
    """The cut as one sort of every long-enough key, the earlier in input order first among equals."""
    keys, units = [], []
    for u, p in enumerate(paths):
        with np.load(p) as s:
            keys.append(s["key"][s["words"] >= step.min_words])
            units.append(np.full(len(keys[-1]), u))
    key, unit = np.concatenate(keys), np.concatenate(units)
    order = np.lexsort((np.arange(len(key)), -key))[:step.n]
    cut = float(key[order[-1]])
    ties = np.bincount(unit[order][key[order] == cut], minlength=len(paths))
    return {"cut": cut, "n": step.n, "pool": len(key), "ties": ties.tolist()}


def test_the_cut_is_that_of_one_sort_of_every_key(tmp_path):
    paths = _scores(tmp_path, 12)
    for n in (1, 37, 5_000, 20_000):
        step = Dsir(target=_reference(tmp_path), n=n)
        got = draw(step, tmp_path / f"draw-{n}.json", paths)
        assert got == _oracle(step, paths)
        assert json.loads((tmp_path / f"draw-{n}.json").read_text()) == got


def test_best_keys_are_the_first_n_of_one_sort_in_input_order():
    rng = np.random.default_rng(0)
    units = [rng.integers(0, 5, size).astype(float) for size in (0, 7, 1, 30, 12)]
    key, unit = np.concatenate(units), np.concatenate([np.full(len(k), u) for u, k in enumerate(units)])
    for n in (1, 3, 17, len(key)):
        order = np.lexsort((np.arange(len(key)), -key))[:n]
        got_key, got_unit = best_keys(iter(units), n)
        assert got_key.tolist() == key[order].tolist() and got_unit.tolist() == unit[order].tolist()


def test_the_draw_holds_n_keys_and_one_unit_whatever_the_number_of_units(tmp_path):
    small, large = tmp_path / "small", tmp_path / "large"
    small.mkdir(), large.mkdir()
    few, many = _scores(small, 8), _scores(large, 160)
    step = Dsir(target=_reference(tmp_path), n=100)
    draw(step, small / "warm.json", few)  # imports and caches warm
    # 20x the documents (800,000): every key with its unit held at once was some 19 MB and a sort of them;
    # now at most 200 candidates and one unit of 5,000
    assert traced_peak(draw, step, large / "draw.json", many) < 1.5 * traced_peak(draw, step, small / "draw.json", few)


def _reference(root: Path) -> str:
    path = root / "ref.jsonl"
    if not path.exists():
        path.write_text(json.dumps({"text": "the history of the city dates back to the roman period"}) + "\n")
    return str(path)
