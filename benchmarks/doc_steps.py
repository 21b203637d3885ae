"""Documents per CPU second of every per-document curation step, alone and chained, beside datatrove's filters.

    python benchmarks/doc_steps.py [--mb 20] [--rounds 3] [--datatrove-docs 300] [--before-src DIR]
                                   [--profile STEP] [--no-write] [--shared ../shared/data]

Two inputs, both real crawl text (``benchmarks/crawl_corpus.py``'s base pages: ``curation/cc_text/`` and the
Common Crawl documents of ``pretrain/``):

- ``pages``: every base page once (about 1,300 documents, 4.6 MB), one batch: no page repeats, so the word
  lexicon (``heuristics.text.LEXICON``) saves only what one page shares with another;
- ``crawl``: ``--mb`` MB of ``crawl_corpus.write_corpus`` output (pages resampled with fresh edits, the funnel
  benchmarks' input), batches of 4,096 documents (``tasks.SCORE_ROWS``, what a curate worker scores at once).

Each step alone (``score`` then ``decide``, after one untimed batch of the first 20 documents: a process's
one-time costs are spread over thousands of batches in a run; the word lexicon and the words cache emptied
before each pass, so every word-level step pays its own word split), twice in the same process: the first pass
pays the process's first touch of its memory (page faults of fresh buffers and of the language model's mapped
tables: system CPU), the second what a later batch of a run pays; then the first pass of ``--preset
refinedweb`` / ``dclm`` (url, language, Gopher repetition, Gopher quality, RefinedWeb) as one ``Cascade``
(every step scores every document, as the ledger does; the steps share the batch's words), twice likewise.
Every side runs in a fresh process of its own; CPU seconds (user + system) of the process; each figure is the
best of ``--rounds`` rounds. ``--before-src DIR`` runs the same in another version's ``src`` (``git archive
main src``) in alternate processes and checks that both sides made the same decisions and statistics (a digest
of every score and rule).

datatrove, in its own process, on the first ``--datatrove-docs`` documents of each input: ``URLFilter``, the
language rule (py3langid at 0.65, as in ``funnel_scale.py``: datatrove's fastText model needs the network),
``GopherRepetitionFilter``, ``GopherQualityFilter``, ``C4QualityFilter``, ``FineWebQualityFilter`` each alone
on every document, and the first pass (URL, language, Gopher repetition, Gopher quality; stopping at the first
removal, as datatrove does).

``--profile [INPUT:]STEP`` prints cProfile's top functions of one step (or ``chain``) on one input (``pages``) and
exits.
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import json
import os
import pstats
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import REPO, machine, update_section  # noqa: E402
from crawl_corpus import base_documents, write_corpus  # noqa: E402

HEADING = "Per-document steps: documents per CPU second, alone and chained"
STEPS = ["url", "language", "gopher_repetition", "gopher_quality", "refinedweb", "c4", "fineweb"]
CHAIN = ["url", "language", "gopher_repetition", "gopher_quality", "refinedweb"]
PARAMS = {"language": {"languages": ["en"], "threshold": 0.65}}
BATCH = 4096
GOAL = 3000
WARM = 20  # documents scored once before the timed part


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def load_input(which: str, path: str) -> list[tuple[str, str]]:
    """(text, url) of every document of the input."""
    if which == "pages":
        return json.loads(Path(path).read_text())
    with open(path, encoding="utf-8") as fh:
        return [(r["text"], r["url"]) for r in map(json.loads, fh)]


def batches(docs: list[tuple[str, str]]):
    import pyarrow as pa

    for at in range(0, len(docs), BATCH):
        part = docs[at: at + BATCH]
        yield pa.RecordBatch.from_pydict({
            "id": [str(at + i) for i in range(len(part))],
            "source": ["bench"] * len(part),
            "text": pa.array([t for t, _ in part], pa.large_string()),
            "url": pa.array([u for _, u in part], pa.large_string())})


def _fresh_words() -> None:
    """Empty the process's word lexicon and words cache (each step alone pays its own word split)."""
    from tokenmill.curate.filters.heuristics import text

    if hasattr(text, "LEXICON"):
        text.LEXICON.clear()
    if hasattr(text, "_CACHE"):
        text._CACHE.clear()


def _digest(h, scored, rules) -> None:
    import numpy as np

    for key in sorted(scored.scores):
        h.update(key.encode())
        values = scored.scores[key]
        values = values.to_pylist() if hasattr(values, "to_pylist") else np.asarray(values).tolist()
        h.update(repr(values).encode())
    h.update(repr([None if r is None else str(r) for r in rules]).encode())
    if scored.text is not None:
        h.update("\x00".join(str(t) for t in scored.text.to_pylist()).encode())


def run_step(name: str, data: list) -> dict:
    from tokenmill.steps.cascade import decisions
    from tokenmill.steps.registry import step_class

    step = step_class(name)(**PARAMS.get(name, {}))
    step.setup()
    step.score(next(batches(data[:WARM])))  # first-call costs (imports, kernels): once per process, not timed
    _fresh_words()

    def one(batch):
        scored = step.score(batch)
        return scored, decisions(step, scored.scores, batch.num_rows)

    def digest(h, done):
        for scored, rules in done:
            _digest(h, scored, rules)

    cpu, digest_, _ = _two_passes(name, list(batches(data)), one, digest)
    return {"cpu_s": cpu[0], "cpu_again_s": cpu[1], "digest": digest_}


def _two_passes(name: str, todo: list, one, digest) -> tuple[list[float], str, list]:
    """``one`` over every batch twice in this process (the first pass, then a second): the CPU seconds of each,
    the first pass's digest (``digest(h, results)``), which the second must equal, and the last results."""
    cpu, digests, done = [], [], []
    for _ in range(2):
        _fresh_words()
        start = cpu_seconds()
        done = [one(batch) for batch in todo]
        cpu.append(cpu_seconds() - start)
        h = hashlib.sha256()
        digest(h, done)
        digests.append(h.hexdigest()[:16])
    if digests[0] != digests[1]:
        raise SystemExit(f"{name}: the second pass scored differently")
    return cpu, digests[0], done


def run_chain(data: list) -> dict:
    import numpy as np

    from tokenmill.steps.cascade import Cascade
    from tokenmill.steps.registry import step_class

    cascade = Cascade([step_class(n)(**PARAMS.get(n, {})) for n in CHAIN])
    cascade.setup()
    warm = next(batches(data[:WARM]))
    cascade(warm, np.arange(warm.num_rows))  # first-call costs: once per process, not timed

    def digest(h, done):
        for result in done:
            h.update(repr(result.ledger.to_pydict()).encode())

    cpu, digest_, done = _two_passes("chain", list(batches(data)),
                                     lambda batch: cascade(batch, np.arange(batch.num_rows)), digest)
    return {"cpu_s": cpu[0], "cpu_again_s": cpu[1], "kept": sum(r.kept.num_rows for r in done), "digest": digest_}


def child(which: str, path: str, target: str) -> dict:
    data = load_input(which, path)
    result = run_chain(data) if target == "chain" else run_step(target, data)
    result["docs"] = len(data)
    return result


def run_datatrove(which: str, path: str, n: int) -> dict:
    from datatrove.data import Document
    from datatrove.pipeline.filters import (
        C4QualityFilter,
        FineWebQualityFilter,
        GopherQualityFilter,
        GopherRepetitionFilter,
        URLFilter,
    )

    from funnel_scale import py3langid_filter

    data = load_input(which, path)[:n]
    filters = {}
    try:
        from tldextract import TLDExtract
    except ImportError:  # URLFilter needs tldextract, which is not always installed
        pass
    else:
        url = URLFilter()
        url.tldextractor = TLDExtract(suffix_list_urls=())  # the bundled suffix list: no network here
        filters["url"] = url.filter
    english = py3langid_filter()
    filters |= {"language": english, "gopher_repetition": GopherRepetitionFilter().filter,
               "gopher_quality": GopherQualityFilter().filter, "c4": C4QualityFilter().filter,
               "fineweb": FineWebQualityFilter().filter}
    docs = lambda: [Document(text=t, id=str(i), metadata={"url": u}) for i, (t, u) in enumerate(data)]  # noqa: E731
    for f in filters.values():  # first calls load spaCy, the URL lists: not timed
        f(Document(text="warm up the word tokenizer. Another sentence here.", id="w",
                   metadata={"url": "https://example.org/"}))
    out = {}
    for name, f in filters.items():
        batch = docs()
        start = cpu_seconds()
        for d in batch:
            f(d)
        out[name] = cpu_seconds() - start
    chain = [filters[k] for k in ("url", "language", "gopher_repetition", "gopher_quality") if k in filters]
    batch = docs()
    start = cpu_seconds()
    kept = sum(all(f(d) is True for f in chain) for d in batch)
    out["chain"] = cpu_seconds() - start
    return {"docs": len(data), "cpu_s": out, "kept": kept}


def spawn(src: Path, args: list[str]) -> dict:
    env = {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{Path(__file__).resolve().parent}",
           "OPENBLAS_NUM_THREADS": "1"}
    run = subprocess.run([sys.executable, str(Path(__file__).resolve()), *args], env=env, capture_output=True,
                         text=True)
    if run.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed:\n{run.stderr[-3000:]}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def measure(src: Path, which: str, path: Path, target: str) -> dict:
    return spawn(src, ["--child", which, str(path), target])


def prepare(shared: Path, work: Path, mb: float) -> dict[str, dict]:
    pages = work / "pages.json"
    docs = base_documents(shared)
    pages.write_text(json.dumps(docs))
    crawl = work / "crawl.jsonl"
    info = write_corpus(crawl, shared=shared, mb=mb)
    return {"pages": {"path": pages, "docs": len(docs), "mb": sum(len(t.encode()) for t, _ in docs) / 1e6},
            "crawl": {"path": crawl, "docs": info["docs"], "mb": info["bytes"] / 1e6}}


def best(runs: list[dict]) -> dict:
    out = dict(runs[0])
    out["cpu_s"] = min(r["cpu_s"] for r in runs)
    out["cpu_again_s"] = min(r["cpu_again_s"] for r in runs)
    if len({r["digest"] for r in runs}) != 1:
        raise SystemExit("one side's rounds disagree")
    return out


def table(inputs: dict, after: dict, before: dict | None, dt: dict) -> list[str]:
    head = "| step | input | documents |"
    if before:
        head += " before docs / CPU s (first, second pass) |"
    head += " docs / CPU s (first, second pass) | datatrove docs / CPU s | / datatrove |"
    if before:
        head += " after / before (first, second) |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for target in [t for t in [*STEPS, "chain"] if t in next(iter(after.values()))]:  # those run (--steps)
        for which in inputs:
            a = after[which][target]
            rate = a["docs"] / a["cpu_s"]
            d = dt[which]
            dt_rate = d["docs"] / d["cpu_s"][target] if target in d["cpu_s"] else None
            label = "**first pass (url, language, Gopher x2, RefinedWeb)**" if target == "chain" else target
            row = f"| {label} | {which} | {a['docs']:,} |"
            if before:
                b = before[which][target]
                row += f" {b['docs'] / b['cpu_s']:,.0f}, {b['docs'] / b['cpu_again_s']:,.0f} |"
            row += f" {rate:,.0f}, {a['docs'] / a['cpu_again_s']:,.0f} |"
            row += f" {dt_rate:,.1f} | {rate / dt_rate:,.0f}x |" if dt_rate else " | |"
            if before:
                row += f" {b['cpu_s'] / a['cpu_s']:.2f}x, {b['cpu_again_s'] / a['cpu_again_s']:.2f}x |"
            lines.append(row)
    return lines


def profile(which: str, path: str, target: str) -> None:
    data = load_input(which, path)
    prof = cProfile.Profile()
    prof.enable()
    run_chain(data) if target == "chain" else run_step(target, data)
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(30)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--datatrove-docs", type=int, default=300)
    ap.add_argument("--before-src", type=Path)
    ap.add_argument("--profile")
    ap.add_argument("--steps", nargs="*", default=[*STEPS, "chain"])
    ap.add_argument("--shared", type=Path, default=REPO.parent / "shared" / "data")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    ap.add_argument("--datatrove", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(*args.child)))
        return 0
    if args.datatrove:
        which, path, n = args.datatrove
        print(json.dumps(run_datatrove(which, path, int(n))))
        return 0
    with tempfile.TemporaryDirectory(prefix="tokenmill-docsteps-") as tmp:
        inputs = prepare(args.shared, Path(tmp), args.mb)
        if args.profile:
            sys.path.insert(0, str(REPO / "src"))
            which, _, target = args.profile.rpartition(":")
            profile(which or "pages", str(inputs[which or "pages"]["path"]), target)
            return 0
        load = os.getloadavg()
        sides = {"after": REPO / "src"} | ({"before": args.before_src} if args.before_src else {})
        runs: dict = {s: {w: {t: [] for t in args.steps} for w in inputs} for s in sides}
        for _ in range(args.rounds):
            for which, info in inputs.items():
                for target in args.steps:
                    for side, src in sides.items():
                        runs[side][which][target].append(measure(src, which, info["path"], target))
        res = {s: {w: {t: best(r) for t, r in per.items()} for w, per in by.items()} for s, by in runs.items()}
        dt = {w: spawn(REPO / "src", ["--datatrove", w, str(info["path"]), str(args.datatrove_docs)])
              for w, info in inputs.items()}
        end_load = os.getloadavg()
    same = None
    if args.before_src:
        same = all(res["before"][w][t]["digest"] == res["after"][w][t]["digest"] for w in inputs for t in args.steps)
    body = report(inputs, res, dt, args, load, end_load, same)
    print(body)
    if not args.no_write:
        update_section(HEADING, body)
    return 0


def report(inputs, res, dt, args, load, end_load, same) -> str:
    after, before = res["after"], res.get("before")
    desc = "; ".join(f"{w}: {i['docs']:,} documents, {i['mb']:.1f} MB" for w, i in inputs.items())
    lines = [
        f"`python benchmarks/doc_steps.py --mb {args.mb:g} --rounds {args.rounds} --datatrove-docs "
        f"{args.datatrove_docs}{' --before-src ' + str(args.before_src) if args.before_src else ''}` ({machine()}; "
        f"load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} at the start, {end_load[0]:.1f} at the end). "
        f"Inputs ({desc}); datatrove on the first {args.datatrove_docs} documents of each. Documents per CPU second "
        f"of one process (one core), the best of {args.rounds} rounds; goal >= {GOAL:,} per step.",
        "",
        *table(inputs, after, before, dt),
    ]
    if same is not None:
        lines += ["", "Every step's statistics, rules and rewritten text, and the first pass's ledger: "
                  + ("**identical** on both sides (digests)." if same else "**DIFFERENT** between the sides.")]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
