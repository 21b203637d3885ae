"""The SFT accounting report: summable per-unit counters, merged into the manifest's ``report``.

What it answers: how many examples were written, how many tokens are supervised (overall, by role, by
assistant-turn position, reasoning vs answer), how many examples train their stop token, how many literal
control tokens were neutralised, how many examples were truncated and what supervision that cost, and
the length histogram.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tokenmill.sft.failclosed import unsafe_line
from tokenmill.sft.lacks import lacks_sentence
from tokenmill.sft.oracle import reference_note
from tokenmill.sft.parity import empty_report


def length_bin(n: int) -> str:
    """Power-of-two bins: ``"<=128"``, ``"<=256"``, ..."""
    edge = 128
    while n > edge:
        edge *= 2
    return f"<={edge}"


COUNTS = ("examples", "tokens", "trained_tokens", "trained_by_role", "trained_by_turn", "reasoning_trained_tokens",
          "answer_trained_tokens", "stop_token_trained", "control_tokens_neutralised", "reasoning_inlined",
          "reasoning_dropped", "reasoning_dropped_by_template", "empty_think_unsupervised", "truncated",
          "truncated_exchanges", "supervised_tokens_lost", "length_histogram")  # what written examples add
TALLIES = ("task_mix", "tools_not_rendered_kept", "template_lacks", "unsafe")  # label -> count, when any


@dataclass
class SftReport:
    """The SFT accounting of one unit, or of a run: summable with ``+``, read by field.

    :meth:`to_dict` is the manifest's ``report`` (and a unit's ``data["report"]``, read back by
    :meth:`from_dict` on resume): ``parity``, then the example counts when any example was written, then each
    non-empty tally."""

    parity: dict[str, Any] = field(default_factory=empty_report)
    examples: int = 0
    tokens: int = 0
    trained_tokens: int = 0
    trained_by_role: dict[str, int] = field(default_factory=dict)
    trained_by_turn: list[int] = field(default_factory=list)
    reasoning_trained_tokens: int = 0
    answer_trained_tokens: int = 0
    stop_token_trained: int = 0  # examples that train their stop token
    control_tokens_neutralised: int = 0
    reasoning_inlined: int = 0
    reasoning_dropped: int = 0
    reasoning_dropped_by_template: int = 0
    empty_think_unsupervised: int = 0
    truncated: int = 0  # examples truncated
    truncated_exchanges: int = 0
    supervised_tokens_lost: int = 0
    length_histogram: dict[str, int] = field(default_factory=dict)
    task_mix: dict[str, int] = field(default_factory=dict)  # labels `tokenmill sft select` wrote
    tools_not_rendered_kept: dict[str, int] = field(default_factory=dict)
    template_lacks: dict[str, int] = field(default_factory=dict)  # records rejected: tools the template lacks
    unsafe: dict[str, int] = field(default_factory=dict)  # records rejected by a fail-closed check

    def add_example(self, stats: dict[str, Any]) -> None:
        """Count one written example (``stats``: its render's statistics)."""
        self.examples += 1
        self.tokens += stats["tokens"]
        self.trained_tokens += stats["trained_tokens"]
        _count_into(self.trained_by_role, stats["trained_by_role"])
        _add_list(self.trained_by_turn, stats["trained_by_turn"])
        self.reasoning_trained_tokens += stats["reasoning_trained_tokens"]
        self.answer_trained_tokens += stats["answer_trained_tokens"]
        self.stop_token_trained += int(bool(stats["stop_token_trained"]))
        self.control_tokens_neutralised += stats["control_tokens_neutralised"]
        self.reasoning_inlined += stats.get("reasoning_inlined", 0)
        self.reasoning_dropped += stats.get("reasoning_dropped", 0)
        self.reasoning_dropped_by_template += stats.get("reasoning_dropped_by_template", 0)
        self.empty_think_unsupervised += stats.get("empty_think_unsupervised", 0)
        self.truncated += int(stats.get("truncated_exchanges", 0) > 0)
        self.truncated_exchanges += stats.get("truncated_exchanges", 0)
        self.supervised_tokens_lost += stats.get("supervised_tokens_lost", 0)
        _count_into(self.length_histogram, {length_bin(stats["tokens"]): 1})

    def __add__(self, other: SftReport) -> SftReport:
        total = SftReport.from_dict(self.to_dict())  # a copy: neither side is changed
        total.parity = _summed(self.parity, other.parity)
        for name in COUNTS + TALLIES:
            mine, theirs = getattr(total, name), getattr(other, name)
            if isinstance(mine, dict):
                _count_into(mine, theirs)
            elif isinstance(mine, list):
                _add_list(mine, theirs)
            else:
                setattr(total, name, mine + theirs)
        return total

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"parity": _copied(self.parity)}
        if self.examples:
            out.update((name, _copied(getattr(self, name))) for name in COUNTS)
        out.update((name, dict(getattr(self, name))) for name in TALLIES if getattr(self, name))
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SftReport:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: _copied(v) for k, v in d.items() if k in names})


def _count_into(total: dict, more: dict) -> None:
    for k, v in more.items():
        total[k] = total.get(k, 0) + v


def _add_list(total: list, more: list) -> None:
    total.extend([0] * (len(more) - len(total)))
    for i, x in enumerate(more):
        total[i] += x


def _summed(a: dict, b: dict) -> dict:
    """Two nested dicts of counts added: keys in ``a``'s order, then ``b``'s new ones."""
    out = _copied(a)
    for k, v in b.items():
        if k not in out:
            out[k] = _copied(v)
        elif isinstance(v, dict):
            out[k] = _summed(out[k], v)
        else:
            out[k] += v
    return out


def _copied(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copied(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copied(v) for v in value]
    return value


def task_of(meta: str) -> str:
    """The task label ``tokenmill sft select`` wrote into an example's ``meta`` (its ``meta.task`` beside
    ``meta.selection_score``: a data set's own ``task`` field is not one), counted in the report's
    ``task_mix``; "" when the meta holds none."""
    try:
        selected = json.loads(meta).get("meta") or {}
        task = selected.get("task") if "selection_score" in selected else None
    except (ValueError, AttributeError):
        return ""
    return task if isinstance(task, str) else ""


def summarize(reports: Iterable[SftReport]) -> dict[str, Any]:
    """The run's report: the units' reports added, with the supervised and stop-token shares ({} for none)."""
    reports = list(reports)
    if not reports:
        return {}
    total = sum(reports, SftReport(parity={}))
    out = total.to_dict()
    if total.examples:
        out["supervised_share"] = round(total.trained_tokens / max(total.tokens, 1), 4)
        out["stop_token_trained_share"] = round(total.stop_token_trained / total.examples, 4)
        out["length_histogram"] = dict(sorted(total.length_histogram.items(), key=lambda kv: int(kv[0][2:])))
    return out


def render_report(report: dict[str, Any]) -> str:
    unsafe = unsafe_line(report.get("unsafe") or {})
    return "\n".join([_report_lines(report), *([unsafe] if unsafe else []), *_lacks_lines(report)])


def _dropped(packing: dict[str, Any]) -> str:
    """What the packer leaves out, said where the user looks (``tokenmill stats`` counts the same)."""
    over, empty = packing.get("dropped_over_length", 0), packing.get("empty", 0)
    parts = []
    if over:
        parts.append(f"{over:,} example{'s' if over != 1 else ''} longer than {packing['seq_len']:,} tokens dropped "
                     "(dropped_over_length; --max-length, sft.max_length, truncates them instead)")
    if empty:
        parts.append(f"{empty:,} empty example{'s' if empty != 1 else ''} dropped")
    return "; " + "; ".join(parts) if parts else ""


def _lacks_lines(report: dict[str, Any]) -> list[str]:
    """One line per tool feature the chat template never renders, with the records rejected for it (or kept
    without it)."""
    rejected = [f"rejected {n:,} records using tools: {lacks_sentence(lack)}"
                for lack, n in (report.get("template_lacks") or {}).items()]
    kept = [f"kept {n:,} records without the tools they use (--keep-unrendered-tools): {lacks_sentence(lack)}"
            for lack, n in (report.get("tools_not_rendered_kept") or {}).items()]
    return rejected + kept


def _parity_line(p: dict[str, Any]) -> str:
    """The parity counts; examples whose shapes cached verdicts vouched for are said to be, not shown as zeros
    (a re-run that checks nothing printed "0 identical ... 0 real differences")."""
    against = reference_note(p.get("reference") or "transformers")
    cached = p.get("skipped_cached", 0)
    checked = p.get("checked", 0) + p.get("exempt", 0) + p.get("real_differences", 0)
    trusted = (f"{cached} trusted from cached verdicts (an earlier run checked their shapes with the same "
               "tokenizer, template and options)") if cached else ""
    if trusted and not checked:
        return f"  parity vs {against}: {trusted}; none needed checking again"
    return (f"  parity vs {against}: {p.get('checked', 0)} identical, {p.get('exempt', 0)} differing only "
            f"deliberately (literal control strings), {p.get('real_differences', 0)} real differences"
            + (f"; {trusted}" if trusted else "")
            + (f"; not checked: {p['unavailable']}" if p.get("unavailable") else "")
            + (f"; loss masks equal the reference on {p['mask_turns_checked']} assistant turns"
               if p.get("mask_turns_checked") else ""))


def _report_lines(report: dict[str, Any]) -> str:
    if not report.get("examples"):
        return "SFT report: no examples written"
    r = report
    lines = [
        f"SFT report: {r['examples']:,} examples, {r['tokens']:,} tokens, "
        f"{r['trained_tokens']:,} supervised ({r['supervised_share']:.1%})",
        f"  stop token trained in {r['stop_token_trained_share']:.1%} of examples; "
        f"reasoning tokens trained {r['reasoning_trained_tokens']:,}, answer tokens {r['answer_trained_tokens']:,}",
        f"  supervised by assistant turn: {r['trained_by_turn'][:8]}{' ...' if len(r['trained_by_turn']) > 8 else ''}",
        f"  control tokens neutralised {r['control_tokens_neutralised']}; reasoning inlined {r['reasoning_inlined']}, "
        f"dropped {r['reasoning_dropped']} (+{r['reasoning_dropped_by_template']} by the template); "
        f"empty <think> left unsupervised {r['empty_think_unsupervised']}",
        f"  truncated {r['truncated']} examples ({r['truncated_exchanges']} exchanges, "
        f"{r['supervised_tokens_lost']:,} supervised tokens lost)",
        "  lengths: " + ", ".join(f"{k}: {v}" for k, v in r["length_histogram"].items()),
    ]
    if "parity" in r:
        p = r["parity"]
        lines.append(_parity_line(p))
        present = {k: v for k, v in (p.get("shapes_present") or {}).items() if v}
        if present:
            checked = p.get("shapes_checked") or {}
            lines.append("  shapes checked/present: " + ", ".join(f"{k} {checked.get(k, 0)}/{v}"
                                                                  for k, v in present.items()))
    if "packing" in r:
        k = r["packing"]
        lines.append(f"  packing at seq_len {k['seq_len']}: {k['n_packs']:,} sequences, efficiency {k['efficiency']:.2%}"
                     + _dropped(k))
    return "\n".join(lines)
