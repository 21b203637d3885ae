"""The reference for parity checks: a ``transformers`` tokenizer built from the same tokenizer files.

It is built independently of tokenmill's own encoders and span logic (``transformers`` over the tokenizer.json
for Hugging Face tokenizers; transformers' template renderer plus tiktoken itself for ``.tiktoken`` ranks), so
an agreement between the two means something.
"""

from __future__ import annotations

import base64
import tempfile
from pathlib import Path
from typing import Any

from tokenmill._extras import require


def unavailable(tokenizer: Any) -> str:
    """Why no reference can be built for this tokenizer ("" when one can), decided without importing anything."""
    source = getattr(tokenizer, "_source", None)
    if source is None:
        return "tokenizer has no loadable source"
    if source.kind not in ("hf", "tiktoken"):
        return f"no transformers reference for a {source.kind} model here (use its tokenizer.json)"
    return ""


def hf_oracle(tokenizer: Any) -> tuple[Any | None, str]:
    """(transformers tokenizer, "") or (None, why no reference can be built for this tokenizer)."""
    why = unavailable(tokenizer)
    if why:
        return None, why
    transformers = require("transformers", "hf", "check token parity against apply_chat_template")
    source = tokenizer._source
    if source.kind == "tiktoken":
        return TiktokenChatOracle(source, tokenizer), ""
    named = {k: v for k, v in (("bos_token", tokenizer.bos_token), ("eos_token", tokenizer.eos_token)) if v}
    # from a file: given a tokenizers object, transformers deep-copies it (a second build, half a second)
    with tempfile.TemporaryDirectory(prefix="tokenmill-oracle-") as scratch:
        path = Path(scratch) / "tokenizer.json"
        path.write_bytes(source.data)
        hf = transformers.PreTrainedTokenizerFast(tokenizer_file=str(path), **named)
    return hf, ""


class TiktokenChatOracle:
    """``apply_chat_template`` for a tiktoken encoding, which ``transformers`` cannot load as such.

    It does what ``apply_chat_template(tokenize=True)`` does: transformers' own ``render_jinja_template``
    renders the text, then tiktoken itself encodes it with every special token allowed.
    """

    def __init__(self, source: Any, tokenizer: Any):
        import tiktoken

        ranks = {base64.b64decode(tok): int(rank) for tok, rank in
                 (line.split() for line in source.data.splitlines() if line.strip())}
        self._enc = tiktoken.Encoding(name=source.name, pat_str=source.pat_str, mergeable_ranks=ranks,
                                      special_tokens=dict(source.specials))
        self._special = {k: v for k, v in (("bos_token", tokenizer.bos_token),
                                           ("eos_token", tokenizer.eos_token)) if v}

    def apply_chat_template(self, messages, *, tools=None, chat_template=None, add_generation_prompt=False,
                            **_ignored) -> list[int]:
        from transformers.utils.chat_template_utils import render_jinja_template

        text = render_jinja_template(conversations=[messages], tools=tools, chat_template=chat_template,
                                     add_generation_prompt=add_generation_prompt, **self._special)[0][0]
        return self._enc.encode(text, allowed_special="all")

    def decode(self, ids: list[int]) -> str:
        return self._enc.decode(ids)
