"""Work units for the cores at hand: ``curate --preset dclm --workers 2`` on one JSONL file of real crawl text,
with the old fixed 64 MiB unit (``--unit-bytes 64MiB``) and with the automatic unit size (no ``--unit-bytes``),
side by side in one run: units, wall and CPU seconds, peak RSS of every process.

    python benchmarks/work_units.py [--mb 50] [--workers 2] [--shared ../shared/data] [--no-write]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import REPO, machine, run_per_process, update_section  # noqa: E402
from crawl_corpus import write_corpus  # noqa: E402
from quality import reference_sets  # noqa: E402

HEADING = "Work units: one file split for every worker"


def quality_model(shared: Path, work: Path) -> str:
    sys.path.insert(0, str(REPO / "src"))
    from tokenmill.curate.quality.classifier import train_quality

    pos, neg = reference_sets(shared, work)
    return train_quality(pos, neg, out=work / "quality.bin").model


def curate(corpus: Path, out: Path, model: str, workers: int, unit_bytes: str | None) -> dict:
    cmd = [sys.executable, "-m", "tokenmill.cli", "curate", str(corpus), "--out", str(out), "--preset", "dclm",
           "--quality-model", model, "--workers", str(workers), "--no-progress"]
    cmd += ["--unit-bytes", unit_bytes] if unit_bytes else []
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    r = run_per_process(cmd, env=env)
    if r["rc"]:
        raise SystemExit(f"curate failed ({r['rc']}): {r['stderr'][-2000:]}")
    m = json.loads((out / "manifest.json").read_text())
    r["units"] = m["run"].get("units", m.get("units"))
    r["kept"] = m["counts"]["kept"]
    r["digest"] = m.get("identity", "")
    return r


def report(rows: dict, info: dict, mb: float, workers: int, load: float) -> str:
    lines = [f"`python benchmarks/work_units.py --mb {mb:g} --workers {workers}` ({machine()}; 1-min load {load:.1f} "
             f"at the start): `tokenmill curate FILE --preset dclm --quality-model MODEL --workers {workers}` on one "
             f"{info['bytes'] / 1e6:.0f} MB JSONL file of real crawl text ({info['docs']:,} documents resampled from "
             f"{info['base_docs']:,} pages of `curation/cc_text/` and `pretrain/` with fresh edits, "
             "`benchmarks/crawl_corpus.py`), run twice in one script.", "",
             "| unit size | units | wall s | CPU s | CPU / wall | peak RSS, main | peak RSS, largest worker | kept |",
             "|---|---|---|---|---|---|---|---|"]
    for name, r in rows.items():
        workers_rss = [v for pid, v in r["peak_rss_mb"].items()]
        lines.append(f"| {name} | {r['units']} | {r['wall_s']:.1f} | {r['cpu_s']:.1f} | {r['cpu_s'] / r['wall_s']:.2f} | "
                     f"{r['main_rss_mb']:.0f} MB | {max(workers_rss):.0f} MB | {r['kept']:,} |")
    lines += ["", "CPU / wall is the number of cores kept busy (at most the worker count; the machine is shared, so "
              "other jobs lower it). Units are derived from the input's total size alone "
              "(`tokenmill.io.units.auto_unit_bytes`), never from `--workers`, so the output bytes are the same "
              "at any worker count (tests/io/test_auto_units.py)."]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--mb", type=float, default=50)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--shared", default=str(REPO.parent / "shared" / "data"))
    p.add_argument("--model", help="a quality model to use instead of training one")
    p.add_argument("--no-write", action="store_true")
    args = p.parse_args(argv)
    shared = Path(args.shared)
    with tempfile.TemporaryDirectory(prefix="tokenmill-units-") as tmp:
        work = Path(tmp)
        corpus = work / "crawl.jsonl"
        info = write_corpus(corpus, shared=shared, mb=args.mb)
        model = args.model or quality_model(shared, work)
        load = os.getloadavg()[0]
        rows = {"64 MiB (before)": curate(corpus, work / "before", model, args.workers, "64MiB"),
                "automatic (after)": curate(corpus, work / "after", model, args.workers, None)}
    body = report(rows, info, args.mb, args.workers, load)
    print(body)
    if not args.no_write:
        update_section(HEADING, body)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
