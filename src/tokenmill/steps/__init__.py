"""Steps: the contract every step keeps, where steps are found, how they are built and how they run.

``contract``  :class:`DocStep` (score, then decide) and :class:`CorpusStep` (stages over the whole corpus),
              checked with ``isinstance``; a step's name, version, parameters and package: its identity
``registry``  the built-in steps by name, an installed package's through the ``tokenmill.steps`` entry points,
              a user's own by ``module:Class``
``build``     ``steps:`` specs -> step objects, every problem at once: the one builder of every track
``cascade``   document steps applied in order to a batch: scores, decisions, the ledger rows
``plain``     a plain callable ``step(batch) -> (kept, counts)`` as a document step
``ledger``    the one applicator inside a track's task: the cascade, its counts, the unit's ledger part

The implementations live in :mod:`tokenmill.curate`; nothing here imports them but through the registry.
"""

from __future__ import annotations

from tokenmill.steps.build import build_step, build_steps, resolve
from tokenmill.steps.cascade import Cascade, CascadeResult
from tokenmill.steps.contract import (
    CorpusStep,
    DocStep,
    Scored,
    is_corpus_step,
    is_doc_step,
    read_table,
    step_identity,
)
from tokenmill.steps.ledger import UnitLedger
from tokenmill.steps.plain import PlainStep, as_doc_step
from tokenmill.steps.registry import STEP_CLASSES, register

__all__ = ["STEP_CLASSES", "Cascade", "CascadeResult", "CorpusStep", "DocStep", "PlainStep", "Scored", "UnitLedger",
           "as_doc_step", "build_step", "build_steps", "is_corpus_step", "is_doc_step", "read_table", "register",
           "resolve", "step_identity"]
