"""What a preference trainer needs checked, and the summary it needs to see.

Before tokenization (:func:`pair_problem`), a pair is rejected when its two completions are identical, either is
empty, or they differ only in whitespace: DPO's loss has nothing to learn from such a pair, and a
whitespace-only difference teaches formatting as preference. (A prompt that differs between the sides is
rejected where the pair is read: :mod:`tokenmill.pref.inputs`.) With ``--min-margin M``, a rated pair whose
chosen rating exceeds the rejected one by less than ``M`` is filtered (``margin_below_min``), and an unrated one
too (``margin_unrated``).

Truncation (:func:`truncate`), after TRL's split: the prompt keeps its **end** (its last ``max_prompt_length``
tokens: the question nearest the answer and the generation header), the completions keep their **starts** (the
first ``max_length - len(prompt)`` tokens each). A pair whose prompt alone fills ``max_length`` has no
completion token left: it is a counted reject (``completion_truncated_away``), as TRL's ``keep_start`` drops it.

The summary (:class:`Summary`, one per unit, summed): length bias (the share of pairs whose chosen completion
is longer, in tokens, and the median chosen/rejected length ratio: a known source of DPO's length
exploitation), the margin distribution of rated pairs, the pairs whose prompt renders differently alone, the
truncated pairs, and the tokens stored against those a prompt-per-completion layout would store.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tokenmill.pref.inputs import Pair
from tokenmill.pref.tokenize import PairProblem, Tokenized

RATIO_BINS = np.linspace(-8.0, 8.0, 1025)  # log2(chosen/rejected) in steps of 1/64: the median to within 1.1 %


def completion_pieces(value: Any) -> list[str]:
    """Everything a completion says (each message's reasoning, content and tool calls), for the identity checks."""
    if isinstance(value, str):
        return [value]
    pieces = []
    for m in value:
        pieces += [m.get("reasoning") or "", m.get("content") or "",
                   json.dumps(m["tool_calls"]) if m.get("tool_calls") else ""]
    return pieces


def pair_problem(pair: Pair) -> tuple[str, str] | None:
    """``(reason, sentence)`` when the pair gives a trainer nothing to learn from, else None."""
    sides = [("chosen", pair.chosen)] + ([("rejected", pair.rejected)] if pair.paired else [])
    for side, value in sides:
        if not "".join(completion_pieces(value)).strip():
            return "empty_completion", f"the {side} completion is empty; give it a reply or drop the record"
    if not pair.paired:
        return None
    chosen, rejected = completion_pieces(pair.chosen), completion_pieces(pair.rejected)
    if chosen == rejected:
        return "identical_completions", "chosen and rejected are identical: nothing to prefer; drop the pair"
    if [p.split() for p in chosen] == [p.split() for p in rejected]:
        return "whitespace_only_difference", ("chosen and rejected differ only in whitespace: the pair would teach "
                                              "formatting as preference; drop it or fix the whitespace")
    return None


def margin_decision(pair: Pair, min_margin: float | None) -> str | None:
    """The filter reason when ``--min-margin`` leaves the pair out, else None."""
    if min_margin is None or not pair.paired:
        return None
    if pair.margin is None:
        return "margin_unrated"
    return "margin_below_min" if pair.margin < min_margin else None


def truncate(t: Tokenized, *, max_length: int | None, max_prompt_length: int | None) -> Tokenized | PairProblem:
    """The pair cut to fit (module docstring): the prompt's end and the completions' starts are kept."""
    if max_prompt_length is not None and len(t.prompt_ids) > max_prompt_length:
        t.prompt_ids, t.truncated = t.prompt_ids[len(t.prompt_ids) - max_prompt_length:], True
    if max_length is None:
        return t
    room = max_length - len(t.prompt_ids)
    if room <= 0:
        return PairProblem("completion_truncated_away", f"the prompt's {len(t.prompt_ids):,} tokens fill --max-length "
                           f"{max_length:,}: no completion token is left; raise --max-length or set --max-prompt-length")
    for side in ("chosen", "rejected"):
        ids = getattr(t, f"{side}_ids")
        if ids is not None and len(ids) > room:
            setattr(t, f"{side}_ids", ids[:room])
            setattr(t, f"{side}_mask", getattr(t, f"{side}_mask")[:room])
            t.truncated = True
    return t


@dataclass
class Summary:
    """One unit's summary, summed over units with ``+`` (every field a count or a histogram)."""

    pairs: int = 0
    unpaired: Counter = field(default_factory=Counter)  # KTO records by label: desirable / undesirable
    chosen_longer: int = 0
    equal_length: int = 0
    ratio_hist: np.ndarray = field(default_factory=lambda: np.zeros(len(RATIO_BINS) - 1, dtype=np.int64))
    margins: Counter = field(default_factory=Counter)  # margin (rounded to 0.01) -> pairs
    prompt_not_prefix: int = 0
    prompt_cut_example: str = ""
    truncated: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    trained_tokens: int = 0
    second_prompt_tokens: int = 0  # what storing each pair's prompt a second time (once per completion) would add

    def add(self, pair: Pair, t: Tokenized) -> None:
        """Count one written pair (or KTO record)."""
        self.prompt_tokens += len(t.prompt_ids)
        self.completion_tokens += len(t.chosen_ids) + (0 if t.rejected_ids is None else len(t.rejected_ids))
        self.trained_tokens += int(t.chosen_mask.sum()) + (0 if t.rejected_mask is None else int(t.rejected_mask.sum()))
        self.truncated += t.truncated
        if t.prompt_cut:
            self.prompt_not_prefix += 1
            self.prompt_cut_example = self.prompt_cut_example or t.prompt_cut
        if t.rejected_ids is None:
            self.unpaired["desirable" if pair.label else "undesirable"] += 1
            return
        self.pairs += 1
        self.second_prompt_tokens += len(t.prompt_ids)
        c, r = len(t.chosen_ids), len(t.rejected_ids)
        self.chosen_longer += c > r
        self.equal_length += c == r
        ratio = np.clip(np.log2(max(c, 1) / max(r, 1)), RATIO_BINS[0], RATIO_BINS[-1])
        self.ratio_hist[min(np.searchsorted(RATIO_BINS, ratio, side="right") - 1, len(self.ratio_hist) - 1)] += 1
        if pair.margin is not None:
            self.margins[round(pair.margin, 2)] += 1

    def __add__(self, other: Summary) -> Summary:
        return Summary(self.pairs + other.pairs, self.unpaired + other.unpaired,
                       self.chosen_longer + other.chosen_longer, self.equal_length + other.equal_length,
                       self.ratio_hist + other.ratio_hist, self.margins + other.margins,
                       self.prompt_not_prefix + other.prompt_not_prefix,
                       self.prompt_cut_example or other.prompt_cut_example, self.truncated + other.truncated,
                       self.prompt_tokens + other.prompt_tokens, self.completion_tokens + other.completion_tokens,
                       self.trained_tokens + other.trained_tokens,
                       self.second_prompt_tokens + other.second_prompt_tokens)

    def to_state(self) -> dict:
        """JSON-able, for the unit's result (the engine keeps it for a resumed run)."""
        state = {k: v for k, v in self.__dict__.items() if k not in ("ratio_hist", "margins", "unpaired")}
        nonzero = np.nonzero(self.ratio_hist)[0]
        return {**state, "unpaired": dict(self.unpaired), "margins": [[m, n] for m, n in self.margins.items()],
                "ratio_hist": [[int(i), int(self.ratio_hist[i])] for i in nonzero]}

    @classmethod
    def from_state(cls, state: dict) -> Summary:
        hist = np.zeros(len(RATIO_BINS) - 1, dtype=np.int64)
        for i, n in state["ratio_hist"]:
            hist[i] = n
        rest = {k: v for k, v in state.items() if k not in ("ratio_hist", "margins", "unpaired")}
        return cls(**rest, unpaired=Counter(state["unpaired"]), ratio_hist=hist,
                   margins=Counter({float(m): n for m, n in state["margins"]}))

    def to_dict(self) -> dict:
        """The run's report section (manifest ``report``, summary, data card)."""
        sides = self.pairs * 2 + sum(self.unpaired.values())
        stored = self.prompt_tokens + self.completion_tokens
        per_side = stored + self.second_prompt_tokens
        return {
            "pairs": self.pairs, "unpaired": dict(self.unpaired), "completions": sides,
            "length_bias": self._length_bias(),
            "margin": self._margin(),
            "prompt_not_prefix": {"pairs": self.prompt_not_prefix, "example": self.prompt_cut_example[:200]},
            "truncated": self.truncated,
            "tokens": {"prompt": self.prompt_tokens, "completions": self.completion_tokens, "stored": stored,
                       "trained": self.trained_tokens, "without_shared_prompt": per_side,
                       "saved_share": round(1 - stored / per_side, 6) if per_side else 0.0},
        }

    def _length_bias(self) -> dict:
        if not self.pairs:
            return {"chosen_longer_share": None, "equal_share": None, "median_length_ratio": None}
        cumulative = np.cumsum(self.ratio_hist)
        k = int(np.searchsorted(cumulative, (self.pairs + 1) / 2))
        median = 2 ** ((RATIO_BINS[k] + RATIO_BINS[k + 1]) / 2)
        return {"chosen_longer_share": round(self.chosen_longer / self.pairs, 4),
                "equal_share": round(self.equal_length / self.pairs, 4), "median_length_ratio": round(float(median), 3)}

    def _margin(self) -> dict:
        rated = sum(self.margins.values())
        if not rated:
            return {"rated": 0}
        values = np.repeat(np.array(list(self.margins), dtype=float), list(self.margins.values()))
        return {"rated": rated, "min": float(values.min()), "median": float(np.median(values)),
                "mean": round(float(values.mean()), 4), "max": float(values.max()),
                "counts": {f"{m:g}": n for m, n in sorted(self.margins.items())}}
