"""The plan of a recipe: what the loader will draw, phase by phase and source by source, before a run.

Every number comes from the :class:`~tokenmill.loader.recipe_data.RecipeDataset` the loader itself serves
(the schedule's closed-form counts and the packing plans), so the plan is what ``PackedLoader.from_recipe``
draws, not an estimate: tokens are the real (non-pad) tokens of the samples each source gives.

A source's ``epochs`` are the tokens the run reads of its folder over the folder's distinct tokens, with the
share read more than once and the share never read (:mod:`tokenmill.loader.coverage`): a source served at
two windows is read pass by pass (the second window reads what the first left), and every source naming one
folder is counted together.

Warnings: a source repeated beyond 4 epochs (Muennighoff et al. 2023: past about 4 epochs repeated tokens
are worth much less than fresh ones; counted over every source naming the same folder, and said so), a
source that runs out of fresh samples before its phase ends, SFT data (loss masks) in a phase that trains
every token, a source no phase draws, SFT examples longer than a window (left out by the loader, so not
counted here). Naming one folder twice (a second view with upsampling, say) is no
warning by itself: ``same_folder_as`` says it. A recipe that cannot run
(mismatched tokenizers, a ``max_epochs`` exceeded, a missing directory) raises ``ConfigError``.
"""

from __future__ import annotations

import numpy as np

from tokenmill.errors import ConfigError
from tokenmill.loader.coverage import coverage
from tokenmill.loader.recipe import Recipe
from tokenmill.loader.recipe_data import RecipeDataset

REPEAT_LIMIT = 4.0


def build_plan(recipe: Recipe, *, tokenizer=None) -> dict:
    """``{"phases", "sources", "warnings", "curve", ...}`` (see ``docs/recipes.md`` for every key)."""
    data = RecipeDataset(recipe, tokenizer=tokenizer)
    phases = [_phase(data, i) for i in range(len(recipe.phases))]
    run_tokens = sum(sum(p["tokens"].values()) for p in phases)
    for p in phases:
        p["run_share"] = sum(p["tokens"].values()) / run_tokens if run_tokens else 0.0
    sources = _sources(data, phases)
    warnings = _warnings(data, phases, sources)
    _refuse_over_max_epochs(recipe, sources)
    return {"recipe": str(recipe.path) if recipe.path else None, "fingerprint": data.fingerprint,
            "seq_len": recipe.seq_len, "global_batch": recipe.global_batch, "batch": recipe.batch,
            "world_size": recipe.world_size, "grad_accum": recipe.grad_accum, "total_steps": recipe.total_steps,
            "total_samples": len(data), "tokens_drawn": sum(s["tokens_drawn"] for s in sources.values()),
            "phases": phases, "sources": sources, "warnings": warnings, "curve": _curve(recipe, phases)}


def _bounds(data: RecipeDataset, i: int) -> tuple[int, int]:
    starts = data.blend.starts + [len(data)]
    return starts[i], starts[i + 1]


def _phase(data: RecipeDataset, i: int) -> dict:
    p, (lo, hi) = data.recipe.phases[i], _bounds(data, i)
    before, after = data.blend.counts(lo), data.blend.counts(hi)
    tokens, samples = {}, {}
    for c, key in enumerate(data.names):
        src = data.source_of_component[key]
        n = data.component_tokens(c, before[key], after[key])
        if after[key] > before[key]:
            tokens[src] = tokens.get(src, 0) + n
            samples[src] = samples.get(src, 0) + after[key] - before[key]
    total = sum(tokens.values())
    start = data.recipe.start_steps()[i]
    return {"name": p.name, "start_step": start, "end_step": start + p.steps, "steps": p.steps,
            "global_batch": data.recipe.phase_global_batch(p), "seq_len": p.seq_len, "samples": hi - lo,
            "ignore_loss_mask": p.ignore_loss_mask,
            "tokens": tokens, "samples_by_source": samples,
            "share": {s: n / total for s, n in tokens.items()} if total else {},
            "packing_efficiency": total / ((hi - lo) * p.seq_len) if hi > lo else 0.0,
            "long_doc_share": {s: _long_share(data, s, p.seq_len) for s in tokens}}


def _long_share(data: RecipeDataset, source: str, window: int) -> float:
    """Share of a source's tokens (as served, after upsampling) in documents longer than ``window``."""
    key = data.keys[(source, window)]
    lengths = data.datasets[data.names.index(key)].corpus.lengths.astype(np.int64)
    total = int(lengths.sum())
    return int(lengths[lengths > window].sum()) / total if total else 0.0


def _sources(data: RecipeDataset, phases: list[dict]) -> dict:
    """Per source: what it draws, and how often the run reads its folder's tokens (loader/coverage.py: every
    source naming one folder counted together, every window it is served at laid over the same tokens)."""
    covers = coverage(data)
    out = {}
    for s in data.recipe.sources:
        comps = [c for c, key in enumerate(data.names) if data.source_of_component[key] == s.name]
        drawn = sum(p["tokens"].get(s.name, 0) for p in phases)
        entry = {"path": str(s.path), "tokens_drawn": drawn, "tokens_available": 0, "epochs": 0.0,
                 "repeated_share": 0.0, "unread_share": 0.0, "documents": 0, "track": None, "mode": None}
        if comps:
            d, cover = data.datasets[comps[0]], covers[s.name]
            docs, available = _unique(d)
            entry.update(tokens_available=available, epochs=cover.epochs, repeated_share=cover.share(cover.repeated),
                         unread_share=cover.share(cover.unread), documents=docs,
                         track="sft" if d.corpus.has_mask else "pretrain", mode=d.mode,
                         tokens_per_pass=int(d.corpus.lengths.astype(np.int64).sum()))
            if len(cover.sources) > 1:
                entry["same_folder_as"] = [n for n in cover.sources if n != s.name]
        out[s.name] = entry
    return out


def _unique(d) -> tuple[int, int]:
    """(documents, tokens) of a source's own data: after its cap, before upsampling."""
    n = getattr(d.corpus, "n_unique", len(d.corpus.lengths))
    base = getattr(d.corpus, "base", d.corpus)
    return n, int(base.lengths[:n].astype(np.int64).sum())


def _warnings(data: RecipeDataset, phases: list[dict], sources: dict) -> list[str]:
    out = []
    for name, s in sources.items():
        if s["epochs"] > REPEAT_LIMIT:
            out.append(f"source {name!r} is repeated {s['epochs']:.1f} epochs{_with(s)}, more than {REPEAT_LIMIT:g}: "
                       "past about 4 epochs repeated tokens are worth much less than fresh ones (Muennighoff et al. 2023)")
        if s["track"] is None:
            out.append(f"source {name!r} is drawn by no phase")
    out += _exhausted(data)
    out += _too_long(data)
    for p in data.recipe.phases:
        masked = [n for n, w in p.weights if w > 0 and sources[n]["track"] == "sft"]
        if p.ignore_loss_mask and masked:
            out.append(f"phase {p.name!r} trains every token (ignore_loss_mask) but {masked} carry loss masks "
                       "(SFT data): their prompts will be trained; drop ignore_loss_mask or those sources")
    return out


def _too_long(data: RecipeDataset) -> list[str]:
    """A warning for each SFT source (packed whole, ``bfd``) holding examples longer than a window it is served
    at (the longest, for a source read pass by pass): the loader leaves them out (an example is never cut), so
    the plan's tokens do not count them either."""
    out = []
    for (name, window), key in data.keys.items():
        c = data.names.index(key)
        d = data.datasets[c]
        if d.mode != "bfd" or (c in data.passes and window < max(n for s, n in data.keys if s == name)):
            continue  # read pass by pass: what one window cannot hold the longest window of the source reads
        lengths = d.corpus.lengths.astype(np.int64)
        over = lengths > window
        if over.any():
            out.append(f"source {name!r}: {int(over.sum()):,} of {lengths.size:,} examples ({int(lengths[over].sum()):,} "
                       f"tokens) are longer than the window of {window:,} tokens and are left out by the loader "
                       "(not counted in this plan): raise the phase's seq_len or filter them when writing the shards")
    return out


def _exhausted(data: RecipeDataset) -> list[str]:
    """A warning for each component that runs out of fresh samples before the end of the phase it is in."""
    out = []
    for c, key in enumerate(data.names):
        size = data.fresh_samples(c)
        if size is None or data.blend.counts(len(data))[key] <= size:
            continue
        k = _first_over(data, key, size)
        i = data.blend.phase_of(k)
        lo, hi = _bounds(data, i)
        if k < hi - 1:
            p = data.recipe.phases[i]
            out.append(f"source {data.source_of_component[key]!r} (seq_len {p.seq_len}) runs out of fresh samples at "
                       f"step {data.step_of(k)}, {100 * (k - lo) / (hi - lo):.0f}% into phase {p.name!r}: the rest repeats it")
    return out


def _first_over(data: RecipeDataset, key: str, size: int) -> int:
    """The first blended sample at which component ``key`` has given more than ``size`` samples."""
    lo, hi = 0, len(data)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if data.blend.counts(mid + 1)[key] > size else (mid, hi)
    return lo if data.blend.counts(lo + 1)[key] > size else hi


def _refuse_over_max_epochs(recipe: Recipe, sources: dict) -> None:
    over = [f"sources.{s.name}.max_epochs: the phases draw {sources[s.name]['epochs']:.2f} epochs of it{_with(sources[s.name])}, "
            f"more than {s.max_epochs:g}: lower its weights or phase lengths, or raise max_epochs"
            for s in recipe.sources if s.max_epochs is not None and sources[s.name]["epochs"] > s.max_epochs]
    if over:
        raise ConfigError(over)


def _with(source: dict) -> str:
    others = source.get("same_folder_as")
    return f" (with {', '.join(map(repr, others))}, which name{'s' if len(others) == 1 else ''} the same folder)" \
        if others else ""


def _curve(recipe: Recipe, phases: list[dict]) -> dict:
    """Tokens per source in each interval between phase starts (the chart of ``plan.html``)."""
    steps = [p["start_step"] for p in phases] + [recipe.total_steps]
    return {"steps": steps, "tokens": {s.name: [p["tokens"].get(s.name, 0) for p in phases] for s in recipe.sources}}
