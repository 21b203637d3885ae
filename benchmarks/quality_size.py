"""Quality model size: the quantised default of ``tokenmill quality train`` against the full model, the same
training run, on the same held-out split, in one run.

(a) the reference-vs-web sets of ``benchmarks/quality.py``: AUC on the card's held-out split and on DCLM's
    human-labelled file (``pretrain/dclm_quality_agreement_data.jsonl``, never trained on);
(b) the DCLM labelled file itself, trained on its own split (every 10th example held out by a text hash).

    python benchmarks/quality_size.py [--shared ../shared/data] [--no-write]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import machine, update_section  # noqa: E402
from quality import labelled, reference_sets  # noqa: E402
from tokenmill.curate.quality.classifier import evaluate, load_model, train_quality  # noqa: E402

HEADING = "Quality model size"


def train_both(pos, neg, work: Path, tag: str, extra: tuple | None) -> list[dict]:
    rows = []
    for quantize in (False, True):
        out = work / f"{tag}-{'q' if quantize else 'full'}.bin"
        t0 = time.process_time()
        card = train_quality(pos, neg, out=out, quantize=quantize).card
        row = {"set": tag, "model": "quantised (default)" if quantize else "full", "mb": out.stat().st_size / 1e6,
               "auc": card["scores"].get("auc", float("nan")), "train_cpu_s": time.process_time() - t0,
               "bucket": card["params"]["bucket"]}
        if extra:
            row["dclm_auc"] = evaluate(load_model(str(out)), *extra)["auc"]
        rows.append(row)
    return rows


def report(rows: list[dict]) -> str:
    lines = [f"`python benchmarks/quality_size.py` ({machine()}): each set trained once per row with the defaults "
             "(word bigrams, dim 64, 25 epochs, bucket sized to the data), then either saved whole or product-"
             "quantised (fastText `quantize`: cutoff 100,000 rows, dsub 2, qnorm, retrain). AUC on the same "
             "held-out split (every 10th example by text hash).", "",
             "| training set | model | size | held-out AUC | AUC on DCLM's labels | training CPU s |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        dclm = f"{r['dclm_auc']:.4f}" if "dclm_auc" in r else "(trained on them)"
        lines.append(f"| {r['set']} | {r['model']} | {r['mb']:.1f} MB | {r['auc']:.4f} | {dclm} | {r['train_cpu_s']:.1f} |")
    lines += ["", "Goal: at most 20 MB by default with the held-out AUC within 0.01 of the full model's. "
              "`tokenmill quality train --param quantize=0` keeps the full model."]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--shared", default=str(Path(__file__).resolve().parents[2] / "shared" / "data"))
    p.add_argument("--no-write", action="store_true")
    args = p.parse_args(argv)
    shared = Path(args.shared)
    texts, labels = labelled(shared)
    with tempfile.TemporaryDirectory(prefix="tokenmill-qsize-") as tmp:
        work = Path(tmp)
        pos, neg = reference_sets(shared, work)
        rows = train_both(pos, neg, work, "reference vs web", (texts, labels))
        rows += train_both([t for t, y in zip(texts, labels) if y], [t for t, y in zip(texts, labels) if not y],
                           work, "DCLM labelled file", None)
    body = report(rows)
    print(body)
    if not args.no_write:
        update_section(HEADING, body)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
