"""Attention masks for packed rows: who may attend to whom, in the three forms attention backends take.

One rule for every packed layout. Each token has a ``segment`` (the document, or the preference pair, it
belongs to; a row's padding tail is a segment of its own) and a ``branch``: 0 for a shared prefix (an SFT
document, a pair's prompt) and 1, 2, ... for completions that share that prefix (a pair's chosen and
rejected). Query ``i`` may attend key ``j`` iff ``j <= i``, both are in the same segment, and ``j`` is in the
prefix or in ``i``'s own branch: a rejected completion sees the prompt and not the chosen one.

Forms, by backend in ``transformers`` 5:

- ``"bool"``: ``[B, 1, L, L]`` bool, True = may attend. SDPA reads it as is; **eager adds it** to the
  scores (True = +1, False = 0), so it leaks there: use ``"additive"`` with eager.
- ``"additive"``: ``[B, 1, L, L]`` float32, 0 where allowed, the dtype's minimum elsewhere: eager and SDPA.
- ``"flex"``: a flex-attention ``BlockMask`` built from the same rule (torch >= 2.5). On CPU, keep the row
  width fixed (``pad_to``): torch's compiled CPU kernel has given wrong values on varying widths.

Memory: the dense forms hold ``L^2`` entries per row (64 MiB per row at 8,192 tokens in float32); the
BlockMask holds one entry per 128x128 block.
"""

from __future__ import annotations

import numpy as np

from tokenmill._extras import require
from tokenmill.errors import ConfigError

FORMS = ("bool", "additive", "flex")


def check_form(form: str | None) -> str | None:
    """``form`` if it is one of :data:`FORMS` (or None), else a ``ConfigError`` naming them."""
    if form is not None and form not in FORMS:
        raise ConfigError(f"mask must be one of {', '.join(map(repr, FORMS))} or None; got {form!r}")
    return form


def allowed(segments: np.ndarray, branches: np.ndarray | None = None) -> np.ndarray:
    """Bool ``[B, 1, L, L]``: query i may attend key j (the rule in the module docstring)."""
    length = segments.shape[1]
    ok = (segments[:, :, None] == segments[:, None, :]) & np.tril(np.ones((length, length), np.bool_))
    if branches is not None:
        ok &= (branches[:, None, :] == 0) | (branches[:, :, None] == branches[:, None, :])
    return ok[:, None]


def build(form: str, segments: np.ndarray, branches: np.ndarray | None = None):
    """The mask of ``segments``/``branches`` (int ``[B, L]``) in ``form`` as a torch object."""
    torch = require("torch", "torch", "build attention masks")
    if form == "flex":
        return _block_mask(torch, segments, branches)
    ok = torch.from_numpy(allowed(segments, branches))
    if form == "bool":
        return ok
    return torch.zeros(ok.shape, dtype=torch.float32).masked_fill_(~ok, torch.finfo(torch.float32).min)


def _block_mask(torch, segments: np.ndarray, branches: np.ndarray | None):
    """A flex-attention ``BlockMask`` from the same rule, its ``mask_mod`` indexing the per-token ids."""
    flex = require("torch.nn.attention.flex_attention", "torch", "build a flex-attention BlockMask (torch >= 2.5)")
    seg = torch.from_numpy(np.ascontiguousarray(segments, np.int64))
    br = torch.from_numpy(np.ascontiguousarray(np.zeros_like(segments) if branches is None else branches, np.int64))

    def mask_mod(b, h, q, kv):
        same_branch = (br[b, kv] == 0) | (br[b, kv] == br[b, q])
        return (kv <= q) & (seg[b, q] == seg[b, kv]) & same_branch

    rows, length = segments.shape
    return flex.create_block_mask(mask_mod, rows, None, length, length, device="cpu")
