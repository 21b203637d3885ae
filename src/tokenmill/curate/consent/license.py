"""``license``: keep documents whose licence is on an allow-list; a stated policy for unknown licences.

The licence string of each document (the ``license`` field the router mapped, e.g. ``license`` or
``meta.license``) is normalised to an SPDX-like id: lowercased, spaces and underscores to ``-``, a
trailing ``license``/``licence`` dropped, common spellings folded (``CC BY 4.0`` -> ``cc-by-4.0``,
``Apache License 2.0`` -> ``apache-2.0``, ``MIT License`` -> ``mit``, ``CC0`` -> ``cc0-1.0``,
``Public Domain`` -> ``public-domain``; licence titles and URLs as data sets write them, ``Apache License,
Version 2.0``, ``CC0 1.0 Universal``, ``https://creativecommons.org/licenses/by/4.0/deed.en``: see
:mod:`tokenmill.curate.consent.license_names`). A missing, empty or placeholder value (``unknown``, ``none``,
``n/a``, ``other``) is *unknown*.

With ``detect: true`` the step also reads the licence the page states for itself
(:mod:`tokenmill.curate.consent.license_detect`: Creative Commons links and ``rel="license"`` in the HTML, badge
text, SPDX identifiers) into ``license.detected`` and ``license.evidence`` (the matched string). The
combining rule: **the input's own field wins when it names a licence** (whoever published the data set
stated it for the record); the detected licence fills a missing or placeholder field. ``license.label`` is
then the combined licence, and ``license.origin`` says which one it is (``field``, ``detected``, null).

Statistics: ``license.label`` (the normalised id, null when unknown). Rules: ``not_allowed`` (a known
licence outside ``allow``), ``unknown_license`` (only when ``unknown: remove``, the default: a licence
filter keeps what it can vouch for). The source file and line of every document are in the ledger's
``source`` and ``loc`` columns whatever the steps.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tokenmill.curate.consent.license_detect import detect_licence
from tokenmill.curate.consent.license_names import normalise_license
from tokenmill.curate.docmeta import meta_values, strings
from tokenmill.steps.contract import Scored

PERMISSIVE = ("cc0-1.0", "public-domain", "cc-by-4.0", "cc-by-3.0", "cc-by-sa-4.0", "cc-by-sa-3.0", "mit",
              "apache-2.0", "bsd-2-clause", "bsd-3-clause", "isc", "odc-by", "pddl")
@dataclass(frozen=True)
class License:
    allow: Any = PERMISSIVE
    unknown: str = "remove"
    detect: bool = False

    name: ClassVar[str] = "license"
    version: ClassVar[int] = 2
    decision_params: ClassVar[tuple] = ("allow", "unknown")

    def __post_init__(self) -> None:
        allow = [self.allow] if isinstance(self.allow, str) else self.allow
        if not isinstance(allow, (list, tuple)) or not all(isinstance(a, str) for a in allow):
            raise ValueError(f"allow: expected a list of licence ids such as [cc-by-4.0, mit], got {self.allow!r}")
        object.__setattr__(self, "allow", sorted({n for a in allow if (n := normalise_license(a)) is not None}))
        if self.unknown not in ("keep", "remove"):
            raise ValueError(f"unknown: expected keep or remove, got {self.unknown!r}")
        if not isinstance(self.detect, bool):
            raise ValueError(f"detect: expected true or false, got {self.detect!r}")

    def setup(self) -> None:
        pass

    def score(self, batch: pa.RecordBatch) -> Scored:
        if "license" in batch.schema.names:
            raw = pc.cast(batch.column("license"), pa.string())
        else:
            raw = pa.nulls(batch.num_rows, pa.string())
        distinct = pc.unique(raw)  # licences repeat: normalise each spelling once
        labels = pa.array([normalise_license(v) for v in distinct.to_pylist()], pa.string())
        label = pc.take(labels, pc.index_in(raw, value_set=distinct, skip_nulls=False))
        if not self.detect:
            return Scored({"label": label})
        return Scored(_with_detection(batch, label))

    def decide(self, scores: Mapping[str, np.ndarray]) -> np.ndarray:
        label = pa.array(scores["label"], pa.string())
        out = np.full(len(label), None, dtype=object)
        allowed = np.asarray(pc.fill_null(pc.is_in(label, value_set=pa.array(self.allow, pa.string())), False))
        known = np.asarray(label.is_valid())
        out[known & ~allowed] = "not_allowed"
        if self.unknown == "remove":
            out[~known] = "unknown_license"
        return out


def _with_detection(batch: pa.RecordBatch, field_label: pa.Array) -> dict[str, pa.Array]:
    """The field's licence, the detected one and their combination (the field wins when it names one)."""
    found = [detect_licence(t, m) for t, m in zip(strings(batch, "text"), meta_values(batch, "html_links", "html"))]
    detected = pa.array([f[0] for f in found], pa.string())
    known = field_label.is_valid()
    origin = pc.if_else(known, "field", pc.if_else(detected.is_valid(), "detected", pa.scalar(None, pa.string())))
    return {"label": pc.coalesce(field_label, detected), "detected": detected,
            "evidence": pa.array([f[1] for f in found], pa.string()), "origin": origin}
