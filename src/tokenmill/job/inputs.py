"""The one input planner: paths in, a frozen :class:`Inputs` out (files, routes, schemas, work units).

Every command that reads inputs plans them here, so that each gets the same walk (symbolic-link cycles
and unreadable entries skipped and named), ``--exclude``, routing with its refusal of the other track's
data (``--force`` takes it anyway, ``--skip-misrouted`` leaves it out and names it), the check of every
explicit mapping against the fields each input has, and the work units (small files packed together;
``--limit``: every input read from its start, never split).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tokenmill import selection
from tokenmill.base.inputs import estimate_units  # noqa: F401 (re-exported)
from tokenmill.errors import RoutingError
from tokenmill.io import plan_units
from tokenmill.io.paths import expand_inputs_report
from tokenmill.route.mapping import check_mappings

PREFERENCE = "preference"  # the kind `tokenmill pref` takes
ANY = "any"  # a job that reads records of every kind (a teacher's prompts): routed and recorded, never refused


@dataclass(frozen=True)
class Inputs:
    """The inputs of one run, as planned once: what every stage and the manifest read."""

    files: list  # tokenmill.base.inputs.InputFile, in input order
    routes: list  # the router's decision for each file
    schemas: dict[str, dict]  # InputFile.rel -> the mapping used (explicit, else the router's)
    units: list  # tokenmill.base.inputs.WorkUnit
    walk_skipped: list[dict] = field(default_factory=list)  # what the directory walks left out, and why
    excluded: list[str] = field(default_factory=list)  # relative paths --exclude left out
    misrouted: list[dict] = field(default_factory=list)  # inputs --skip-misrouted left out

    def selection(self) -> dict[str, Any]:
        """The config entries that name what was left out (for the fingerprint and the manifest)."""
        return {k: v for k, v in (("excluded", self.excluded), ("skipped_inputs", self.misrouted)) if v}

    def manifest_inputs(self) -> list[dict]:
        return [{**r.to_dict(), "schema_used": self.schemas[f.rel]} for f, r in zip(self.files, self.routes)]


def plan_inputs(
    track: str,
    paths: Sequence[str],
    *,
    text_mode: str = "auto",
    schemas: dict[str, dict] | None = None,
    exclude: Sequence[str] = (),
    force: bool = False,
    skip_misrouted: bool = False,
    unit_bytes: int | None = None,
    limit: int | None = None,
    on_files: Callable[[list], Any] | None = None,
    pack: bool = True,
) -> Inputs:
    """Plan the inputs of a run of ``track`` (``pretrain`` or ``sft``: the kind of data the command takes;
    :data:`ANY`: every kind, no refusal).

    ``on_files(files)`` runs once the files are known, before routing (an executor starts its workers).
    ``pack=False``: every file keeps units of its own (a job whose units know a record by its line alone).
    """
    files, walk_skipped = expand_inputs_report(list(map(str, paths)), text_mode=text_mode)
    files, excluded = selection.exclude_files(files, exclude)
    if on_files is not None:
        on_files(files)
    routes = selection.route_all(files, text_mode=text_mode)
    given = schemas or {}
    misrouted: list[dict] = []
    if track != ANY:
        check_mappings(track, files, routes, schemas)  # every mapping against the fields each input has
        if skip_misrouted:
            files, routes, misrouted = selection.split_misrouted(track, files, routes, given)
        # an explicit mapping is the user's own routing decision; every other input is checked by the router
        unmapped = [r for f, r in zip(files, routes) if f.rel not in given and "*" not in given]
        refuse_misrouted(track, unmapped, force=force)
    picked = {f.rel: given.get(f.rel) or given.get("*") or r.schema for f, r in zip(files, routes)}
    units = plan_units(files, unit_bytes=unit_bytes, split=limit is None, pack=pack)  # limit: each input from its start
    return Inputs(files, routes, picked, units, walk_skipped=walk_skipped, excluded=excluded, misrouted=misrouted)


def _not_pairs(route: Any) -> str:
    """Why ``tokenmill pref`` refuses an input of another kind, and the command that takes it."""
    fields = set((route.evidence or {}).get("columns") or {})
    if route.kind == "sft" and {"prompt", "completion"} <= fields:
        return (f"{route.path}: prompt/completion records without a boolean 'label': KTO data needs `label: true|false` "
                "on every record (true: desirable); as SFT data, use `tokenmill sft`")
    command = {"sft": "`tokenmill sft`", "pretrain": "`tokenmill pretrain`"}.get(route.kind)
    use = f"use {command}" if command else "give chosen/rejected pairs or KTO records (prompt, completion, label)"
    return f"{route.path}: {route.kind} data (confidence {route.confidence:.2f}), not preference pairs: {use}"


def refuse_misrouted(track: str, routes: list[Any], *, force: bool) -> None:
    """Raise ``RoutingError`` for inputs of the other kind (unless forced), naming each and why. An input
    with no readable record (empty, truncated) is of no kind: beside readable inputs its reader rejects it."""
    unreadable = [r for r in routes if r.kind == "unknown" and not r.evidence.get("records")]
    if len(unreadable) == len(routes):
        unreadable = []  # nothing readable is left: refused below, as before
    wrong = [r for r in routes if r.kind != track and r not in unreadable]
    if not wrong:
        return
    if force and track != PREFERENCE and all(r.kind != PREFERENCE for r in wrong):
        return
    lines = []
    for r in wrong:
        why = "; ".join(r.warnings) if getattr(r, "warnings", None) else ""
        if r.kind == PREFERENCE:
            cols = ", ".join(f"{k}={v!r}" for k, v in r.schema.items() if k in ("prompt", "chosen", "rejected") and v)
            lines.append(f"{r.path}: preference pairs ({cols}): use `tokenmill pref`; the {track} track takes "
                         f"{'conversations' if track == 'sft' else 'documents'}, not chosen/rejected pairs (map one "
                         "side explicitly in a config schema to use it)")
        elif track == PREFERENCE:
            lines.append(_not_pairs(r))
        else:
            lines.append(f"{r.path}: looks like {r.kind} data (confidence {r.confidence:.2f})" + (f": {why}" if why else ""))
    refused = PREFERENCE in (track, *(r.kind for r in wrong))  # no --force turns pairs into conversations or back
    hint = "" if refused else "\nPass --force to process it anyway."
    raise RoutingError(f"refusing input(s) that do not belong to the {track} track:\n  " + "\n  ".join(lines) + hint)
