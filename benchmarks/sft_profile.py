"""Where an SFT run's CPU time goes: each phase of ``run_sft`` timed in one process (one worker), no profiler.

    python benchmarks/sft_profile.py [--examples 4000] [--shared ../shared/data]

The corpus and tokenizer are those of ``sft_throughput.py`` (Qwen2 + the Qwen2.5 template). The functions of
each phase are wrapped with a CPU-time clock (``time.process_time``, which counts the encoders' own threads;
the load of other jobs on a shared machine moves wall time much more than CPU time); the task total minus the
phases is reading, the loop and accounting.
Run it with another checkout's ``src`` on ``PYTHONPATH`` to compare versions (a phase a version does not have
is left out). Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
SECONDS: dict[str, float] = defaultdict(float)


def timed(owner, attr: str, label: str) -> None:
    """Wrap ``owner.attr`` so its CPU time adds to ``SECONDS[label]`` (outermost call only)."""
    fn = getattr(owner, attr, None)
    if fn is None:
        return
    depth = [0]

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        depth[0] += 1
        started = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            depth[0] -= 1
            if not depth[0]:
                SECONDS[label] += time.process_time() - started

    setattr(owner, attr, wrapper)


LABELS = ("start: import tokenmill", "start: route inputs, load tokenizer (main)",
          "start: check transformers is there (main)", "start: build the apply_chat_template oracle (worker)",
          "normalise + validate", "render: hf messages, sentinels, Jinja, spans", "  of which the Jinja render",
          "tokenize (with offsets; encoder built on first call)", "mask, weights, stats",
          "parity checks (apply_chat_template)", "write shards (add)", "write shards (close)", "per-example report",
          "worker task, total")


def instrument() -> None:
    import tokenmill.sft.masks as masks
    import tokenmill.sft.render as render
    import tokenmill.sft.run as run
    import tokenmill.track as track
    from tokenmill.shards import writer
    from tokenmill.tokenize.tokenizer import Tokenizer

    for label in LABELS:
        SECONDS[label] = 0.0  # the table's order
    timed(track, "prepare_run", "start: route inputs, load tokenizer (main)")
    run.prepare_run = track.prepare_run
    timed(run, "_check_oracle", "start: check transformers is there (main)")
    timed(run, "_oracle", "start: build the apply_chat_template oracle (worker)")
    timed(run, "normalize_rows", "normalise + validate")
    timed(render, "prepare_conversation", "render: hf messages, sentinels, Jinja, spans")
    timed(masks, "render_template", "  of which the Jinja render")
    timed(render, "render_template", "  of which the Jinja render")
    timed(Tokenizer, "encode_rendered_batch", "tokenize (with offsets; encoder built on first call)")
    timed(render, "finish_conversation", "mask, weights, stats")
    import tokenmill.sft.parity as parity

    timed(parity, "check_parity", "parity checks (apply_chat_template)")  # the reference's build is apart
    timed(writer.ShardWriter, "add_many", "write shards (add)")
    timed(writer.ShardWriter, "close", "write shards (close)")
    timed(run, "merge", "per-example report")
    timed(run.SftTask, "__call__", "worker task, total")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shared", default=str(HERE.parent.parent / "shared" / "data"))
    ap.add_argument("--examples", type=int, default=4000)
    ap.add_argument("--cold", action="store_true", help="empty the cached SFT parity verdicts first")
    args = ap.parse_args()
    sys.path.insert(0, str(HERE))
    import sft_throughput as bench

    shared, work = Path(args.shared).resolve(), HERE / "_work"
    tok = bench.tokenizer_dir(shared, work)
    corpus, _ = bench.build_corpus(shared, work, examples=args.examples, seed=0)
    if args.cold:
        cache = os.environ.get("TOKENMILL_CACHE") or Path.home() / ".cache" / "tokenmill"  # tokenmill not imported yet
        shutil.rmtree(Path(cache) / "parity-sft", ignore_errors=True)
    started = time.process_time()
    from tokenmill.sft import run

    imported = time.process_time() - started
    instrument()
    SECONDS["start: import tokenmill"] = imported
    with tempfile.TemporaryDirectory() as out:
        manifest = run.run_sft(bench.corpus_inputs(corpus), out=out, tokenizer=str(tok), workers=1,
                               chat_template=str(shared / "chat_templates" / bench.TEMPLATE), progress=False)
    SECONDS["whole run (CPU of this process)"] = time.process_time() - started
    print(f"{manifest['counts']['kept']:,} examples, {manifest['counts']['tokens']:,} tokens, "
          f"{manifest['report']['parity']['checked']} parity checks, "
          f"{manifest['report']['parity'].get('skipped_cached', 0)} skipped (verdicts cached)\n")
    print("| phase | CPU s |\n|---|---:|")
    for label, seconds in SECONDS.items():
        print(f"| {label} | {seconds:.2f} |")


if __name__ == "__main__":
    main()
