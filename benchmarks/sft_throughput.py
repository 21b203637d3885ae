"""SFT track: tokenmill against TRL's own dataset preparation, on the same conversations, in one run.

    python benchmarks/sft_throughput.py [--examples 40000] [--shared ../shared/data] [--no-write]

1. Corpus: every SFT file of ``SHARED/sft`` except the DPO preference file, each resampled with
   replacement (seeded) in proportion to its size until ``--examples`` records, written in its own format
   (JSON array or JSONL) as files of at most 2,500 records under ``benchmarks/_work/`` (reused).
2. Tokenizer: Qwen2 (``vocab.json`` + ``merges.txt``) with the Qwen2.5 ``tokenizer_config.json``
   (its chat template) in one directory that both tools load.
3. tokenmill, in a fresh process: ``run_sft`` (routing, normalising, rendering, masking, shards), 2 workers,
   default verification against ``apply_chat_template``. Timed from the call to the written manifest.
4. TRL, in a fresh process: the same records normalised by tokenmill into ``messages``/``tools`` (not
   timed), held in a ``datasets.Dataset``; an ``SFTTrainer`` is built on a tiny model with
   ``assistant_only_loss=True``, ``packing=True``, ``packing_strategy="bfd"``, ``max_length=2048``,
   ``dataset_num_proc=2``, then its own ``_prepare_dataset`` is timed on the whole set: chat template
   (TRL's training template with generation markers), tokenization with assistant masks, labels, BFD packing.
5. Packing: tokenmill's ``best_fit_decreasing`` against TRL's ``pack_dataset(strategy="bfd")`` on the
   lengths tokenmill wrote, at 2048 and 4096 (over-long examples left out of both).

Prints the table and ratios, and rewrites the "SFT track vs TRL" section of BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import Self

import numpy as np
import psutil

from common import compile_sources, machine, run_measured, update_section

HERE = Path(__file__).resolve().parent
HEADING = "SFT track vs TRL"
CHUNK = 2500
TEMPLATE = "ortx_qwen2.5_tokenizer_config.json"


def tokenizer_dir(shared: Path, work: Path) -> Path:
    """Qwen2 vocab + merges + the Qwen2.5 tokenizer_config.json (chat template) in one directory."""
    out = work / "qwen2.5_sft_tokenizer"
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(shared / "tokenizers" / "qwen2_vocab.json", out / "vocab.json")
    shutil.copyfile(shared / "tokenizers" / "qwen2_merges.txt", out / "merges.txt")
    shutil.copyfile(shared / "chat_templates" / TEMPLATE, out / "tokenizer_config.json")
    return out


def sft_files(shared: Path) -> list[Path]:
    return sorted(p for p in (shared / "sft").iterdir() if p.suffix in (".json", ".jsonl") and "dpo" not in p.name)


def _read_records(path: Path) -> list:
    if path.suffix == ".json":
        return json.loads(path.read_text())
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _write_records(path: Path, records: list) -> None:
    if path.suffix == ".json":
        path.write_text(json.dumps(records, ensure_ascii=False))
    else:
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))


def build_corpus(shared: Path, work: Path, *, examples: int, seed: int) -> tuple[Path, dict]:
    """Resampled copies of the SFT files in ``work/sft-corpus-<n>-seed<s>``; (directory, description)."""
    out = work / f"sft-corpus-{examples}-seed{seed}"
    meta_path = out / "corpus.json"
    if meta_path.exists():
        return out, json.loads(meta_path.read_text())
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    sources = {p: _read_records(p) for p in sft_files(shared)}
    total = sum(len(r) for r in sources.values())
    rng = np.random.default_rng(seed)
    per_file = {}
    for path, records in sources.items():
        n = max(1, round(len(records) * examples / total))
        drawn = [records[i] for i in rng.integers(0, len(records), n)]
        for k in range(0, n, CHUNK):
            _write_records(out / f"{path.stem}-{k // CHUNK:03d}{path.suffix}", drawn[k:k + CHUNK])
        per_file[path.name] = {"unique": len(records), "drawn": n}
    meta = {"records": sum(v["drawn"] for v in per_file.values()), "unique": total, "files": per_file,
            "bytes": sum(p.stat().st_size for p in out.iterdir()), "seed": seed}
    meta_path.write_text(json.dumps(meta, indent=1))
    return out, meta


def corpus_inputs(corpus: Path) -> list[str]:
    return sorted(str(p) for p in corpus.iterdir() if p.name != "corpus.json")


class TreeCpu:
    """CPU seconds used by this process and all its descendants (pool workers, forkservers) while active.

    A thread polls the process tree every ``poll_s``; a process's CPU is its last reading minus its
    reading when the block began (0 for processes started inside), so up to ``poll_s`` per process is missed.
    """

    def __init__(self, poll_s: float = 0.05):
        self.poll_s, self.first, self.last, self._stop = poll_s, {}, {}, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        me = psutil.Process()
        for p in [me, *me.children(recursive=True)]:
            try:
                t, key = p.cpu_times(), (p.pid, p.create_time())
            except psutil.NoSuchProcess:
                continue
            self.first.setdefault(key, t.user + t.system if not self._thread.is_alive() else 0.0)
            self.last[key] = t.user + t.system

    def _run(self) -> None:
        while not self._stop.wait(self.poll_s):
            self._sample()

    def __enter__(self) -> Self:
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()

    @property
    def seconds(self) -> float:
        return sum(self.last[k] - self.first[k] for k in self.last)


def child_tokenmill(corpus: Path, tok: Path, template: Path, out: Path, workers: int) -> dict:
    """Time ``run_sft`` end to end; also save the example lengths it wrote."""
    from tokenmill import open_shards
    from tokenmill.sft.run import run_sft

    start = time.perf_counter()
    with TreeCpu() as cpu:
        manifest = run_sft(corpus_inputs(corpus), out=out, tokenizer=str(tok), chat_template=str(template),
                           workers=workers, overwrite=True, progress=False)
    seconds = time.perf_counter() - start
    shard_set = open_shards(out)
    lengths = np.asarray(shard_set.lengths, dtype=np.int64)
    np.save(out / "lengths.npy", lengths)
    cut = [shard_set.doc_mask(i)[:2048].sum() for i in range(len(shard_set))]
    return {"seconds": seconds, "cpu_s": cpu.seconds, "examples": int(lengths.size), "tokens": int(lengths.sum()),
            "parity_checked": manifest["report"].get("parity", {}).get("checked", 0),
            "supervised_at_2048": int(sum(cut))}


def normalized_messages(corpus: Path, tok: Path, template: Path) -> list[dict]:
    """tokenmill's normaliser output as ``{"messages", "tools"}`` rows in ``apply_chat_template`` form."""
    from tokenmill.io import read_unit
    from tokenmill.job.inputs import plan_inputs
    from tokenmill.sft.normalize import normalize_rows
    from tokenmill.sft.render import hf_messages, shape_of
    from tokenmill.sft.template import load_template
    from tokenmill.tokenize import load_tokenizer

    planned = plan_inputs("sft", corpus_inputs(corpus), unit_bytes=64 << 20)
    shape = shape_of(load_template(str(template)), load_tokenizer(str(tok)))
    rows = []
    for unit in planned.units:
        for raw in read_unit(unit, batch_rows=1024):
            convs, _ = normalize_rows(raw.to_rows(), raw.locs, source=raw.source, schema=planned.schemas[unit.file.rel])
            for conv in convs:
                messages, tools, _ = hf_messages(conv, renders_reasoning=shape.renders_reasoning)
                rows.append({"messages": messages, "tools": json.dumps(tools) if tools else None})
    return rows


def trl_trainer(tok: Path, rows: list[dict], work: Path, *, seq_len: int, num_proc: int):
    """An ``SFTTrainer`` on a tiny Llama, set up as for assistant-only, BFD-packed conversational SFT."""
    from datasets import Dataset, Features, Json, List, Value
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM
    from trl import SFTConfig, SFTTrainer

    features = Features({"messages": List(Json()), "tools": Value("string")})
    tokenizer = AutoTokenizer.from_pretrained(str(tok))
    model = LlamaForCausalLM(LlamaConfig(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32,
                                         num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2))
    args = SFTConfig(output_dir=str(work / "trl_out"), max_length=seq_len, packing=True, packing_strategy="bfd",
                     assistant_only_loss=True, dataset_num_proc=num_proc, report_to=[], bf16=False)
    dataset = Dataset.from_list(rows, features=features)
    trainer = SFTTrainer(model=model, args=args, train_dataset=dataset.select(range(16)), processing_class=tokenizer)
    return trainer, dataset


def child_trl(corpus: Path, tok: Path, template: Path, work: Path, num_proc: int) -> dict:
    """Time TRL's ``_prepare_dataset`` (template, tokenize with assistant masks, labels, BFD pack)."""
    import datasets

    datasets.disable_caching()
    rows = normalized_messages(corpus, tok, template)
    trainer, dataset = trl_trainer(tok, rows, work, seq_len=2048, num_proc=num_proc)
    start = time.perf_counter()
    with TreeCpu() as cpu:
        packed = trainer._prepare_dataset(dataset, trainer.processing_class, trainer.args, packing=True,
                                          formatting_func=None, dataset_name="train")
    seconds = time.perf_counter() - start
    tokens = int(sum(sum(s) for s in packed["seq_lengths"]))
    supervised = int(sum(np.count_nonzero(np.asarray(x) != -100) for x in packed["labels"]))
    return {"seconds": seconds, "cpu_s": cpu.seconds, "examples": len(dataset), "tokens": tokens, "packs": len(packed),
            "supervised_at_2048": supervised,
            "template": "TRL training template" if trainer.chat_template else "tokenizer's own"}


def trl_bfd_efficiency(lengths: np.ndarray, seq_len: int, *, batch_size: int | None) -> tuple[int, float]:
    """(packs, efficiency) of TRL's ``pack_dataset(strategy="bfd")`` on examples of these lengths."""
    import datasets
    from datasets import Dataset
    from trl.data_utils import pack_dataset

    datasets.disable_caching()
    ids = [np.zeros(n, np.int32) for n in lengths.tolist()]
    dataset = Dataset.from_dict({"input_ids": ids})
    packed = pack_dataset(dataset, seq_len, strategy="bfd", map_kwargs={"batch_size": batch_size})
    tokens = int(sum(sum(s) for s in packed["seq_lengths"]))
    return len(packed), tokens / (len(packed) * seq_len)


def packing_rows(lengths: np.ndarray) -> list[dict]:
    """tokenmill BFD vs TRL bfd (as SFTTrainer runs it: map batches of 1,000; and in one batch)."""
    from tokenmill.pack import best_fit_decreasing

    rows = []
    for seq_len in (2048, 4096):
        fit = lengths[(lengths > 0) & (lengths <= seq_len)]
        plan = best_fit_decreasing(fit, seq_len)
        trl_1000 = trl_bfd_efficiency(fit, seq_len, batch_size=1000)
        trl_all = trl_bfd_efficiency(fit, seq_len, batch_size=None)
        rows.append({"seq_len": seq_len, "examples": int(fit.size), "left_out": int(lengths.size - fit.size),
                     "tokenmill": (plan.n_packs, float(plan.efficiency)), "trl_1000": trl_1000, "trl_all": trl_all})
    return rows


def _child(args: argparse.Namespace) -> None:
    corpus, tok, template, work = Path(args.corpus), Path(args.tokenizer), Path(args.template), Path(args.work)
    if args.child == "tokenmill":
        result = child_tokenmill(corpus, tok, template, work / "tokenmill_out", args.workers)
    else:
        result = child_trl(corpus, tok, template, work, args.workers)
    print(json.dumps(result))


def measure(name: str, corpus: Path, tok: Path, template: Path, work: Path, workers: int, repeat: int,
            env: dict | None = None) -> dict:
    """Best (shortest timed part) of ``repeat`` fresh-process runs; CPU seconds are those of that run's tree."""
    cmd = [sys.executable, str(Path(__file__)), "--child", name, "--corpus", str(corpus), "--tokenizer", str(tok),
           "--template", str(template), "--work", str(work), "--workers", str(workers)]
    best = None
    for _ in range(repeat):
        res = run_measured(cmd, env=env)
        if res["rc"] != 0:
            raise SystemExit(f"{name} failed:\n{res['stderr'][-4000:]}")
        out = json.loads(res["stdout"].strip().splitlines()[-1])
        out["peak_rss_mb"] = res["peak_rss_mb"]
        out["load"] = os.getloadavg()[0]
        out["all_seconds"] = [*(best or {}).get("all_seconds", []), out["seconds"]]
        if best is None or out["seconds"] < best["seconds"]:
            best = out
        else:
            best["all_seconds"] = out["all_seconds"]
    return best


def verdict_cache() -> Path:
    """Where tokenmill caches its SFT parity verdicts (emptied before each run that must check)."""
    from tokenmill.tokenize.sources import cache_dir

    return cache_dir() / "parity-sft"


def keep_best(results: dict, key: str, run: dict) -> None:
    """Keep the faster run under ``key``, listing every run's seconds."""
    runs = [*results.get(key, {}).get("all_seconds", []), run["seconds"]]
    if key not in results or run["seconds"] < results[key]["seconds"]:
        results[key] = run
    results[key]["all_seconds"] = runs


def render(meta: dict, results: dict, packing: list[dict], lengths: np.ndarray, args: argparse.Namespace) -> str:
    """The BENCHMARKS.md section: corpus, throughput table, ratios, packing table, command."""
    trl = results["trl"]
    mine = [k for k in results if k != "trl"]
    tm = results[mine[0]]
    lines = [
        (f"Corpus: {meta['records']:,} records ({meta['bytes'] / 1e6:.1f} MB) resampled with replacement (seed "
        f"{meta['seed']}) from the {meta['unique']:,} records of the {len(meta['files'])} SFT files in "
        "/work/shared/data/sft (every schema; the DPO file left out). Tokenizer Qwen2, chat template Qwen2.5. "
        f"Machine: {machine()}; 1-min load average {args.load:.2f} when the run began."), "",
        ("| pipeline | examples | tokens | seconds (best) | all runs s | examples/s | tokens/s | CPU s | "
        "examples per CPU s | peak RSS MB | 1-min load |"),
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    base = f"tokenmill `run_sft` (raw files -> masked shards, {args.workers} workers, verify 16/unit)"
    labels = {k: base + k[len("tokenmill"):].replace("@", " at ") for k in mine}
    labels["trl"] = f"TRL `SFTTrainer._prepare_dataset` (messages -> packed, `num_proc={args.workers}`)"
    for name, r in results.items():
        runs = ", ".join(f"{x:.1f}" for x in r["all_seconds"])
        lines.append(f"| {labels[name]} | {r['examples']:,} | {r['tokens']:,} | {r['seconds']:.1f} | {runs} | "
                     f"{r['examples'] / r['seconds']:,.0f} | {r['tokens'] / r['seconds']:,.0f} | {r['cpu_s']:.1f} | "
                     f"{r['examples'] / r['cpu_s']:,.0f} | {r['peak_rss_mb']:.0f} | {r.get('load', 0):.1f} |")
    at_2048 = int(np.minimum(lengths, 2048).sum())
    summary = []
    for key in mine:
        r = results[key]
        ex_ratio = (r["examples"] / r["seconds"]) / (trl["examples"] / trl["seconds"])
        tok_ratio = (r["tokens"] / r["seconds"]) / (trl["tokens"] / trl["seconds"])
        cpu_ratio = (r["examples"] / r["cpu_s"]) / (trl["examples"] / trl["cpu_s"])
        summary.append(f"- {labels[key]} / TRL: {ex_ratio:.2f}x examples/s, {tok_ratio:.2f}x tokens/s (wall clock; "
                       f"target >= 5x); {cpu_ratio:.2f}x examples per CPU second.")
    summary = "\n".join(summary)
    same = (f"Same output: tokenmill's examples cut at 2,048 hold {at_2048:,} tokens, TRL packed {trl['tokens']:,}; "
            "trained tokens (loss mask / labels != -100, first 2,048 of each example): tokenmill "
            f"{tm['supervised_at_2048']:,}, TRL {trl['supervised_at_2048']:,}. tokenmill checked "
            f"{tm['parity_checked']} examples against `apply_chat_template` during the run.")
    lines += ["", summary, "", same, "",
              ("| seq_len | examples packed | tokenmill BFD packs | efficiency | TRL bfd (SFTTrainer: batches of "
               "1,000) | efficiency | TRL bfd (one batch) | efficiency |"),
              "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for p in packing:
        cells = " | ".join(f"{p[k][0]:,} | {100 * p[k][1]:.2f}%" for k in ("tokenmill", "trl_1000", "trl_all"))
        lines.append(f"| {p['seq_len']} | {p['examples']:,} ({p['left_out']} longer left out) | {cells} |")
    lines += ["", NOTES.strip(), "",
              ("Reproduce (from the repository root): "
               f"`python benchmarks/sft_throughput.py --examples {args.examples} --repeat {args.repeat}`.")]
    return "\n".join(lines)


NOTES = """
What is timed. tokenmill: the whole `run_sft` call in a fresh process (`tokenmill sft INPUT... --workers 2`
does the same): reading and routing the raw files, normalising every schema, one render and one
tokenization per example with its loss mask (the text between control tokens of a whole batch through the
fast encoder in one call, offsets from token byte lengths), parity checks against `apply_chat_template` (16
examples per work unit, plus one per shape), writing the shards, the manifest and the rejects, and the
tokenizer load. Where the CPU time goes: the section "SFT track: where the time goes" (`sft_profile.py`). TRL: only
`SFTTrainer._prepare_dataset` on a `datasets.Dataset` already holding the conversations (normalised by
tokenmill, not timed; tokenizer, model and trainer built before the clock starts): TRL's training
chat template (generation markers for `assistant_only_loss`), tokenization with assistant masks, labels,
BFD packing at 2,048 (over-long examples truncated, which is why its token count is lower). TRL's training
template puts the newline after `<|im_start|>assistant` and the one after `<|im_end|>` inside the
generation block, so it trains two more tokens per assistant turn than tokenmill (content and `<|im_end|>`).
Each pipeline runs `--repeat` times in fresh processes; the fastest run is reported, all are listed.
"CPU s" is the CPU time of the timed part summed over the process and all its workers (polled every 50 ms).
Packing: both packers get the same example lengths (those tokenmill wrote); examples longer than
`seq_len` are left out of both (tokenmill drops them, TRL would truncate them). TRL's `pack_dataset` runs
through `Dataset.map(batched=True)`, whose default batch is 1,000 examples, so inside `SFTTrainer` it packs
each 1,000 separately; the "one batch" column packs them all at once.
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shared", default=str(HERE.parent.parent / "shared" / "data"))
    ap.add_argument("--examples", type=int, default=40000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3, help="fresh-process runs of each; the fastest is reported")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--child", choices=("tokenmill", "trl"))
    ap.add_argument("--corpus")
    ap.add_argument("--tokenizer")
    ap.add_argument("--template")
    ap.add_argument("--work")
    ap.add_argument("--src", action="append", default=[],
                    help="LABEL=PATH of a tokenmill src directory to run (repeatable; default: the one imported)")
    args = ap.parse_args()
    args.load = os.getloadavg()[0]
    if args.child:
        _child(args)
        return
    compile_sources(*(s.split("=", 1)[1] for s in args.src))
    shared, work = Path(args.shared).resolve(), HERE / "_work"
    tok = tokenizer_dir(shared, work)
    template = shared / "chat_templates" / TEMPLATE
    corpus, meta = build_corpus(shared, work, examples=args.examples, seed=args.seed)
    run_dir = work / "sft-run"
    run_dir.mkdir(parents=True, exist_ok=True)
    results = {}
    for _ in range(args.repeat):  # the pipelines take turns, so a change of the machine's load falls on all
        for label, path in [s.split("=", 1) for s in args.src] or [("", "")]:
            env = {**os.environ, "PYTHONPATH": str(Path(path).resolve())} if path else None
            for cached in (False, True):
                if not cached:
                    shutil.rmtree(verdict_cache(), ignore_errors=True)
                key = f"tokenmill{'@' + label if label else ''}{', verdicts cached' if cached else ''}"
                keep_best(results, key, measure("tokenmill", corpus, tok, template, run_dir, args.workers, 1, env))
        keep_best(results, "trl", measure("trl", corpus, tok, template, run_dir, args.workers, 1))
    lengths = np.load(run_dir / "tokenmill_out" / "lengths.npy")
    body = render(meta, results, packing_rows(lengths), lengths, args)
    print(body)
    if not args.no_write:
        update_section(HEADING, body)


if __name__ == "__main__":
    main()
