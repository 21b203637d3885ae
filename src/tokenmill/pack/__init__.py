"""Packing algorithms over length arrays (pure numpy).

``best_fit_decreasing`` packs whole SFT examples (no example cut, no attention across them);
``concat_chunk`` and ``boundary_aware`` serve the pretraining stream in document order.
Every packer reads only the per-document lengths, never the tokens.
"""

from __future__ import annotations

from tokenmill.pack.bfd import best_fit_decreasing
from tokenmill.pack.chunk import boundary_aware, concat_chunk, window_pieces
from tokenmill.pack.plan import PackPlan
from tokenmill.pack.stats import packing_stats

__all__ = ["PackPlan", "best_fit_decreasing", "boundary_aware", "concat_chunk", "packing_stats", "window_pieces"]
