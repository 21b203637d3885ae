"""The SFT track's floor against TRL: what rendering and encoding alone cost, beside tokenmill and TRL in one run.

    python benchmarks/sft_floor.py [--examples 10000] [--repeat 2] [--workers 2] [--no-write]

Every pipeline that trains on a model's own chat template renders each conversation with that template
(Jinja) and encodes the text; nothing else is inherent to the job. This measures those two steps alone, on
the corpus, tokenizer and template of ``sft_throughput.py``, with nothing around them:

- build: the fast encoder (gigatoken) built once, the way tokenmill builds it (from its cached copy of the
  ``tokenizer.json``), the cheapest build there is;
- render: every conversation rendered with the template compiled by ``transformers`` (the environment
  ``apply_chat_template`` uses), messages already in its form, no generation prompt;
- encode: every rendered text encoded by the fast encoder, one text per call as a worker would, without
  char offsets (which a loss mask needs, so this is below what any masking pipeline pays).

The floor's CPU seconds are build + render + encode; its wall seconds with W workers are build + (render +
encode) / W (a perfect split, no start-up, no reading, no writing). In the same run, each in a fresh process
and in turn: tokenmill's whole ``run_sft`` (verdicts cached) and TRL's ``_prepare_dataset``, as
``sft_throughput.py`` times them. TRL / floor is the largest ratio any such pipeline could show here.
Rewrites the "SFT track: the floor of render and encode" section of BENCHMARKS.md unless ``--no-write``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from common import compile_sources, machine, update_section

HERE = Path(__file__).resolve().parent
HEADING = "SFT track: the floor of render and encode"


def child_floor(corpus: Path, tok: Path, template: Path) -> dict:
    """CPU seconds of the encoder's build, the Jinja renders and the encodes, each alone, in this process."""
    from transformers.utils.chat_template_utils import _compile_jinja_template

    from sft_throughput import normalized_messages
    from tokenmill.sft.template import load_template, special_token_kwargs
    from tokenmill.tokenize import load_tokenizer

    rows = normalized_messages(corpus, tok, template)
    tokenizer = load_tokenizer(str(tok))
    compiled = _compile_jinja_template(load_template(str(template)).source)
    specials = special_token_kwargs(tokenizer)
    calls = [{"messages": r["messages"], "tools": json.loads(r["tools"]) if r["tools"] else None} for r in rows]

    started = time.process_time()
    fast = tokenizer._fast_encoder
    build = time.process_time() - started

    started = time.process_time()
    texts = [compiled.render(**specials, **call, documents=None, add_generation_prompt=False) for call in calls]
    render = time.process_time() - started

    started = time.process_time()
    tokens = sum(len(fast.encode(text)) for text in texts)
    encode = time.process_time() - started
    return {"examples": len(texts), "tokens": tokens, "chars": sum(map(len, texts)),
            "build_s": build, "render_s": render, "encode_s": encode}


def run_child(args: list[str]) -> dict:
    done = subprocess.run([sys.executable, str(Path(__file__)), *args], capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"floor child failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def table(results: dict, workers: int) -> tuple[list[str], dict]:
    floor, tm, trl = results["floor"], results["tokenmill"], results["trl"]
    floor_cpu = floor["build_s"] + floor["render_s"] + floor["encode_s"]
    floor_wall = floor["build_s"] + (floor["render_s"] + floor["encode_s"]) / workers
    rows = [
        "| pipeline | examples | seconds (best) | CPU s | TRL / this, wall | TRL / this, per CPU s |",
        "|---|---:|---:|---:|---:|---:|",
        f"| TRL `SFTTrainer._prepare_dataset` (`num_proc={workers}`) | {trl['examples']:,} | {trl['seconds']:.2f} "
        f"| {trl['cpu_s']:.2f} | 1.00x | 1.00x |",
        f"| tokenmill `run_sft`, {workers} workers, verdicts cached | {tm['examples']:,} | {tm['seconds']:.2f} "
        f"| {tm['cpu_s']:.2f} | {trl['seconds'] / tm['seconds']:.2f}x | {trl['cpu_s'] / tm['cpu_s']:.2f}x |",
        f"| floor: build + (render + encode) / {workers} | {floor['examples']:,} | {floor_wall:.2f} | {floor_cpu:.2f} "
        f"| {trl['seconds'] / floor_wall:.2f}x | {trl['cpu_s'] / floor_cpu:.2f}x |",
    ]
    parts = [
        "| floor part | CPU s |", "|---|---:|",
        f"| build the fast encoder (once) | {floor['build_s']:.2f} |",
        f"| render {floor['examples']:,} conversations with the model's template (Jinja) | {floor['render_s']:.2f} |",
        f"| encode the {floor['chars'] / 1e6:.1f} M rendered chars ({floor['tokens']:,} tokens), no offsets "
        f"| {floor['encode_s']:.2f} |",
    ]
    return rows + [""] + parts, {"floor_wall": floor_wall, "floor_cpu": floor_cpu}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shared", default=str(HERE.parent.parent / "shared" / "data"))
    ap.add_argument("--examples", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=2, help="runs of each, taking turns; the fastest is reported")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--corpus")
    ap.add_argument("--tokenizer")
    ap.add_argument("--template")
    args = ap.parse_args()
    sys.path.insert(0, str(HERE))
    import sft_throughput as bench

    if args.child:
        print(json.dumps(child_floor(Path(args.corpus), Path(args.tokenizer), Path(args.template))))
        return
    compile_sources()
    shared, work = Path(args.shared).resolve(), HERE / "_work"
    tok = bench.tokenizer_dir(shared, work)
    template = shared / "chat_templates" / bench.TEMPLATE
    corpus, _ = bench.build_corpus(shared, work, examples=args.examples, seed=args.seed)
    run_dir = work / "sft-run"
    run_dir.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()[0]
    results: dict = {}
    bench.measure("tokenmill", corpus, tok, template, run_dir, args.workers, 1)  # fills the verdict cache
    for _ in range(args.repeat):  # the pipelines take turns, so a change of the machine's load falls on all
        for key in ("tokenmill", "trl"):
            bench.keep_best(results, key, bench.measure(key, corpus, tok, template, run_dir, args.workers, 1))
        floor = run_child(["--child", "--corpus", str(corpus), "--tokenizer", str(tok), "--template", str(template)])
        total = floor["build_s"] + floor["render_s"] + floor["encode_s"]
        if "floor" not in results or total < sum(results["floor"][k] for k in ("build_s", "render_s", "encode_s")):
            results["floor"] = floor
    rows, figures = table(results, args.workers)
    body = "\n".join([
        f"Machine: {machine()}; 1-minute load average {load_before:.1f} when the run began, "
        f"{os.getloadavg()[0]:.1f} when it ended. Best of {args.repeat} runs of each, the pipelines taking turns; "
        "tokenmill and TRL timed as in \"SFT track vs TRL\" (tokenmill from the call of `run_sft` to its manifest, "
        "its imports not counted; TRL's `_prepare_dataset` alone). The floor is what rendering with the model's "
        "template and encoding cost with nothing around them (no reading, normalising, masking, offsets, packing "
        "or writing), its wall time a perfect split over the workers.",
        "", *rows, "",
        f"TRL / floor: {results['trl']['seconds'] / figures['floor_wall']:.2f}x wall, "
        f"{results['trl']['cpu_s'] / figures['floor_cpu']:.2f}x per CPU second: no pipeline that renders each "
        "conversation with the template and encodes it can beat TRL by more here.",
        "", f"Reproduce: `python benchmarks/sft_floor.py {' '.join(sys.argv[1:])}`",
    ])
    print(body)
    if not args.no_write:
        update_section(HEADING, body)


if __name__ == "__main__":
    main()
