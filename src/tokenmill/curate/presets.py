"""Named step lists: the published pipelines, each in its own order, with its own thresholds.

Parameters not given here take the step's defaults (datatrove's reference values). ``none`` runs no
step (documents pass through, with their provenance in the ledger). ``dclm`` (the DCLM baseline:
RefinedWeb heuristics, then Bloom-filter dedup and the fastText quality filter) joins this table with
the corpus-wide steps; until then asking for it names what is missing.
"""

from __future__ import annotations

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
}

# presets announced but waiting for their corpus-wide steps
PENDING: dict[str, str] = {"dclm": "needs the dedup and quality-model steps (exact_dedup, minhash_dedup, quality)"}


def preset_specs(name: str) -> list[dict]:
    """A copy of preset ``name``'s step specs; ``ConfigError`` naming the known presets otherwise."""
    if name in PRESETS:
        return [dict(spec) for spec in PRESETS[name]]
    if name in PENDING:
        raise ConfigError(f"--preset {name}: not available yet: {PENDING[name]}")
    raise ConfigError(f"--preset {name!r}: unknown preset; known: {', '.join(PRESETS)}")
