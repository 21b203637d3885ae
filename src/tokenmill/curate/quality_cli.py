"""``tokenmill quality train``: read positives and negatives (or one labelled set) in any input format
tokenmill reads, train the classifier, print held-out accuracy and AUC, write the model and its card."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from tokenmill.base.accounting import Reject
from tokenmill.errors import ConfigError
from tokenmill.job.options import add_job_flags

REJECTS_SUFFIX = ".rejects.jsonl"
TRUE_LABELS = {"1", "true", "yes", "hq", "high", "positive", "pos"}
FALSE_LABELS = {"0", "false", "no", "lq", "low", "negative", "neg"}


def iter_rows(paths: Sequence[str], *, text_mode: str = "auto",
              limit: int | None = None) -> Iterator[tuple[str, int, dict | Reject]]:
    """``(source, loc, row)`` for every record of the inputs (``limit``: the first N of every input file); a
    record the reader rejected comes as its :class:`Reject` in place of the row."""
    from tokenmill.io import expand_inputs, plan_units, read_unit
    from tokenmill.selection import take_records

    files = expand_inputs(list(paths), text_mode=text_mode)
    for unit in plan_units(files, unit_bytes=1 << 62):  # one unit per file: what --limit counts in
        for raw in take_records(read_unit(unit, text_mode=text_mode), limit):
            for loc, row in zip(raw.locs, raw.to_rows()):
                yield raw.source, loc, row
            for r in raw.rejects:
                yield r.source, r.loc, r


def read_texts(paths: Sequence[str], *, text_field: str = "text", label_field: str | None = None,
               text_mode: str = "auto", limit: int | None = None) -> tuple[list[str], list[bool | None], list[Reject]]:
    """Texts (and labels when ``label_field`` is given) of the inputs; also the unusable records, each a
    :class:`Reject` with its file, line and reason."""
    texts: list[str] = []
    labels: list[bool | None] = []
    rejects: list[Reject] = []
    columns: set[str] = set()
    for source, loc, row in iter_rows(paths, text_mode=text_mode, limit=limit):
        if isinstance(row, Reject):
            rejects.append(row)
            continue
        columns.update(row)
        problem = _row_problem(row, text_field, label_field)
        if problem:
            rejects.append(Reject(source, loc, problem[0], f"{source}:{loc}: {problem[1]}", raw=row))
            continue
        texts.append(row[text_field])
        labels.append(_label(row.get(label_field)) if label_field else None)
    _check_columns(paths, columns, {"--text-field": text_field, "--label-field": label_field})
    return texts, labels, rejects


def _row_problem(row: dict, text_field: str, label_field: str | None) -> tuple[str, str] | None:
    text = row.get(text_field)
    if text is None:
        return "missing_field", f"no {text_field!r} field"
    if not isinstance(text, str):
        return "wrong_type", f"field {text_field!r} is {type(text).__name__}, expected a string"
    if not text.strip():
        return "empty_text", f"field {text_field!r} is empty"
    if label_field and _label(row.get(label_field)) is None:
        return "bad_label", (f"label {row.get(label_field)!r} in {label_field!r} is not one of 1/0, true/false "
                             f"({', '.join(sorted(TRUE_LABELS | FALSE_LABELS))})")
    return None


def _check_columns(paths: Sequence[str], columns: set[str], wanted: dict[str, str | None]) -> None:
    """A column no record holds is named (with the columns there are), not reported as "0 examples"."""
    missing = [f"{flag} {name!r}" for flag, name in wanted.items() if name and columns and name not in columns]
    if missing:
        raise ConfigError(f"quality train: no record of {', '.join(paths)} has the column(s) {', '.join(missing)}; "
                          f"the columns are: {', '.join(sorted(columns))}")


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
    t.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="a fastText training parameter over the defaults (e.g. epoch=10), or quantize=0 for the full "
                   "model instead of the quantised default; repeatable")
    t.add_argument("--out", required=True, help="model file to write (its card goes beside it)")
    add_job_flags(t, "quality train", "overwrite", "dry_run", "limit", "text_mode")


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


def _by_reason(rejects: list[Reject]) -> str:
    counts = Counter(r.reason for r in rejects)
    return ": " + ", ".join(f"{k} {v:,}" for k, v in sorted(counts.items())) if counts else ""


def _write_rejects(model: str, rejects: list[Reject]) -> str:
    """``MODEL.rejects.jsonl``: every unusable record with its file, line, reason and raw value."""
    from tokenmill.base.files import atomic_write

    path = f"{model}{REJECTS_SUFFIX}"
    atomic_write(Path(path), b"".join(r.to_json() + b"\n" for r in rejects))
    return path


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


def _say(line: str) -> None:
    """One progress line on stderr as a phase starts: training and quantising are minutes of silence otherwise."""
    print(f"quality train: {line}", file=sys.stderr, flush=True)


def _files(paths: Sequence[str], kind: str) -> str:
    return f"{len(paths)} {kind} file{'' if len(paths) == 1 else 's'}"


def cmd_quality(args: argparse.Namespace) -> int:
    """``--out`` is held for the whole run as every output is (``job/driver.py``): local only, never over a file
    tokenmill did not write, over its own only with ``--overwrite``, one run at a time."""
    from tokenmill.curate.quality import CARD_SUFFIX
    from tokenmill.job.driver import check_file_target, hold_file, local_out

    ours = lambda p: Path(str(p) + CARD_SUFFIX).is_file()  # noqa: E731
    if args.dry_run:  # the same refusals, the inputs read and counted; nothing trained, nothing written
        check_file_target(local_out(args.out, "quality train"), overwrite=bool(args.overwrite), ours=ours,
                          what="quality model")
        pos, neg, skipped, _ = _read(args)
        print(f"dry run: `tokenmill quality train` would train on {len(pos):,} positive and {len(neg):,} negative "
              f"documents ({len(skipped):,} unusable records{_by_reason(skipped)}) -> {args.out} and "
              f"{args.out}{CARD_SUFFIX} (nothing written)")
        return 0
    with hold_file(args.out, overwrite=bool(args.overwrite), what="quality model", command="quality train",
                   ours=ours):
        return _train(args)


def _read(args: argparse.Namespace) -> tuple[list[str], list[str], list[Reject], dict]:
    """The positive and negative texts of the command line's inputs (``--limit``: the first N records of each
    file), the unusable records, and what the model card records of the inputs."""
    mode = args.text_mode or "auto"
    if args.labelled and (args.positive or args.negative):
        raise ConfigError("quality train: give --labelled, or --positive and --negative, not both")
    if args.labelled:
        if not args.label_field:
            raise ConfigError("quality train: --labelled needs --label-field (the column holding 1/0 or true/false)")
        _say(f"reading {_files(args.labelled, 'labelled')} ...")
        texts, labels, skipped = read_texts(args.labelled, text_field=args.text_field, label_field=args.label_field,
                                            text_mode=mode, limit=args.limit)
        pos = [t for t, y in zip(texts, labels) if y]
        neg = [t for t, y in zip(texts, labels) if not y]
        sources = {"labelled": args.labelled, "label_field": args.label_field}
    else:
        if not args.positive or not args.negative:
            raise ConfigError("quality train: give --positive FILE... and --negative FILE... (or --labelled)")
        _say(f"reading {_files(args.positive, 'positive')} and {_files(args.negative, 'negative')} ...")
        pos, _, s1 = read_texts(args.positive, text_field=args.text_field, text_mode=mode, limit=args.limit)
        neg, _, s2 = read_texts(args.negative, text_field=args.text_field, text_mode=mode, limit=args.limit)
        skipped = s1 + s2
        sources = {"positive": args.positive, "negative": args.negative}
    if args.limit:
        sources["limit"] = args.limit
    sources.update({"positive_documents": len(pos), "negative_documents": len(neg), "unusable_records": len(skipped),
                    "unusable_by_reason": dict(Counter(r.reason for r in skipped))})
    return pos, neg, skipped, sources


def _train(args: argparse.Namespace) -> int:
    from tokenmill.curate.quality import train_quality

    pos, neg, skipped, sources = _read(args)
    params = _params(args.param)
    quantize = params.pop("quantize", 1) not in (0, "0", "false", "False", "no")  # --param quantize=0: the full model
    report = train_quality(pos, neg, out=args.out, params=params, sources=sources, quantize=quantize, progress=_say)
    s = report.card["scores"]
    print(f"trained on {len(pos):,} positive and {len(neg):,} negative documents "
          f"({len(skipped):,} unusable records skipped{_by_reason(skipped)})")
    if skipped:
        print(f"rejects: {_write_rejects(report.model, skipped)}")
    else:
        Path(f"{report.model}{REJECTS_SUFFIX}").unlink(missing_ok=True)  # not an earlier run's
    _print_balance(s, report.card["chunk_words"])
    if "auc" in s:
        print(f"held-out: accuracy {s['accuracy']:.3f}, AUC {s['auc']:.3f}")
    else:
        print("held-out: too few examples of one class to evaluate")
    size = Path(report.model).stat().st_size / 1e6
    print(f"model: {report.model} ({size:.1f} MB{', quantised' if report.card['quantized'] else ''})\n"
          f"card: {report.model}.card.json")
    return 0
