"""Streaming readers with bounded memory: resolve inputs, plan work units, read them as batches."""

from tokenmill.io.base import FORMATS, TEXT_MODES, InputFile, RawBatch, WorkUnit
from tokenmill.io.formats import detect_format
from tokenmill.io.paths import expand_inputs
from tokenmill.io.reading import read_unit, sample_records
from tokenmill.io.units import plan_units

__all__ = [
    "FORMATS",
    "TEXT_MODES",
    "InputFile",
    "RawBatch",
    "WorkUnit",
    "detect_format",
    "expand_inputs",
    "plan_units",
    "read_unit",
    "sample_records",
]
