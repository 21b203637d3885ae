"""The chat tracks' own options, declared once: ``tokenmill sft``'s (the ``sft:`` section of a pipeline file)
and ``tokenmill pref``'s, the options both share in :class:`ChatOptions`. From these classes come the flags
(``--train-on``, ``--no-train-reasoning`` ...), the ``sft:`` section's keys and checks (config.py, and so
``tokenmill validate``), the fingerprint and the library's keyword arguments (``run_sft(..., train_on=...)``).

Apart from :mod:`tokenmill.sft.run` and :mod:`tokenmill.pref.run`, so that building the CLI's parser imports
neither numpy nor jinja2.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tokenmill.errors import ConfigError
from tokenmill.job.options import Options, boolean, choice, number, option, positive_int, seed, text
from tokenmill.sft.dates import DEFAULT_DATE


def iso_date(v: Any) -> str:
    try:
        datetime.fromisoformat(str(v))
    except (TypeError, ValueError):
        raise ValueError("expected an ISO 8601 date such as 2025-01-01 (the day chat templates that stamp the current "
                         "time are rendered at)") from None
    return v


def _maybe(check: Any) -> Any:
    """``check``, with None allowed (a pipeline file's ``max_length: null``: the default)."""
    return lambda v: v if v is None else check(v)


@dataclass(frozen=True, kw_only=True)
class ChatOptions(Options):
    """What both chat tracks take: the template, the length, the reasoning and the stop token."""

    chat_template: str | None = option(None, "template file, tokenizer_config.json or directory (default: the "
                                       "tokenizer's own, else ChatML)", _maybe(text), metavar="SPEC", fingerprint=False)
    max_length: int | None = option(None, "longest example in tokens; longer ones lose their oldest turns",
                                    _maybe(positive_int), metavar="N", parse=int)
    train_reasoning: bool = option(True, "do not train reasoning blocks", boolean, kind="negate")
    reasoning_policy: str = option("inline", "reasoning the template does not render", choice("inline", "drop", "reject"))
    allow_untrained_stop: bool = option(False, "go on when the template's end-of-turn string is not a special token "
                                        "(the model will not learn to stop)", boolean, kind="switch")
    date: str = option(DEFAULT_DATE, "the day (ISO 8601) chat templates that stamp the current time are rendered at",
                       iso_date, metavar="DATE")

    def __post_init__(self) -> None:
        problems = self.problems()
        if problems:
            raise ConfigError(problems)


@dataclass(frozen=True, kw_only=True)
class SftOptions(ChatOptions):
    """``tokenmill sft``'s own options: the ``sft:`` section of a pipeline file, or their flags."""

    train_on: str = option("assistant", "which assistant turns are trained (default assistant)",
                           choice("assistant", "last", "all"))
    supervise_empty_think: bool = option(False, "train empty <think></think> blocks", boolean, kind="switch")
    allow_consecutive: bool = option(False, "keep conversations with two turns of one role in a row (default: rejected)",
                                     boolean, kind="switch")
    verify: int = option(16, "examples per work unit checked against apply_chat_template, plus the first of each "
                         "conversation shape (0 = off)", seed, metavar="N", parse=int)
    on_mismatch: str = option("stop", "a real difference from apply_chat_template stops the run (default) or rejects "
                              "the example", choice("stop", "reject"))
    keep_unrendered_tools: bool = option(False, "keep records whose tools the chat template does not render "
                                         "(default: rejected)", boolean, kind="switch")
    on_unsafe: str = option("stop", "an example that trains nothing, a trained turn without an end-of-turn token, a "
                            "truncation that removed every trained token or ids that do not decode to the render stop "
                            "the run (default) or are rejected and counted", choice("stop", "reject"))
    seq_len: int | None = option(None, "also report the best-fit-decreasing packing plan for this length",
                                 _maybe(positive_int), metavar="N", parse=int, fingerprint=False)

    @property
    def policy(self) -> Any:
        """The masking options as one :class:`~tokenmill.sft.render.MaskPolicy` (validated)."""
        from tokenmill.sft.render import MaskPolicy

        return MaskPolicy(self.train_on, self.train_reasoning, self.supervise_empty_think, self.reasoning_policy)


@dataclass(frozen=True, kw_only=True)
class PrefOptions(ChatOptions):
    """``tokenmill pref``'s own options (their flags; a pair's completions are trained as the SFT track trains an
    assistant turn)."""

    max_length: int | None = option(None, "prompt + longest completion, in tokens: the completions keep their starts; "
                                    "a pair whose prompt fills it is rejected (completion_truncated_away)",
                                    _maybe(positive_int), metavar="N", parse=int)
    max_prompt_length: int | None = option(None, "the prompt keeps its last N tokens", _maybe(positive_int),
                                           metavar="N", parse=int)
    min_margin: float | None = option(None, "rated pairs only: keep those whose chosen rating exceeds the rejected one "
                                      "by at least this (unrated pairs are left out)", _maybe(number), metavar="M",
                                      parse=float)

    @property
    def policy(self) -> Any:
        """Every assistant turn of a completion trained (through its end-of-turn mark), as the SFT track does."""
        from tokenmill.sft.render import MaskPolicy

        return MaskPolicy("assistant", self.train_reasoning, False, self.reasoning_policy)
