"""Storage formats for document corpora, measured by ``tokenmill bench formats``; writes its BENCHMARKS.md section.

    python benchmarks/storage_formats.py [--mb 100] [--shared ../shared/data] [--generated]

Runs ``tokenmill.bench.formats.bench_formats`` on the documents of ``SHARED/pretrain`` resampled to
``--mb`` MB (and, with ``--generated``, also on the generated pseudo-text corpus, which has no repeated
documents), prints the tables and rewrites the "Storage formats" section.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from common import REPO, update_section
from tokenmill.bench.formats import __doc__ as METHOD
from tokenmill.bench.formats import bench_formats

HEADING = "Storage formats"
CAVEAT = (
    "The real corpus is resampled with replacement from about 5.6 MB of unique text, so a document often "
    "reappears within a compressor's window: compressed sizes on it are optimistic. The generated corpus "
    "has no repeats."
)


def method() -> str:
    """The measurement notes of ``tokenmill.bench.formats``, as one paragraph."""
    paragraphs = METHOD.strip().split("\n\n")[1:]
    return "\n\n".join(" ".join(p.split()) for p in paragraphs)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shared", default=str(REPO.parent / "shared" / "data"))
    p.add_argument("--mb", type=float, default=100.0)
    p.add_argument("--generated", action="store_true", help="also measure the generated corpus")
    p.add_argument("--workdir", help="where the files are written (default: a temporary directory)")
    p.add_argument("--no-write", action="store_true", help="do not rewrite BENCHMARKS.md")
    args = p.parse_args(argv)
    pretrain = str(Path(args.shared) / "pretrain")
    parts = ["Real documents:", "", bench_formats([pretrain], mb=args.mb, workdir=args.workdir)]
    if args.generated:
        parts += ["", "Generated pseudo-text:", "", bench_formats([], mb=args.mb, workdir=args.workdir)]
    command = f"tokenmill bench formats {args.shared.rstrip('/')}/pretrain --mb {args.mb:g}"
    body = "\n".join(parts + [
        "", method(), "", CAVEAT, "",
        "Reproduce (from the repository root): `python benchmarks/storage_formats.py " + " ".join(argv)
        + f"`, or one table with `{command}`.",
    ])
    print(body)
    if not args.no_write:
        update_section(HEADING, body)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
