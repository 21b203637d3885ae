"""The SFT accounting report: summable per-unit counters, merged into the manifest's ``report``.

What it answers: how many examples were written, how many tokens are supervised (overall, by role, by
assistant-turn position, reasoning vs answer), how many examples train their stop token, how many literal
control tokens were neutralised, how many examples were truncated and what supervision that cost, and
the length histogram.
"""

from __future__ import annotations

import json
from typing import Any

from tokenmill.sft.failclosed import unsafe_line
from tokenmill.sft.lacks import lacks_sentence
from tokenmill.sft.oracle import reference_note


def length_bin(n: int) -> str:
    """Power-of-two bins: ``"<=128"``, ``"<=256"``, ..."""
    edge = 128
    while n > edge:
        edge *= 2
    return f"<={edge}"


def merge(a: Any, b: Any) -> Any:
    """Add two reports: numbers add, lists add element-wise, dicts merge recursively."""
    if isinstance(a, dict) and isinstance(b, dict):
        return {k: merge(a[k], b[k]) if k in a and k in b else a.get(k, b.get(k)) for k in {**a, **b}}
    if isinstance(a, list) and isinstance(b, list):
        longer, shorter = (a, b) if len(a) >= len(b) else (b, a)
        return [x + (shorter[i] if i < len(shorter) else 0) for i, x in enumerate(longer)]
    if isinstance(a, bool) or isinstance(b, bool):
        return int(a) + int(b)
    return a + b


def add_into(total: dict, b: dict) -> dict:
    """:func:`merge` of ``total`` and ``b`` written into ``total`` (returned): the same keys in the same order
    and the same sums, without rebuilding every nested dict of a unit's report for each example it adds."""
    for k, v in b.items():
        if k not in total:
            total[k] = _copied(v)
            continue
        t = total[k]
        if isinstance(t, dict) and isinstance(v, dict):
            add_into(t, v)
        elif isinstance(t, list) and isinstance(v, list):
            t.extend([0] * (len(v) - len(t)))
            for i, x in enumerate(v):
                t[i] += x
        elif type(t) is int and type(v) is int:  # the common leaf: two counts (a bool is summed by merge)
            total[k] = t + v
        else:
            total[k] = merge(t, v)
    return total


def _copied(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copied(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copied(v) for v in value]
    return value


def example_report(stats: dict[str, Any]) -> dict[str, Any]:
    """One written example's contribution to the report."""
    return {
        "examples": 1,
        "tokens": stats["tokens"],
        "trained_tokens": stats["trained_tokens"],
        "trained_by_role": dict(stats["trained_by_role"]),
        "trained_by_turn": list(stats["trained_by_turn"]),
        "reasoning_trained_tokens": stats["reasoning_trained_tokens"],
        "answer_trained_tokens": stats["answer_trained_tokens"],
        "stop_token_trained": int(bool(stats["stop_token_trained"])),
        "control_tokens_neutralised": stats["control_tokens_neutralised"],
        "reasoning_inlined": stats.get("reasoning_inlined", 0),
        "reasoning_dropped": stats.get("reasoning_dropped", 0),
        "reasoning_dropped_by_template": stats.get("reasoning_dropped_by_template", 0),
        "empty_think_unsupervised": stats.get("empty_think_unsupervised", 0),
        "truncated": int(stats.get("truncated_exchanges", 0) > 0),
        "truncated_exchanges": stats.get("truncated_exchanges", 0),
        "supervised_tokens_lost": stats.get("supervised_tokens_lost", 0),
        "length_histogram": {length_bin(stats["tokens"]): 1},
    }


def task_of(meta: str) -> dict[str, Any]:
    """The task label ``tokenmill sft select`` wrote into an example's ``meta`` (its ``meta.task`` beside
    ``meta.selection_score``: a data set's own ``task`` field is not one), as a count of the report's
    ``task_mix``; nothing when the meta holds none."""
    try:
        selected = json.loads(meta).get("meta") or {}
        task = selected.get("task") if "selection_score" in selected else None
    except (ValueError, AttributeError):
        return {}
    return {"task_mix": {task: 1}} if isinstance(task, str) else {}


def summarize(reports: list[dict]) -> dict[str, Any]:
    total: dict[str, Any] = {}
    for r in reports:
        total = merge(total, r) if total else dict(r)
    if total.get("examples"):
        n, tokens = total["examples"], max(total["tokens"], 1)
        total["supervised_share"] = round(total["trained_tokens"] / tokens, 4)
        total["stop_token_trained_share"] = round(total["stop_token_trained"] / n, 4)
        hist = total.get("length_histogram", {})
        total["length_histogram"] = dict(sorted(hist.items(), key=lambda kv: int(kv[0][2:])))
    return total


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
