"""``tokenmill quality train``: read positives and negatives (or one labelled set) in any input format
tokenmill reads, train the classifier, print held-out accuracy and AUC, write the model and its card."""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from tokenmill.errors import ConfigError

TRUE_LABELS = {"1", "true", "yes", "hq", "high", "positive", "pos"}
FALSE_LABELS = {"0", "false", "no", "lq", "low", "negative", "neg"}


def iter_rows(paths: Sequence[str], *, text_mode: str = "auto") -> Iterator[tuple[str, int, dict]]:
    """``(source, loc, row)`` for every readable record of the inputs (rejects are skipped and counted by
    the caller through :func:`read_texts`)."""
    from tokenmill.io import expand_inputs, plan_units, read_unit

    files = expand_inputs(list(paths), text_mode=text_mode)
    for unit in plan_units(files, unit_bytes=1 << 40):
        for raw in read_unit(unit, text_mode=text_mode):
            for loc, row in zip(raw.locs, raw.to_rows()):
                yield raw.source, loc, row
            if raw.rejects:
                yield raw.source, -len(raw.rejects), {}


def read_texts(paths: Sequence[str], *, text_field: str = "text", label_field: str | None = None,
               text_mode: str = "auto") -> tuple[list[str], list[bool | None], int]:
    """Texts (and labels when ``label_field`` is given) of the inputs; also the number of unusable records."""
    texts: list[str] = []
    labels: list[bool | None] = []
    skipped = 0
    for _, loc, row in iter_rows(paths, text_mode=text_mode):
        if loc < 0:
            skipped += -loc
            continue
        text = row.get(text_field)
        label = _label(row.get(label_field)) if label_field else None
        if not isinstance(text, str) or not text.strip() or (label_field and label is None):
            skipped += 1
            continue
        texts.append(text)
        labels.append(label)
    return texts, labels, skipped


def _label(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    s = str(value).strip().lower() if value is not None else ""
    return True if s in TRUE_LABELS else False if s in FALSE_LABELS else None


def add_parser(sub: Any) -> None:
    p = sub.add_parser("quality", help="train the model-based quality classifier")
    qsub = p.add_subparsers(dest="quality", required=True, metavar="WHAT")
    t = qsub.add_parser("train", help="train a fastText quality classifier; prints held-out accuracy and AUC")
    t.add_argument("--positive", nargs="+", default=[], metavar="FILE", help="high-quality reference text")
    t.add_argument("--negative", nargs="+", default=[], metavar="FILE", help="raw web text")
    t.add_argument("--labelled", nargs="+", default=[], metavar="FILE", help="one labelled set (1/true = high quality)")
    t.add_argument("--label-field", help="the label column of --labelled files")
    t.add_argument("--text-field", default="text", help="the text column (default: text)")
    t.add_argument("--text-mode", default="auto", choices=["auto", "file", "line", "paragraph"],
                   help="how plain-text files split into documents")
    t.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="a fastText training parameter over the defaults (e.g. epoch=10), or quantize=0 for the full "
                   "model instead of the quantised default; repeatable")
    t.add_argument("--out", required=True, help="model file to write (its card goes beside it)")


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


def cmd_quality(args: argparse.Namespace) -> int:
    from tokenmill.curate.quality import train_quality

    if args.labelled and (args.positive or args.negative):
        raise ConfigError("quality train: give --labelled, or --positive and --negative, not both")
    if args.labelled:
        if not args.label_field:
            raise ConfigError("quality train: --labelled needs --label-field (the column holding 1/0 or true/false)")
        texts, labels, skipped = read_texts(args.labelled, text_field=args.text_field, label_field=args.label_field,
                                            text_mode=args.text_mode)
        pos = [t for t, y in zip(texts, labels) if y]
        neg = [t for t, y in zip(texts, labels) if not y]
        sources = {"labelled": args.labelled, "label_field": args.label_field}
    else:
        if not args.positive or not args.negative:
            raise ConfigError("quality train: give --positive FILE... and --negative FILE... (or --labelled)")
        pos, _, s1 = read_texts(args.positive, text_field=args.text_field, text_mode=args.text_mode)
        neg, _, s2 = read_texts(args.negative, text_field=args.text_field, text_mode=args.text_mode)
        skipped = s1 + s2
        sources = {"positive": args.positive, "negative": args.negative}
    sources.update({"positive_documents": len(pos), "negative_documents": len(neg), "unusable_records": skipped})
    params = _params(args.param)
    quantize = params.pop("quantize", 1) not in (0, "0", "false", "False", "no")  # --param quantize=0: the full model
    report = train_quality(pos, neg, out=args.out, params=params, sources=sources,
                           quantize=quantize)
    s = report.card["scores"]
    print(f"trained on {len(pos):,} positive and {len(neg):,} negative documents "
          f"({skipped:,} unusable records skipped)")
    if "auc" in s:
        print(f"held-out: accuracy {s['accuracy']:.3f}, AUC {s['auc']:.3f} "
              f"({s['heldout_examples']['positive']} + {s['heldout_examples']['negative']} examples)")
    else:
        print("held-out: too few examples of one class to evaluate")
    size = Path(report.model).stat().st_size / 1e6
    print(f"model: {report.model} ({size:.1f} MB{', quantised' if report.card['quantized'] else ''})\n"
          f"card: {report.model}.card.json")
    return 0
