"""A source used at two windows is read pass by pass: the second window reads what the first left, so within a
pass no token is read twice and none is skipped at a mixture transition; only a tail that fills no window (or,
packed whole, the examples longer than the window) is left when a pass is spent.

The oracle needs no loader code: every token of the test's shards has its own id (its position in the source's
stream, plus the source's first id), so the ids a served sample holds say which tokens it read."""

from __future__ import annotations

import numpy as np
import pytest

from tokenmill.loader import PackedLoader, RecipeDataset, check_run, load_recipe
from tokenmill.loader.passes import View
from tokenmill.loader.plan import build_plan

WEB, SFT = 2, 20_000  # the first id of each source's stream


def numbered(rng, n, lo, hi, *, first, masked=False):
    """``n`` documents of ``lo..hi`` tokens whose ids are their stream positions plus ``first``."""
    docs, pos = [], first
    for _ in range(n):
        size = int(rng.integers(lo, hi + 1))
        mask = None
        if masked:
            mask = np.zeros(size, np.bool_)
            mask[size // 2:] = True
        docs.append((np.arange(pos, pos + size), mask))
        pos += size
    return docs


@pytest.fixture
def sources(write_shards):
    rng = np.random.default_rng(11)
    web = numbered(rng, 400, 5, 60, first=WEB)
    sft = numbered(rng, 200, 10, 80, first=SFT, masked=True)
    write_shards(web, name="web", max_tokens=4000, vocab=40_000)
    write_shards(sft, name="sft", max_tokens=4000, vocab=40_000)
    return {"web": [d.size for d, _ in web], "sft": [d.size for d, _ in sft]}


def _recipe(tmp_path, phases: str, *, batch=4, world=1, mode="concat"):
    path = tmp_path / "recipe.yaml"
    path.write_text(f"seq_len: 32\nbatch: {batch}\nworld_size: {world}\n"
                    f"sources: {{web: {{path: web, mode: {mode}}}, sft: {{path: sft}}}}\nphases:\n{phases}")
    return path


TWO = """\
  - {name: short, tokens: 8000, weights: {web: 1}}
  - {name: long, tokens: 12288, seq_len: 128, weights: {web: 0.8, sft: 0.2}}
"""
ALTERNATING = """\
  - {name: a, tokens: 6016, weights: {web: 1}}
  - {name: b, tokens: 10240, seq_len: 128, weights: {web: 1}}
  - {name: a2, tokens: 10240, weights: {web: 0.7, sft: 0.3}}
"""
ONCE = """\
  - {name: short, tokens: 5120, weights: {web: 1}}
  - {name: long, tokens: 7168, seq_len: 128, weights: {web: 0.8, sft: 0.2}}
"""
SFT_TWO = """\
  - {name: short, tokens: 2304, seq_len: 48, weights: {sft: 1}}
  - {name: long, tokens: 15360, seq_len: 96, weights: {sft: 1, web: 0.5}}
"""


def _served(data: RecipeDataset, first: int, total: int) -> list[tuple[np.ndarray, int]]:
    """(stream positions, window) of every sample of the source whose ids start at ``first``, in run order."""
    out = []
    for k in range(len(data)):
        ids = data[k]["input_ids"].astype(np.int64) - first
        if ids.size and 0 <= ids.min() and ids.max() < total:
            out.append((ids, data.phase_of(k).seq_len))
    return out


def _passes(samples, total: int) -> list[tuple[np.ndarray, int | None]]:
    """Oracle: the samples cut into passes where a token comes again; per pass, its unread positions and the
    window of the sample that started the next pass (None for the last, unfinished pass)."""
    out, seen = [], np.zeros(total, np.int64)
    for pos, window in samples:
        assert np.unique(pos).size == pos.size  # a sample reads a token once
        if seen[pos].any():
            out.append((np.flatnonzero(seen == 0), window))
            seen[:] = 0
        seen[pos] += 1
    return out + [(np.flatnonzero(seen == 0), None)]


@pytest.mark.parametrize("phases, mode, spent", [(TWO, "concat", 1), (ALTERNATING, "concat", 1),
                                                 (ALTERNATING, "boundary", 1)])
def test_a_pretraining_source_at_two_windows_reads_each_pass_once(sources, tmp_path, phases, mode, spent):
    data = RecipeDataset(_recipe(tmp_path, phases, mode=mode))
    total = sum(sources["web"])
    passes = _passes(_served(data, WEB, total), total)
    assert len(passes) == spent + 1
    for unread, window in passes[:-1]:  # a spent pass leaves only a tail shorter than the window that spent it
        assert window is not None and unread.size < window
    windows = [w for _, w in _served(data, WEB, total)]
    assert sorted(set(windows)) == [32, 128]


def test_the_alternation_continues_the_pass_the_long_window_started(sources, tmp_path):
    """A at 32, B at 128, A at 32: B spends the first pass and starts a second at 128; the third phase reads
    what that pass left, so the second pass has no token read twice either."""
    data = RecipeDataset(_recipe(tmp_path, ALTERNATING))
    total = sum(sources["web"])
    served = _served(data, WEB, total)
    first_a2 = next(i for i, (_, w) in enumerate(served) if w == 32 and i > 0 and served[i - 1][1] == 128)
    second = [pos for pos, _ in served[first_a2 - 5:]]  # the end of B's new pass, then A again
    reads = np.bincount(np.concatenate(second), minlength=total)
    assert reads.max() == 1


def test_sft_examples_at_two_windows_are_drawn_once_per_pass(sources, tmp_path):
    """Packed whole (best-fit-decreasing): the long window packs the examples the short one did not draw, those
    longer than the short window among them; a spent pass leaves only examples longer than its window."""
    data = RecipeDataset(_recipe(tmp_path, SFT_TWO))
    lengths = np.array(sources["sft"])
    total = int(lengths.sum())
    passes = _passes(_served(data, SFT, total), total)
    assert len(passes) == 2
    starts = np.r_[0, np.cumsum(lengths)[:-1]]
    for unread, window in passes[:-1]:
        doc = np.searchsorted(starts, unread, "right") - 1
        left = np.unique(doc)
        assert np.bincount(doc, minlength=lengths.size)[left].tolist() == lengths[left].tolist()  # whole examples
        assert window is not None and (lengths[left] > window).all()
    assert passes[0][0].size == 0  # every example fits the long window: the first pass read all of them
    recipe = load_recipe(tmp_path / "recipe.yaml")
    assert not [w for w in build_plan(recipe)["warnings"] if "longer than the window" in w]  # none left out


def test_a_source_at_one_window_and_the_first_window_serve_what_they_served(sources, tmp_path):
    data = RecipeDataset(_recipe(tmp_path, TWO))
    for k in range(len(data)):
        c, j = data.blend.route(k)
        d, name = data.datasets[c], data.names[c]
        if name == "sft" or name == "web@32":  # sft: one window; web@32: the first segment of its pass
            assert all(np.array_equal(a, b) for a, b in zip(data.pieces(k)[1:], d.pieces(j % len(d))))
    assert data.fingerprint.startswith("recipe:passes:")


def test_resume_in_the_second_window_with_another_world_size_is_exact(sources, tmp_path):
    path = _recipe(tmp_path, TWO, world=2)

    def ids(batch):
        return [tuple(s["input_ids"].tolist()) for s in batch]

    reference = list(PackedLoader.from_recipe(path, batch_size=8, world_size=1, collate_fn=ids))
    ranks = [PackedLoader.from_recipe(path, rank=r, collate_fn=ids) for r in range(2)]
    start_long = load_recipe(path).start_steps()[1]
    got = []
    for step, pair in enumerate(zip(*ranks)):
        got.append(sorted(pair[0] + pair[1]))
        if step == start_long + 3:  # inside the second window
            break
    state = ranks[0].state_dict()
    later = [PackedLoader.from_recipe(path, batch_size=1, rank=r, world_size=8, collate_fn=ids) for r in range(8)]
    for loader in later:
        loader.load_state_dict(state)
    rest = [sorted(sum(parts, [])) for parts in zip(*later)]
    assert got + rest == [sorted(b) for b in reference]
    web = [np.array(s) - WEB for batch in reference[:start_long + 4] for s in batch if s[0] < SFT]
    assert np.unique(np.concatenate(web)).size == sum(x.size for x in web)  # within the pass: no token twice


@pytest.mark.parametrize("phases, mode", [(ONCE, "concat"), (TWO, "concat"), (ALTERNATING, "concat"),
                                         (ALTERNATING, "boundary"), (SFT_TWO, "concat")])
def test_the_plan_counts_the_tokens_the_loader_serves(sources, tmp_path, phases, mode):
    path = _recipe(tmp_path, phases, world=2, mode=mode)
    recipe = load_recipe(path)
    plan = build_plan(recipe)
    data = RecipeDataset(recipe)
    for name, first in (("web", WEB), ("sft", SFT)):
        total = sum(sources[name])
        reads = np.zeros(total, np.int64)
        for pos, _ in _served(data, first, total):
            np.add.at(reads, pos, 1)
        s = plan["sources"][name]
        assert s["tokens_drawn"] == reads.sum()
        assert s["epochs"] == pytest.approx(reads.sum() / total)
        assert s["repeated_share"] == pytest.approx(np.mean(reads >= 2))
        assert s["unread_share"] == pytest.approx(np.mean(reads == 0))
        if s["epochs"] < 1 and list(data.source_of_component.values()).count(name) > 1:
            assert s["repeated_share"] == 0  # read pass by pass and not yet a whole pass: nothing twice
            assert s["unread_share"] == pytest.approx(1 - s["epochs"])
    ranks = [PackedLoader.from_recipe(path, rank=r, collate_fn=lambda b: b, log_dir=tmp_path / "log") for r in range(2)]
    for _ in zip(*ranks):
        pass
    result = check_run(plan, tmp_path / "log")
    assert result["problems"] == [] and result["served_samples"] == plan["total_samples"]
    assert [p["consumed"] for p in result["phases"]] == [p["tokens"] for p in plan["phases"]]


def test_the_plan_warns_at_the_step_where_the_pass_is_spent(sources, tmp_path):
    path = _recipe(tmp_path, TWO)
    data = RecipeDataset(path)
    total, seen = sum(sources["web"]), None
    read = np.zeros(total, bool)
    for k in range(len(data)):
        ids = data[k]["input_ids"].astype(np.int64) - WEB
        if ids.max() < total:
            if read[ids].any():
                seen = k
                break
            read[ids] = True
    assert seen is not None
    said = [w for w in build_plan(load_recipe(path))["warnings"] if "runs out of fresh samples" in w]
    assert said == [f"source 'web' (seq_len 128) runs out of fresh samples at step {data.step_of(seen)}, "
                    f"{100 * (seen - data.blend.starts[1]) / (len(data) - data.blend.starts[1]):.0f}% into phase "
                    "'long': the rest repeats it"]


@pytest.mark.parametrize("mode", ["concat", "bfd", "boundary"])
def test_a_view_reads_and_leaves_each_token_of_its_intervals_once(mode):
    """The core step: the samples a view gives and the intervals it leaves cover what it was given, each token
    once (bfd: whole examples, some longer than the window; boundary: pieces of documents)."""
    rng = np.random.default_rng(2)
    offsets = np.r_[0, np.cumsum(rng.integers(0, 90, 300))]
    if mode == "concat":  # unread runs across documents
        cuts = np.sort(rng.choice(int(offsets[-1]), 80, replace=False))
        lo, hi = cuts[0::2], cuts[1::2]
    else:  # whole documents (bfd) or a part of each (boundary)
        docs = np.sort(rng.choice(300, 120, replace=False))
        lo, hi = offsets[docs], offsets[docs + 1]
        if mode == "boundary":
            lo = lo + (hi - lo) // 3
    given = np.zeros(int(offsets[-1]), np.int64)
    for a, b in zip(lo, hi):
        given[a:b] = 1
    view = View(lo.astype(np.int64), hi.astype(np.int64), window=64, mode=mode, seed=5, offsets=offsets)
    assert len(view) > 3
    for drawn in (0, len(view) // 3, len(view)):
        read = np.zeros_like(given)
        for i in range(drawn):
            for d, at, n in zip(*view.pieces(i)):
                assert 0 <= at and at + n <= offsets[d + 1] - offsets[d]
                read[offsets[d] + at: offsets[d] + at + n] += 1
        for a, b in zip(*view.left(drawn)):
            read[a:b] += 1
        assert np.array_equal(read, given)
