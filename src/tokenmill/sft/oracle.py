"""The reference for parity checks: a ``transformers`` tokenizer built from the same tokenizer files.

It is built independently of tokenmill's own encoders and span logic (``transformers`` over the tokenizer.json
for Hugging Face tokenizers; transformers' template renderer plus tiktoken itself for ``.tiktoken`` ranks), so
an agreement between the two means something.

Without ``transformers`` (a plain ``pip install tokenmill``) the reference is :class:`PlainChatOracle`: the
``tokenizers`` library (or tiktoken) encodes the whole render at once, and the renders come from the sandbox
of :mod:`tokenmill.sft.template`, which mirrors transformers' own. It still proves the written ids (tokenmill
encodes span by span with another encoder) and the loss mask (from the prefix renders of
:mod:`tokenmill.sft.maskref`); what only ``transformers`` proves is that the sandbox renders as
``apply_chat_template`` does, so the summary names the reference used.
"""

from __future__ import annotations

import base64
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tokenmill._extras import require
from tokenmill.errors import TemplateError
from tokenmill.sft.budget import render_budget
from tokenmill.sft.template import compile_template

if TYPE_CHECKING:
    from tokenmill.tokenize.sources import Source
    from tokenmill.tokenize.tokenizer import Tokenizer

TRANSFORMERS, PLAIN = "transformers", "tokenizers"


def unavailable(tokenizer: Tokenizer) -> str:
    """Why no reference can be built for this tokenizer ("" when one can), decided without importing anything."""
    source = getattr(tokenizer, "_source", None)
    if source is None:
        return "tokenizer has no loadable source"
    if source.kind not in ("hf", "tiktoken"):
        return f"no transformers reference for a {source.kind} model here (use its tokenizer.json)"
    return ""


def reference() -> str:
    """Which reference a run checks against: ``transformers`` when it can be imported, else the plain one
    (decided without importing it: a run's main process never uses it)."""
    import importlib.util

    try:
        found = importlib.util.find_spec("transformers") is not None
    except (ImportError, ValueError):
        found = False
    return TRANSFORMERS if found else PLAIN


def reference_note(kind: str) -> str:
    """What the SFT report says of the reference it checked against (one line's worth)."""
    if kind == TRANSFORMERS:
        return "apply_chat_template"
    return ("the tokenizers library's reference (transformers is not installed: pip install 'tokenmill[hf]' to "
            "check against apply_chat_template itself)")


def hf_oracle(tokenizer: Tokenizer) -> tuple[Any | None, str]:
    """(transformers tokenizer, "") or (None, why no reference can be built for this tokenizer)."""
    why = unavailable(tokenizer)
    if why:
        return None, why
    source = tokenizer._source
    plain = reference() == PLAIN
    if source.kind == "tiktoken":
        return TiktokenChatOracle(source, tokenizer, render=render_plain if plain else None), ""
    if plain:
        return PlainChatOracle(tokenizer), ""
    transformers = require("transformers", "hf", "check token parity against apply_chat_template")
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

    def __init__(self, source: Source, tokenizer: Tokenizer, render: Callable[..., str] | None = None):
        import tiktoken

        ranks = {base64.b64decode(tok): int(rank) for tok, rank in
                 (line.split() for line in source.data.splitlines() if line.strip())}
        self._enc = tiktoken.Encoding(name=source.name, pat_str=source.pat_str, mergeable_ranks=ranks,
                                      special_tokens=dict(source.specials))
        self._special: dict[str, Any] = {k: v for k, v in (("bos_token", tokenizer.bos_token),
                                                           ("eos_token", tokenizer.eos_token)) if v}
        self._render = render  # the plain reference's renderer, when transformers is not installed

    def apply_chat_template(self, messages, *, tools=None, chat_template=None, add_generation_prompt=False,
                            **_ignored) -> list[int]:
        if self._render is not None:
            return self.encode(self._render(messages, tools=tools, chat_template=chat_template,
                                            add_generation_prompt=add_generation_prompt, special=self._special))
        from transformers.utils.chat_template_utils import render_jinja_template

        text = render_jinja_template(conversations=[messages], tools=tools, chat_template=chat_template,
                                     add_generation_prompt=add_generation_prompt, **self._special)[0][0]
        return self.encode(text)

    def encode(self, text: str) -> list[int]:
        return self._enc.encode(text, allowed_special="all")

    def decode(self, ids: list[int]) -> str:
        return self._enc.decode(ids)


def render_plain(messages, *, tools=None, chat_template: str, add_generation_prompt: bool = False,
                 special: dict[str, str]) -> str:
    """A render of the chat template in tokenmill's sandbox, for the plain reference."""
    with render_budget():
        return compile_template(chat_template).render(messages=messages, tools=tools, documents=None,
                                                      add_generation_prompt=add_generation_prompt, **special)


class PlainChatOracle:
    """The parts of a ``transformers`` tokenizer the parity checks use, without ``transformers``, for a Hugging
    Face tokenizer: renders of the chat template (text or ids) and the ids and offsets of an encoded text. See
    the module docstring for what it proves."""

    def __init__(self, tokenizer: Tokenizer):
        from tokenizers import Tokenizer as Encoder

        self._special = {k: v for k, v in (("bos_token", tokenizer.bos_token), ("eos_token", tokenizer.eos_token)) if v}
        self._encoder = Encoder.from_str(tokenizer._source.data.decode("utf-8"))
        self.added_tokens_decoder = self._encoder.get_added_tokens_decoder()
        self.all_special_tokens = sorted({*self._special.values(),
                                          *(str(t) for t in self.added_tokens_decoder.values() if t.special)})
        self.all_special_ids = [self._encoder.token_to_id(t) for t in self.all_special_tokens]

    def apply_chat_template(self, messages, *, tools=None, chat_template=None, tokenize=True,
                            add_generation_prompt=False, **_ignored) -> str | list[int]:
        if chat_template is None:  # parity always passes the run's template; this reference has none of its own
            raise TemplateError("the plain reference renders the template it is given: pass chat_template")
        text = render_plain(messages, tools=tools, chat_template=chat_template,
                            add_generation_prompt=add_generation_prompt, special=self._special)
        return self._encoder.encode(text, add_special_tokens=False).ids if tokenize else text

    def __call__(self, text: str, *, add_special_tokens: bool = False, return_offsets_mapping: bool = False) -> dict:
        encoding = self._encoder.encode(text, add_special_tokens=add_special_tokens)
        return {"input_ids": encoding.ids, **({"offset_mapping": encoding.offsets} if return_offsets_mapping else {})}

    def decode(self, ids: list[int]) -> str:
        return self._encoder.decode(ids, skip_special_tokens=False)
