"""The ``dclm`` preset's funnel on the real documents of ``../shared/data/pretrain``: documents per step and
seconds per stage, with a quality model trained first by the defaults of ``tokenmill quality train`` on the
reference-vs-web sets of ``benchmarks/quality.py`` (never on the documents curated here).

    python benchmarks/dclm_funnel.py [--shared ../shared/data] [--workers 1] [--no-write]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import machine, update_section  # noqa: E402
from quality import reference_sets  # noqa: E402
from tokenmill.curate.quality.classifier import train_quality  # noqa: E402
from tokenmill.curate.workflows.curate import run_curate  # noqa: E402

HEADING = "Curation: the dclm preset funnel"


def run(shared: Path, work: Path, workers: int) -> dict:
    pos, neg = reference_sets(shared, work)
    started = time.monotonic()
    card = train_quality(pos, neg, out=work / "quality.bin").card
    train_s = time.monotonic() - started
    load = os.getloadavg()[0]
    m = run_curate([str(shared / "pretrain")], out=work / "out", preset="dclm", quality_model=str(work / "quality.bin"),
                   workers=workers, progress=False)
    return {"manifest": m, "train_s": train_s, "card": card, "load": load, "workers": workers,
            "positives": len(pos), "negatives": len(neg)}


def stage_seconds(m: dict, entry: dict) -> float:
    """Wall seconds of the stages a step ran in (a document step shares its map stage's pass)."""
    seconds = m["run"].get("stage_seconds", {})
    if entry["kind"] == "document":
        return m["run"]["step_seconds"].get(entry["id"], 0.0)
    return sum(v for k, v in seconds.items() if k.removesuffix("_v1").split(".")[0] in (entry["name"],
               f"{entry['name']}_score", f"{entry['name']}_apply"))


def report(r: dict) -> str:
    m = r["manifest"]
    entries = {e["id"]: e for e in m["steps"]}
    lines = [f"`python benchmarks/dclm_funnel.py`: `tokenmill curate ../shared/data/pretrain --preset dclm "
             f"--quality-model MODEL --workers {r['workers']}` on the shared machine ({machine()}; 1-min load "
             f"{r['load']:.1f} at the start). The model: `tokenmill quality train` defaults on the reference-vs-web "
             f"sets of `benchmarks/quality.py` ({r['positives']:,} positive, {r['negatives']:,} negative documents; "
             f"{r['train_s']:.1f} s; held-out AUC {r['card']['scores'].get('auc', float('nan')):.3f}).", "",
             "| step | reached | removed | left | seconds |", "|---|---|---|---|---|"]
    for row in m["funnel"]["rows"]:
        entry = entries.get(row["step"])
        secs = f"{stage_seconds(m, entry):.2f}" if entry else ""
        lines.append(f"| {row['step']} | {row['reached']:,} | {row['removed']:,} | {row['left']:,} | {secs} |")
    c = m["counts"]
    lines += [f"| kept | | | {c['kept']:,} ({c['kept'] / max(c['input'], 1):.1%} of {c['input']:,}) | "
              f"{m['run']['seconds']:.1f} (whole run) |", ""]
    for row in m["funnel"]["rows"]:
        if row.get("clusters"):
            sizes = ", ".join(f"{s['clusters']}x{s['size']}" for s in row["clusters"]["sizes"]) or "none"
            lines.append(f"- {row['step']} clusters (count x size): {sizes}")
        if row.get("histogram"):
            h = row["histogram"]
            lines.append(f"- {row['step']}: cut {h['cut']:.3f}; scores in 20 bins over [0, 1]: "
                         + " ".join(map(str, h["counts"])))
    lines += ["", "Seconds of a document step are its own scoring time inside the shared first pass; those of a "
              "corpus step are the wall time of its stages. Document steps dominate here (RefinedWeb's line "
              "rules and Gopher repetition on the whole books in `pretrain/`); dedup and the quality cut are "
              "seconds on 500 documents."]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--shared", default=str(Path(__file__).resolve().parents[2] / "shared" / "data"))
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--no-write", action="store_true", help="print, do not update BENCHMARKS.md")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="tokenmill-dclm-") as tmp:
        body = report(run(Path(args.shared), Path(tmp), args.workers))
    print(body)
    if not args.no_write:
        update_section(HEADING, body)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
