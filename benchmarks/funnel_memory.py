"""Peak RSS of every process of ``curate --preset dclm`` then ``pretrain`` at two input sizes, two source trees.

    python benchmarks/funnel_memory.py [--mb 100 400] [--before /tmp/before/src] [--workers 2] [--model M] [--write]

Input: ``--mb`` MB of real crawl text per size (``benchmarks/crawl_corpus.py``), one JSONL file each; the
work units are tokenmill's automatic ones (16 units per file between 64 MB and 1 GB of input: the units
grow with the file, as from 250 MB to 1 GB). Quality model: trained like ``benchmarks/funnel_scale.py``'s
(or ``--model``). Each size runs ``tokenmill curate INPUT --preset dclm --quality-model M --workers W`` then
``tokenmill pretrain OUT/documents`` (GPT-2's BPE) once with this checkout's ``src`` and, with ``--before``,
once with another tree's (``git archive main src | tar -x -C /tmp/before``), one after the other in the
same run. Every process's peak RSS is polled (``common.run_per_process``); the driver is the ``tokenmill``
process itself; every other process of the command (the pool's workers, its fork server) is listed. Both trees must write the
same documents and ledger: their digests are compared.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import REPO, machine, run_per_process, update_section  # noqa: E402

HEADING = "Driver memory of the dclm funnel: flat from 100 MB to 400 MB"


def run_side(src: str, corpus: Path, work: Path, model: str, tokenizer: str, workers: int) -> dict:
    env = {**os.environ, "PYTHONPATH": src}
    cli = [sys.executable, "-m", "tokenmill.cli"]
    cur = run_per_process([*cli, "curate", str(corpus), "--out", str(work / "cur"), "--preset", "dclm",
                           "--quality-model", model, "--workers", str(workers), "--no-progress"], env=env)
    if cur["rc"]:
        raise SystemExit(f"curate failed ({src}): {cur['stderr'][-3000:]}")
    pre = run_per_process([*cli, "pretrain", str(work / "cur" / "documents"), "--out", str(work / "shards"),
                           "--tokenizer", tokenizer, "--workers", str(workers), "--no-progress"], env=env)
    if pre["rc"]:
        raise SystemExit(f"pretrain failed ({src}): {pre['stderr'][-3000:]}")
    return {"curate": summary(cur), "pretrain": summary(pre), "digest": digest(work / "cur")}


def summary(run: dict) -> dict:
    """The driver's peak, every other process's (the pool's workers and its fork server), CPU and wall."""
    root = next(iter(run["peak_rss_mb"]))  # the first process polled is the command itself
    others = sorted((v for pid, v in run["peak_rss_mb"].items() if pid != root), reverse=True)
    return {"driver_mb": run["main_rss_mb"], "workers_mb": others, "cpu_s": run["cpu_s"], "wall_s": run["wall_s"]}


def digest(out: Path) -> str:
    h = hashlib.sha256()
    for sub in ("documents", "ledger"):
        for f in sorted((out / sub).glob("*.parquet")):
            h.update(f.name.encode() + f.read_bytes())
    return h.hexdigest()[:16]


def report(rows: list[dict], args: argparse.Namespace, load: tuple) -> str:
    sizes = sorted({r["mb"] for r in rows})
    lines = [f"`python benchmarks/funnel_memory.py --mb {' '.join(f'{m:g}' for m in sizes)} --workers {args.workers}"
             f"{' --before BEFORE/src' if args.before else ''}` ({machine()}; load average {load[0]:.1f} / {load[1]:.1f} / "
             f"{load[2]:.1f} at the start, shared with other jobs). Input: real crawl text resampled with fresh edits "
             "(`benchmarks/crawl_corpus.py`), automatic work units (16 per file).", "",
             "| tree | input | documents | curate driver MB | curate: other processes MB | pretrain driver MB | "
             "pretrain: other processes MB | curate CPU s | documents + ledger digest |",
             "|---|---|---:|---:|---|---:|---|---:|---|"]
    for r in rows:
        c, p = r["side"]["curate"], r["side"]["pretrain"]
        lines.append(f"| {r['tree']} | {r['mb']:g} MB | {r['docs']:,} | {c['driver_mb']:.0f} | "
                     f"{', '.join(f'{v:.0f}' for v in c['workers_mb'])} | {p['driver_mb']:.0f} | "
                     f"{', '.join(f'{v:.0f}' for v in p['workers_mb'])} | {c['cpu_s']:.1f} | `{r['side']['digest']}` |")
    lines += ["", f"Ratio of the peaks, {sizes[-1]:g} MB / {sizes[0]:g} MB:", "",
              "| tree | curate driver | largest other curate process | pretrain driver |", "|---|---:|---:|---:|"]
    for tree in dict.fromkeys(r["tree"] for r in rows):
        lo, hi = (next(r["side"] for r in rows if r["tree"] == tree and r["mb"] == m) for m in (sizes[0], sizes[-1]))
        ratio = [hi["curate"]["driver_mb"] / lo["curate"]["driver_mb"],
                 max(hi["curate"]["workers_mb"], default=0) / max(max(lo["curate"]["workers_mb"], default=1), 1),
                 hi["pretrain"]["driver_mb"] / lo["pretrain"]["driver_mb"]]
        lines.append(f"| {tree} | " + " | ".join(f"{x:.2f}x" for x in ratio) + " |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--mb", type=float, nargs="+", default=[100, 400])
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--before", help="the src directory of the tree to compare with (e.g. main's)")
    p.add_argument("--shared", default=str(REPO.parent / "shared" / "data"))
    p.add_argument("--model", help="a quality model to use instead of training one")
    p.add_argument("--work", help="keep the work files under this directory")
    p.add_argument("--write", action="store_true", help="replace the section of BENCHMARKS.md with the tables")
    args = p.parse_args(argv)
    shared = Path(args.shared)
    from crawl_corpus import write_corpus
    from funnel_scale import gpt2_tokenizer, train_model

    trees = [("after (this tree)", str(REPO / "src"))] + ([("before", args.before)] if args.before else [])
    rows = []
    with tempfile.TemporaryDirectory(prefix="tokenmill-memory-", dir=args.work) as tmp:
        work = Path(tmp)
        model = args.model or train_model(shared, work)
        tokenizer = gpt2_tokenizer(shared, work)
        load = os.getloadavg()
        for mb in args.mb:
            corpus = work / f"crawl-{mb:g}.jsonl"
            info = write_corpus(corpus, shared=shared, mb=mb)
            for tree, src in trees:
                side = run_side(src, corpus, work / f"{mb:g}-{len(rows)}", model, tokenizer, args.workers)
                rows.append({"tree": tree, "mb": mb, "docs": info["docs"], "side": side})
                print(rows[-1], flush=True)
            corpus.unlink()
    body = report(rows, args, load)
    print(body)
    if args.write:
        update_section(HEADING, body)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
