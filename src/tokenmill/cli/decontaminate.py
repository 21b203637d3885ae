"""``tokenmill decontaminate``: the ``decontaminate`` step as a curation run of its own, with a report per
benchmark.

The command is ``tokenmill curate`` with one step, ``{name: decontaminate, eval: [...], fields: [...],
ngram: N}``: the same readers, rejects, ledger, funnel, resume and ``report.html``. On top it writes
``DIR/decontamination.json`` and prints, for every benchmark (an eval file, or a directory of them), the
files it was read from, the items read and the documents removed because they matched it (a document that
matches several benchmarks is counted once, under the one with most matching n-grams, as its reason says).
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenmill.base.files import atomic_write
from tokenmill.curate.decontam.step import eval_sources
from tokenmill.curate.workflows.curate import run_curate
from tokenmill.engine.store import shown
from tokenmill.errors import UsageError
from tokenmill.job.options import JobOptions, add_options, option, paths, positive_int
from tokenmill.selection import render_plan
from tokenmill.steps.build import build_step

REPORT = "decontamination.json"
EXAMPLES = 5  # removed documents shown per benchmark in decontamination.json (the first one printed)


@dataclass(frozen=True, kw_only=True)
class DecontamOptions(JobOptions):
    """``tokenmill decontaminate``: the job flags, the eval sets and how a document matches them."""
    evals: tuple[str, ...] = option((), "eval files or directories (JSONL, JSON, CSV, Parquet): a file is one "
                                    "benchmark, a directory one benchmark of all its files; repeatable", paths,
                                    cli="--eval", kind="extend", metavar="FILE")
    fields: tuple[str, ...] | None = option(None, "the eval columns holding the text (default: detected per file: "
                                            "GSM8K, MATH, MMLU, HumanEval, MBPP)", paths, kind="list", metavar="FIELD")
    ngram: int = option(13, "word n-gram length (default 13)", positive_int, metavar="N", parse=int)
    min_matches: int = option(1, "n-grams a document must share to be removed (default 1)", positive_int, metavar="N",
                              parse=int)


def add_parser(sub: Any) -> None:
    p = sub.add_parser("decontaminate", help="remove documents sharing n-grams with eval sets; a count per benchmark")
    p.add_argument("inputs", nargs="*", metavar="INPUT", help="files, directories, globs or fsspec URLs")
    p.add_argument("--out", help="output directory (documents/, ledger/, decontamination.json, report.html), "
                   "or s3://bucket/prefix")
    add_options(p, "decontaminate", DecontamOptions, other="SFT track")


def end_eval_list(argv: list[str]) -> list[str]:
    """``--eval A B -- REST`` as ``--eval=A --eval=B REST``: a ``--`` right after the eval paths ends the list
    (as the usage says), and the inputs and options after it parse as anywhere else, in either order."""
    if "--" not in argv:
        return argv
    out: list[str] = []
    i = 0
    while i < len(argv):
        if argv[i] != "--eval":
            out.append(argv[i])
            i += 1
            continue
        j = i + 1
        while j < len(argv) and not argv[j].startswith("-"):
            j += 1
        if j < len(argv) and argv[j] == "--" and j > i + 1:
            out += [f"--eval={e}" for e in argv[i + 1:j]]
            j += 1
        else:
            out += argv[i:j]
        i = j
    return out


def step_spec(options: DecontamOptions) -> dict:
    spec: dict[str, Any] = {"name": "decontaminate", "eval": list(options.evals), "ngram": options.ngram,
                            "min_matches": options.min_matches}
    if options.fields:
        spec["fields"] = list(options.fields)
    return spec


def _check_usage(args: argparse.Namespace, options: DecontamOptions) -> None:
    if not options.evals:
        raise UsageError("give the eval sets with --eval FILE... (files or directories)")
    if not args.inputs:
        raise UsageError("no INPUT: --eval takes every path after it, so put the inputs first "
                         "(tokenmill decontaminate INPUT... --eval FILE... --out DIR) or end the eval list with --")
    if not args.out:
        raise UsageError("missing --out DIR")


def benchmark_report(manifest: dict, spec: dict, out: Path | None = None) -> dict:
    """Per benchmark: its files, items read, documents removed (from the run's counts) and, from the ledger in
    ``out``, up to :data:`EXAMPLES` of them with the n-gram they share and the eval item."""
    step = build_step(spec, where="decontaminate")
    index = step.index()
    files: dict[str, list[str]] = {}
    for name, path in eval_sources(step.eval):
        files.setdefault(name, []).append(str(path))
    prefix = f"{step.name}_v{step.version}:"
    removed = Counter({k[len(prefix):]: v for k, v in manifest["counts"]["filtered"].items() if k.startswith(prefix)})
    c = manifest["counts"]
    shown = _examples(out / "ledger", step.name) if out is not None else {}
    return {
        "ngram": step.ngram, "min_matches": step.min_matches, "fields": list(step.fields) if step.fields else None,
        "documents": c["input"] - sum(c["rejected"].values()), "removed": sum(removed.values()), "kept": c["kept"],
        "benchmarks": [{"name": n, "files": files.get(n, []), "items": index.items.get(n, 0),
                        "documents_removed": removed.get(n, 0), "examples": shown.get(prefix + n, [])}
                       for n in index.names],
    }


def _examples(ledger: Path, step: str) -> dict[str, list[dict]]:
    """Per removal reason, the first :data:`EXAMPLES` removed documents with what they matched."""
    import pyarrow.parquet as pq

    if not ledger.exists():
        return {}
    columns = ["id", "reason", f"{step}.ngram", f"{step}.item"]
    found: dict[str, list[dict]] = {}
    for row in pq.read_table(ledger, columns=columns).to_pylist():
        reason = row["reason"] or ""
        if reason.startswith(f"{step}_v") and len(found.setdefault(reason, [])) < EXAMPLES:
            label, _, text = (row[f"{step}.item"] or "").partition(": ")
            found[reason].append({"document": row["id"], "ngram": row[f"{step}.ngram"], "item": label,
                                  "item_text": text})
    return found


def render(report: dict) -> str:
    lines = [f"decontamination ({report['ngram']}-grams, at least {report['min_matches']} shared): "
             f"{report['removed']:,} of {report['documents']:,} documents removed",
             f"  {'benchmark':<28} {'items':>8} {'removed':>9}  files"]
    for b in report["benchmarks"]:
        shown = ", ".join(Path(f).name for f in b["files"][:3]) + (f" (+{len(b['files']) - 3})" if len(b["files"]) > 3 else "")
        lines.append(f"  {b['name']:<28} {b['items']:>8,} {b['documents_removed']:>9,}  {shown}")
        lines += [f"    {e['document']} shares \"{e['ngram']}\" with {e['item']}: {e['item_text'][:80]!r}"
                  for e in b.get("examples", [])[:1]]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    options = DecontamOptions.from_flags(args)
    _check_usage(args, options)
    spec = step_spec(options)
    build_step(spec, where="decontaminate").index()  # unreadable or empty eval sets stop here, before any work
    reports: list[dict] = []

    def write_report(out: Path, manifest: dict) -> None:  # inside the run, the output still held
        reports.append(benchmark_report(manifest, spec, out))
        atomic_write(out / REPORT, (json.dumps(reports[-1], indent=2) + "\n").encode("utf-8"))

    manifest = run_curate(args.inputs, out=args.out, steps=[spec], workflow="decontaminate", finish=write_report,
                          **options.run_kwargs(), workers=options.workers)
    if options.dry_run:

        print(render_plan(manifest))
        return 0
    out = shown(args.out)
    print(render(reports[-1]))
    print(manifest["identity"])
    if manifest.get("rejects_file"):
        print(f"rejects: {out / manifest['rejects_file']}")
    print(f"documents: {out / 'documents'}\nledger: {out / 'ledger'}\nreport: {out / REPORT}, {out / 'report.html'}")
    return 0
