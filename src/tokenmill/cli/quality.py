"""``tokenmill quality train``: its parser, and the run of its job (:mod:`tokenmill.curate.quality.train`:
positives and negatives, or one labelled set, in any input format tokenmill reads; the classifier trained;
held-out accuracy and AUC printed; the model, its card, the manifest and the data card written to --out)."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Any

from tokenmill.curate.quality.train import Labels, quality_job
from tokenmill.errors import ConfigError
from tokenmill.job.options import JobOptions, add_options, option, paths, text
from tokenmill.job.run import run as run_job
from tokenmill.selection import render_plan


@dataclass(frozen=True, kw_only=True)
class QualityTrainOptions(JobOptions):
    """``tokenmill quality train``: the job flags it takes, the labelled texts and the fit's parameters."""
    positive: tuple[str, ...] = option((), "high-quality reference text", paths, kind="list", metavar="FILE")
    negative: tuple[str, ...] = option((), "raw web text", paths, kind="list", metavar="FILE")
    labelled: tuple[str, ...] = option((), "one labelled set (1/true = high quality)", paths, kind="list", metavar="FILE")
    label_field: str | None = option(None, "the label column of --labelled files", text, metavar="FIELD")
    text_field: str = option("text", "the text column (default: text)", text, metavar="FIELD")
    param: tuple[str, ...] = option((), "a fastText training parameter over the defaults (e.g. epoch=10), or "
                                    "quantize=0 for the full model instead of the quantised default; repeatable",
                                    paths, kind="repeat", metavar="KEY=VALUE")


def add_parser(sub: Any) -> None:
    p = sub.add_parser("quality", help="train the model-based quality classifier")
    qsub = p.add_subparsers(dest="quality", required=True, metavar="WHAT")
    t = qsub.add_parser("train", help="train a fastText quality classifier; prints held-out accuracy and AUC")
    t.add_argument("--out", required=True, help="directory to write (or s3://bucket/prefix): model.bin, its card "
                   "model.bin.card.json, manifest.json, datacard.md, rejects.jsonl")
    add_options(t, "quality train", QualityTrainOptions)


def _params(pairs: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise ConfigError(f"--param {pair!r}: expected KEY=VALUE")
        for cast in (int, float):
            try:
                out[key] = cast(value)
                break
            except ValueError:
                continue
        else:
            out[key] = value
    return out


def _by_reason(counts: dict[str, int]) -> str:
    return ": " + ", ".join(f"{k} {v:,}" for k, v in sorted(counts.items())) if counts else ""


def _print_balance(scores: dict, chunk: int) -> None:
    b, held = scores["balance"], scores["heldout_examples"]
    docs, ex = b["documents"], b["examples"]
    print(f"class balance: {docs['positive']:,} positive, {docs['negative']:,} negative documents ({b['ratio']:.1f} : 1); "
          f"{ex['positive']:,} + {ex['negative']:,} examples of up to {chunk} words")
    print(f"held-out split: {held['positive']:,} positive and {held['negative']:,} negative examples")
    if b["imbalanced"]:
        smaller = "negative" if b["larger"] == "positive" else "positive"
        print(f"warning: the classes are imbalanced ({b['ratio']:.1f} : 1, {b['larger']} to {smaller}); training repeats "
              f"the {smaller} examples to match, so the model sees few distinct ones and the held-out scores rest on "
              f"{held[smaller]:,} {smaller} example(s): add {smaller} documents", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    """A run of the ``quality train`` job (:mod:`tokenmill.curate.quality.train`) through the one driver: --out a
    directory (local or ``s3://``), guarded, locked and resumed as every job's is."""
    options = QualityTrainOptions.from_flags(args)
    labels = Labels(options.positive, options.negative, options.labelled, options.label_field, options.text_field)
    params = _params(list(options.param))
    quantize = params.pop("quantize", 1) not in (0, "0", "false", "False", "no")  # --param quantize=0: the full model
    job = quality_job(labels, params=params, quantize=quantize)
    manifest = run_job(job, labels.inputs(), out=args.out, options=options, tokenizer=None)
    if options.dry_run:
        print(render_plan(manifest))
        return 0
    _print_report(manifest, args.out)
    return 0


def _print_report(manifest: dict, out: str) -> None:
    q, counts = manifest["quality_model"], manifest["counts"]
    data, s = q["data"], q["scores"]
    print(f"trained on {data['positive_documents']:,} positive and {data['negative_documents']:,} negative documents "
          f"({data['unusable_records']:,} unusable records skipped{_by_reason(data['unusable_by_reason'])})")
    if manifest.get("rejects_file"):
        print(f"rejects: {out.rstrip('/')}/{manifest['rejects_file']}")
    _print_balance(s, q["chunk_words"])
    if "auc" in s:
        print(f"held-out: accuracy {s['accuracy']:.3f}, AUC {s['auc']:.3f}")
    else:
        print("held-out: too few examples of one class to evaluate")
    where = out.rstrip("/")
    print(f"model: {where}/{q['model']} ({'quantised' if q['quantized'] else 'full'}); card: {where}/{q['card']}; "
          f"{counts.get('input', 0):,} records read; the quality step takes `model: {where}`")
