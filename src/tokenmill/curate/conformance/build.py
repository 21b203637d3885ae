"""Rewrite ``heuristics.jsonl`` from :mod:`.cases`: ``python -m tokenmill.curate.conformance.build``.

Every case is scored by tokenmill's step; a case whose decision is not the one it was built for stops the
build, naming it (the file is never written from a step that disagrees with its own cases).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tokenmill.curate.conformance import score_case
from tokenmill.curate.conformance.cases import all_cases

OUT = Path(__file__).with_name("heuristics.jsonl")


def build() -> tuple[list[dict], list[str]]:
    rows, problems = [], []
    counters: dict[str, int] = {}
    for step, rule, params, text, want, note in all_cases():
        counters[step] = counters.get(step, 0) + 1
        got = score_case(step, params, text)
        row = {"id": f"{step}-{counters[step]:03d}", "step": step, "rule": rule, "params": params, "text": text,
               "scores": got["scores"], "rules": got["rules"], "decision": got["decision"], "note": note}
        if "text_after" in got:
            row["text_after"] = got["text_after"]
        if got["decision"] != want:
            problems.append(f"{row['id']} ({note}): built for {want!r}, step decides {got['decision']!r} "
                            f"{json.dumps(got['scores'])}")
        rows.append(row)
    return rows, problems


def main() -> int:
    rows, problems = build()
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print(f"{len(problems)} case(s) disagree; {OUT.name} not written", file=sys.stderr)
        return 1
    OUT.write_text("".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows), encoding="utf-8")
    print(f"wrote {len(rows)} vectors to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
