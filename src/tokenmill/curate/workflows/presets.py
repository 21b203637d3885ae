"""Named step lists: the published pipelines, each in its own order, with its own thresholds.

Parameters not given here take the step's defaults (datatrove's reference values). ``none`` runs no
step (documents pass through, with their provenance in the ledger).

``dclm`` is the DCLM baseline (Li et al. 2024, Section 4 and Figure 4): the RefinedWeb reproduction
(URL, English, Gopher repetition and quality, RefinedWeb's rules), then dedup, then the fastText quality
filter keeping the top 10% of the corpus. DCLM deduplicated with a Bloom filter over n-grams of
paragraphs and documents (BFF); tokenmill runs ``exact_dedup`` (normalised content hash) and then
``minhash_dedup`` (word 5-gram MinHash, verified at Jaccard 0.8), both document-level at their defaults:
exact copies go cheaply first, near-copies after, and no text is rewritten before the classifier scores
it. The quality step needs a model, which tokenmill never downloads: the preset takes it from
``quality_model`` (``--quality-model PATH``) and refuses to start without one, saying how to train one.

``consent`` decides what a crawl's owners allowed (docs/consent.md): ``robots`` (the AI crawlers' robots.txt
rules in a snapshot of the crawl: ``robots_snapshot``, ``--robots-snapshot PATH``, refused without one),
``tdm_optout`` (TDM reservations in headers, HTML and the snapshot's tdmrep.json files) and ``license``
with detection (a known licence must be on the permissive allow-list; a page that states none is kept).
Presets compose with ``+``, in order: ``--preset consent+fineweb`` runs consent's steps, then FineWeb's.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tokenmill.curate.quality.classifier import model_file
from tokenmill.errors import ConfigError

ENGLISH = {"name": "language", "languages": ["en"], "threshold": 0.65}

PRESETS: dict[str, list[dict]] = {
    # MassiveText (Gopher, Rae et al. 2021, Table A1): English, then quality, then repetition
    "gopher": [ENGLISH, {"name": "gopher_quality"}, {"name": "gopher_repetition"}],
    # C4 (Raffel et al. 2020): English at langdetect's 0.99, then the line and document rules
    "c4": [{"name": "language", "languages": ["en"], "threshold": 0.99}, {"name": "c4"}],
    # FineWeb (Penedo et al. 2024): URL, language, Gopher repetition, Gopher quality, C4 (without the
    # terminal-punctuation line rule, which FineWeb leaves off), FineWeb's own rules
    "fineweb": [
        {"name": "url"},
        ENGLISH,
        {"name": "gopher_repetition"},
        {"name": "gopher_quality"},
        {"name": "c4", "filter_no_terminal_punct": False},
        {"name": "fineweb"},
    ],
    # DCLM's RefinedWeb reproduction (Li et al. 2024, Appendix): URL, English, Gopher repetition and
    # quality, then RefinedWeb's own line corrections and length rules
    "refinedweb": [
        {"name": "url"},
        ENGLISH,
        {"name": "gopher_repetition"},
        {"name": "gopher_quality"},
        {"name": "refinedweb"},
    ],
    "none": [],
    # what the crawl's owners allowed: robots.txt for AI crawlers, TDM reservations, a stated licence
    "consent": [{"name": "robots"}, {"name": "tdm_optout"}, {"name": "license", "detect": True, "unknown": "keep"}],
}
# DCLM (Li et al. 2024): the RefinedWeb reproduction, exact then fuzzy document dedup, the top 10% by the
# fastText quality classifier (its model comes from quality_model: see preset_specs)
PRESETS["dclm"] = [*PRESETS["refinedweb"], {"name": "exact_dedup"}, {"name": "minhash_dedup"},
                   {"name": "quality", "top_fraction": 0.1}]

# presets whose steps decide after seeing every document: `tokenmill curate` only, not the pretraining pass
CURATE_ONLY: dict[str, str] = {"dclm": "exact_dedup, minhash_dedup and the quality step's top 10%"}

TRAIN_HINT = ("train one with `tokenmill quality train --positive REFERENCE_TEXT... --negative WEB_TEXT... "
              "--out quality.bin` (see docs/curation.md, \"The quality classifier\")")


def refuse_in_pretrain(name: str | None) -> None:
    """``ConfigError`` for a preset the single tokenizing pass cannot run, saying how to run it instead."""
    name = next((p for p in (name or "").split("+") if p in CURATE_ONLY), name)
    if name in CURATE_ONLY:
        raise ConfigError(f"--preset {name}: {CURATE_ONLY[name]} decide after seeing every document, which the "
                          f"pretraining pass cannot do (no dedup there); curate first (`tokenmill curate INPUT... "
                          f"--preset {name} --quality-model MODEL --out DIR`), then `tokenmill pretrain DIR/documents`")


def preset_specs(name: str, *, quality_model: str | None = None, robots_snapshot: str | None = None) -> list[dict]:
    """A copy of preset ``name``'s step specs (``a+b``: ``a``'s, then ``b``'s); ``ConfigError`` naming the
    known presets otherwise.

    ``quality_model`` is the model of the preset's ``quality`` step (``dclm``); a preset with such a step
    and no model is refused here, before any work, and a model given to a preset without one is refused
    too (it would silently do nothing). ``robots_snapshot`` is, in the same way, the snapshot of the
    ``robots`` step (``consent``), also given to ``tdm_optout`` for the tdmrep.json files it may hold.
    """
    parts = name.split("+")
    unknown = [p for p in parts if p not in PRESETS]
    if unknown:
        raise ConfigError(f"--preset {unknown[0]!r}: unknown preset; known: {', '.join(PRESETS)} "
                          "(join them with +, e.g. consent+fineweb)")
    specs = [dict(spec) for part in parts for spec in PRESETS[part]]
    _place_snapshot(name, specs, robots_snapshot)
    quality = [s for s in specs if s["name"] == "quality"]
    if not quality and quality_model:
        raise ConfigError(f"--quality-model: preset {name!r} has no quality step (dclm has one); give the model in "
                          "steps: [{name: quality, model: PATH, threshold: T}] instead")
    if quality and not quality_model:
        raise ConfigError(f"--preset {name}: its quality step (top {quality[0]['top_fraction']:.0%} by a fastText "
                          f"classifier) needs a model, and tokenmill downloads none: {TRAIN_HINT}, then pass "
                          "--quality-model quality.bin (pipeline file: quality_model: quality.bin)")
    if quality and not Path(model_file(str(quality_model))).is_file():
        raise ConfigError(f"--quality-model {quality_model}: no such file; {TRAIN_HINT}")
    for spec in quality:
        spec["model"] = str(quality_model)
    return specs


def _place_snapshot(name: str, specs: list[dict], snapshot: str | None) -> None:
    robots = [s for s in specs if s["name"] == "robots"]
    if snapshot and not robots:
        raise ConfigError(f"--robots-snapshot: preset {name!r} has no robots step (consent has one); give it in "
                          "steps: [{name: robots, snapshot: PATH}] instead")
    if robots and not snapshot:
        raise ConfigError(f"--preset {name}: its robots step judges each URL by the robots.txt files of a snapshot "
                          "taken with the crawl, and tokenmill fetches none: pass --robots-snapshot PATH (a directory "
                          "of <host>.txt files or a robots.txt WARC; pipeline file: robots_snapshot: PATH)")
    if snapshot and not Path(snapshot).exists():
        raise ConfigError(f"--robots-snapshot {snapshot}: no such file or directory")
    for spec in specs:
        if spec["name"] == "robots" or (spec["name"] == "tdm_optout" and Path(str(snapshot)).is_dir()):
            spec["snapshot"] = str(snapshot)


def step_specs(preset: str | None, steps: Sequence[dict] | None, *, quality_model: str | None = None,
               robots_snapshot: str | None = None) -> list[dict]:
    """The specs a run uses: the preset's, then the pipeline file's ``steps:`` after them.

    ``quality_model`` is the model of the preset's quality step (``--preset dclm --quality-model PATH``);
    ``robots_snapshot`` the snapshot of its robots step (``--preset consent --robots-snapshot PATH``).
    """
    if quality_model and not preset:
        raise ConfigError("--quality-model: it is the model of a preset's quality step (--preset dclm); without a "
                          "preset give it in steps: [{name: quality, model: PATH, top_fraction: F}]")
    if robots_snapshot and not preset:
        raise ConfigError("--robots-snapshot: it is the snapshot of a preset's robots step (--preset consent); "
                          "without a preset give it in steps: [{name: robots, snapshot: PATH}]")
    chosen = preset_specs(preset, quality_model=quality_model, robots_snapshot=robots_snapshot) if preset else []
    return chosen + list(steps or [])
