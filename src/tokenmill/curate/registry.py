"""Every curation step by the name ``steps:`` uses, imported lazily (a language-ID model is not loaded to
validate a pipeline file that does not use it).

Two kinds of step share the namespace:

* a **document step** (:class:`tokenmill.curate.step.DocStep`): scores a batch and decides per document;
  runs inside a map stage, in the same pass as its neighbours;
* a **corpus step**: a decision that needs every document (dedup, "keep the top 10%"). Its class has
  ``stages(upstream: str) -> list[Stage]``: stages that read the documents stage named ``upstream`` and
  end in a documents stage of their own.

A *documents stage* is any stage whose unit results carry ``data["docs"]`` (a Parquet file of the
surviving ``Document`` rows, relative to the output directory) and ``data["ledger"]`` (the ledger part of
that unit, ``steps/<stage>/ledger/<unit>.parquet``: ``id``, ``source``, ``loc``, its score columns, ``kept``,
``reason``); its units keep the names of the input units, so every stage's files line up with the input's
work units, and the run's decision ledger (:mod:`tokenmill.report.ledger`) joins the parts unit by unit.
"""

from __future__ import annotations

import importlib
from typing import Any

# name -> "module:Class"
STEP_CLASSES: dict[str, str] = {
    "length": "tokenmill.curate.heuristics.length:Length",
    "gopher_quality": "tokenmill.curate.heuristics.gopher:GopherQuality",
    "gopher_repetition": "tokenmill.curate.heuristics.gopher:GopherRepetition",
    "c4": "tokenmill.curate.heuristics.c4:C4",
    "fineweb": "tokenmill.curate.heuristics.fineweb:FineWeb",
    "refinedweb": "tokenmill.curate.heuristics.refinedweb:RefinedWeb",
    "language": "tokenmill.curate.language:Language",
    "url": "tokenmill.curate.url:UrlFilter",
    "license": "tokenmill.curate.license:License",
    "robots": "tokenmill.curate.robots:Robots",
    "tdm_optout": "tokenmill.curate.tdm:TdmOptout",
    "tdm": "tokenmill.curate.tdm:TdmOptout",  # the step's own name (its ledger columns are tdm.<stat>)
    "machine_text": "tokenmill.curate.machine_text:MachineText",
    "pii": "tokenmill.curate.pii:Pii",
    "exact_dedup": "tokenmill.curate.dedup.exact:ExactDedup",
    "line_dedup": "tokenmill.curate.dedup.lines:LineDedup",
    "minhash_dedup": "tokenmill.curate.dedup.minhash:MinHashDedup",
    "quality": "tokenmill.curate.quality:Quality",
    "perplexity": "tokenmill.curate.perplexity:Perplexity",
    "decontaminate": "tokenmill.curate.decontam:Decontaminate",
    "sft_quality": "tokenmill.curate.sft_quality:SftQuality",
}


def step_class(name: str) -> Any:
    """The class registered under ``name`` (``KeyError`` for an unknown name)."""
    module, _, attr = STEP_CLASSES[name].partition(":")
    return getattr(importlib.import_module(module), attr)


def is_corpus_step(step: Any) -> bool:
    """A corpus step has ``stages``; a step that can be either (``quality`` with ``threshold`` or with
    ``top_fraction``) says which it is through a ``corpus`` attribute."""
    corpus = getattr(step, "corpus", None)
    if corpus is not None:
        return bool(corpus)
    return callable(getattr(step, "stages", None))
