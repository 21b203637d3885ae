"""Start-up of a 0.1 MB pretraining run against its floor: what any pipeline with the same encoder pays.

    python benchmarks/startup_floor.py [--runs 5] [--no-write]

A 0.1 MB run is all start-up: the tokens of 0.1 MB take milliseconds to encode. What no pipeline that encodes
with gigatoken can skip is the interpreter, the encoder's build from its ``tokenizer.json`` (gigatoken keeps
no serialised state to load instead, and builds with the GIL held), reading the texts and writing the ids.
Each of these runs as a fresh process, in turn, ``--runs`` times; the fastest wall time of each (launch to
exit) is reported:

- ``python -c pass``: the interpreter alone;
- encoder: ``import gigatoken`` and the build of the fast encoder from tokenmill's cached copy of its
  ``tokenizer.json`` (the same bytes every tokenmill process builds from);
- floor: the encoder, then the corpus read with ``pyarrow.parquet.ParquetFile``, every text encoded, the ids written
  with numpy: the least a tokenizing pipeline can do, with no routing, checks, ledger or manifest;
- ``tokenmill pretrain`` on the same corpus and tokenizer (parity verdict cached, one unit: no pool), the
  figure of "Pretraining track: start-up of a small run".

The corpus and the Qwen2 tokenizer are those of ``pretrain_throughput.py``. Rewrites the "Start-up: the floor of
a 0.1 MB run" section of BENCHMARKS.md unless ``--no-write``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from common import REPO, compile_sources, machine, update_section
from pretrain_throughput import build_corpus, tokenizer_dir

HEADING = "Start-up: the floor of a 0.1 MB run"

ENCODER = textwrap.dedent("""
    import sys
    from gigatoken.gigatoken_rs import load_hf_json
    load_hf_json(open(sys.argv[1], "rb").read())
""")

FLOOR = textwrap.dedent("""
    import sys
    from gigatoken.gigatoken_rs import load_hf_json
    encoder = load_hf_json(open(sys.argv[1], "rb").read())
    import glob
    import numpy as np
    import pyarrow.parquet as pq
    texts = [t for f in sorted(glob.glob(sys.argv[2] + "/*.parquet"))
             for t in pq.ParquetFile(f).read(columns=["text"]).column("text").to_pylist()]
    parts = [encoder.encode(t) for t in texts]
    np.save(sys.argv[3], np.concatenate(parts).astype(np.uint32))
""")


def encoder_json(tok: Path) -> Path:
    """The cached ``tokenizer.json`` tokenmill builds its fast encoder from (written by a tokenmill run)."""
    from tokenmill.tokenize.backends import FAST_JSON_VERSION, source_key
    from tokenmill.tokenize.sources import cache_dir, resolve

    return cache_dir() / "encoders" / f"{FAST_JSON_VERSION}-{source_key(resolve(str(tok)))}.json"


def wall(cmd: list[str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seconds = time.perf_counter() - started
    if done.returncode:
        raise SystemExit(f"{' '.join(cmd[:3])} ... failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return seconds


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shared", default=str(REPO.parent / "shared" / "data"))
    p.add_argument("--work", default=str(Path(__file__).resolve().parent / "_work"))
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--no-write", action="store_true")
    args = p.parse_args(argv)
    compile_sources()
    shared, work = Path(args.shared).resolve(), Path(args.work).resolve()
    tok = tokenizer_dir(shared, work)
    corpus = build_corpus(shared, work, mb=0.1, seed=0)
    out = tempfile.mkdtemp(prefix="startup-floor-")
    tokenmill = [str(Path(sys.executable).with_name("tokenmill")), "pretrain", corpus["dir"] + "/*.parquet", "--out",
                 os.path.join(out, "tm"), "--tokenizer", str(tok), "--workers", "2", "--no-progress", "--overwrite"]
    wall(tokenmill)  # fills the caches: the converted tokenizer.json, the encoder's copy, the parity verdict
    source = encoder_json(tok)
    if not source.is_file():
        raise SystemExit(f"{source}: not written by the tokenmill run; is TOKENMILL_CACHE the same here?")
    cmds = {
        "`python -c pass` (the interpreter)": [sys.executable, "-c", "pass"],
        "encoder: `import gigatoken` + build from the cached tokenizer.json": [sys.executable, "-c", ENCODER,
                                                                              str(source)],
        "floor: encoder + read the Parquet texts + encode + write the ids": [
            sys.executable, "-c", FLOOR, str(source), corpus["dir"], os.path.join(out, "ids.npy")],
        "`tokenmill pretrain` (parity verdict cached, one unit)": tokenmill,
    }
    load_before = os.getloadavg()[0]
    best = {name: float("inf") for name in cmds}
    for _ in range(args.runs):  # in turn, so a change of the machine's load falls on all of them
        for name, cmd in cmds.items():
            best[name] = min(best[name], wall(cmd))
    floor = best["floor: encoder + read the Parquet texts + encode + write the ids"]
    rows = ["| process | wall s (best) | / floor |", "|---|---:|---:|"]
    rows += [f"| {name} | {seconds:.2f} | {seconds / floor:.2f}x |" for name, seconds in best.items()]
    section = "\n".join([
        f"Machine: {machine()}; 1-minute load average {load_before:.1f} when the run began, "
        f"{os.getloadavg()[0]:.1f} when it ended. Corpus: {corpus['mb']:.2f} MB of Parquet ({corpus['docs']:,} "
        f"documents), the Qwen2 tokenizer (151,643 tokens + specials). Fastest wall time of {args.runs} runs of "
        "each, launch to exit, the processes taking turns.",
        "", "\n".join(rows), "",
        "Reproduce: `python benchmarks/startup_floor.py " + " ".join(argv) + "`",
    ])
    print(section)
    if not args.no_write:
        update_section(HEADING, section)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
