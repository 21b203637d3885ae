"""CPU seconds of each document step of the dclm preset's first pass, two versions of tokenmill side by side.

    python benchmarks/first_pass_steps.py --before-src /tmp/before/src [--mb 10] [--rounds 2] [--shared ../shared/data]

Input: ``--mb`` MB of ``benchmarks/crawl_corpus.py`` output (real web pages resampled with fresh edits). Each
side runs ``run_curate(CORPUS, preset="refinedweb", workers=1)`` (url, language, Gopher repetition, Gopher
quality, RefinedWeb: the document steps of ``--preset dclm``, which then adds its corpus steps) in a fresh
process of its own, with the cascade's step clock switched to the process's CPU clock, so each step's
``step_seconds`` in the manifest are its CPU seconds; "the rest of the pass" is the process's CPU time in
``run_curate`` less the steps' (reading, the documents and ledger files, the model loads, the driver). The
sides alternate for ``--rounds`` rounds; each figure is the smallest of its rounds. The after side is this
checkout's ``src``; ``--before-src`` is another ``src`` (for instance ``git archive main src``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import REPO, machine  # noqa: E402

STEPS = ["url_v1", "language_v1", "gopher_repetition_v1", "gopher_quality_v1", "refinedweb_v1"]
CHILD = """
import json, shutil, sys, time
time.perf_counter = time.process_time  # the cascade's step clock: CPU seconds of this process
from tokenmill.curate.workflows.curate import run_curate
t0 = time.process_time()
m = run_curate([sys.argv[1]], out=sys.argv[2], preset="refinedweb", workers=1, report=False, progress=False)
total = time.process_time() - t0
print(json.dumps({"total": total, "steps": m["run"]["step_seconds"], "kept": m["counts"]["kept"]}))
"""


def side(src: Path, corpus: Path, out: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src)}
    run = subprocess.run([sys.executable, "-c", CHILD, str(corpus), str(out)], env=env, capture_output=True,
                         text=True, check=True)
    return json.loads(run.stdout.strip().splitlines()[-1])


def table(before: dict, after: dict) -> list[str]:
    lines = ["| step | before CPU s | after CPU s | before / after |", "|---|---|---|---|"]
    rows = [(s.removesuffix("_v1"), before["steps"].get(s, 0.0), after["steps"].get(s, 0.0)) for s in STEPS]
    rest = [("the rest of the pass (reading, writing, model loads, driver)",
             before["total"] - sum(before["steps"].values()), after["total"] - sum(after["steps"].values()))]
    for name, b, a in rows + rest + [("**the whole pass**", before["total"], after["total"])]:
        lines.append(f"| {name} | {b:.2f} | {a:.2f} | {b / a:.2f}x |" if a > 0 else f"| {name} | {b:.2f} | {a:.2f} | |")
    return lines


def best(runs: list[dict]) -> dict:
    return {"total": min(r["total"] for r in runs), "kept": runs[0]["kept"],
            "steps": {s: min(r["steps"].get(s, 0.0) for r in runs) for s in STEPS}}


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--before-src", required=True)
    p.add_argument("--mb", type=float, default=10)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--shared", default=str(REPO.parent / "shared" / "data"))
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="tokenmill-steps-") as tmp:
        work = Path(tmp)
        from crawl_corpus import write_corpus

        info = write_corpus(work / "crawl.jsonl", shared=Path(args.shared), mb=args.mb)
        load = os.getloadavg()
        runs: dict[str, list] = {"before": [], "after": []}
        for k in range(args.rounds):
            for name, src in (("before", Path(args.before_src)), ("after", REPO / "src")):
                runs[name].append(side(src, work / "crawl.jsonl", work / f"{name}{k}"))
        before, after = best(runs["before"]), best(runs["after"])
    if before["kept"] != after["kept"]:
        raise SystemExit(f"the two sides kept {before['kept']} and {after['kept']} documents")
    print(f"`python benchmarks/first_pass_steps.py --mb {args.mb:g} --rounds {args.rounds}` ({machine()}; load "
          f"average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} at the start): {info['docs']:,} documents, "
          f"{info['bytes'] / 1e6:.0f} MB, one process, {before['kept']:,} kept by both sides.\n")
    print("\n".join(table(before, after)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
