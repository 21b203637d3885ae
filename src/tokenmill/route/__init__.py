"""Route inputs to the right track: ``inspect`` reads a sample of each file and says pretrain, sft,
preference or unknown, with the field mapping the track's normaliser consumes."""

from __future__ import annotations

from tokenmill.route.classify import classify_rows
from tokenmill.route.router import KINDS, Route, inspect, inspect_file, render_json, render_table, schema_summary

__all__ = [
    "KINDS",
    "Route",
    "classify_rows",
    "inspect",
    "inspect_file",
    "render_json",
    "render_table",
    "schema_summary",
]
