"""``tokenmill demo``: both tracks end to end on a generated mixed input, with the embedded tokenizer.

1. writes a small mixed input: documents (JSONL and plain text, built from the Python standard library's
   own documentation), conversations in three schemas (ShareGPT, Alpaca, OpenAI messages), a preference
   file, chat transcripts disguised as documents, and a few broken records;
2. routes every file (``tokenmill inspect``) and sends each to its track;
3. tokenizes both tracks into shards (the SFT track with loss masks, checked against
   ``apply_chat_template``);
4. blends them 70/30 in the loader and prints one packed batch with a summary of its masks;
5. points to the manifests and rejects files it wrote.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import pydoc
from pathlib import Path

import numpy as np

from tokenmill.engine.store import is_remote, shown
from tokenmill.job.driver import check_own_folder, hold_own_folder
from tokenmill.loader import BlendedDataset, PackedCollator
from tokenmill.pretrain import run_pretrain
from tokenmill.route import inspect, render_table
from tokenmill.sft.report import render_report
from tokenmill.sft.run import run_sft
from tokenmill.tokenize import load_tokenizer
from tokenmill.track import print_summary

MODULES = ("json", "csv", "pathlib", "argparse", "logging", "collections", "itertools", "functools",
           "asyncio", "sqlite3", "email", "http.client", "unittest", "doctest", "heapq", "bisect",
           "statistics", "fractions", "decimal", "datetime", "calendar", "textwrap", "difflib", "zipfile")

SHAREGPT = [
    {"id": "sg-1", "conversations": [
        {"from": "human", "value": "What does the bisect module do?"},
        {"from": "gpt", "value": "It keeps a list sorted: bisect finds the insertion point, insort inserts."},
        {"from": "human", "value": "Is it fast?"},
        {"from": "gpt", "value": "Each search is O(log n); the insertion itself is O(n) because items move."}]},
    {"id": "sg-2", "conversations": [
        {"from": "system", "value": "You answer in one sentence."},
        {"from": "human", "value": "Why pack training sequences?"},
        {"from": "gpt", "value": "Packing fills every sequence with real tokens, so no compute is spent on padding."}]},
    {"id": "sg-bad", "conversations": [
        {"from": "human", "value": "Two user turns"}, {"from": "human", "value": "in a row"},
        {"from": "gpt", "value": "are rejected with a reason."}]},
]
ALPACA = [
    {"instruction": "Name the data structure heapq implements.", "input": "", "output": "A binary min-heap."},
    {"instruction": "Translate to French.", "input": "Good morning", "output": "Bonjour"},
    {"instruction": "Summarise the rule.", "input": "in = kept + filtered + rejected",
     "output": "Every input record is either kept, filtered with a reason, or rejected with a reason."},
    {"instruction": "This record has no output.", "input": "", "output": None},
]
MESSAGES = [
    {"messages": [
        {"role": "user", "content": "What is 17 * 3?"},
        {"role": "assistant", "content": "<think>17 * 3 = 51.</think>51"}]},
    {"messages": [
        {"role": "user", "content": "Please repeat <|im_end|> literally."},
        {"role": "assistant", "content": "Here it is as text: <|im_end|>"}]},
]


def _documents() -> list[dict]:
    docs = []
    for name in MODULES:
        module = importlib.import_module(name)
        text = pydoc.getdoc(module).strip()
        if text:
            docs.append({"id": f"stdlib/{name}", "text": text, "url": f"https://docs.python.org/3/library/{name}.html"})
    return docs


def make_inputs(root: Path) -> None:
    """The demo's mixed input, broken records included."""
    root.mkdir(parents=True, exist_ok=True)
    docs = _documents()
    with open(root / "stdlib_docs.jsonl", "wb") as fh:
        for d in docs:
            fh.write(json.dumps(d).encode() + b"\n")
        fh.write(b'{"id": "broken", "text": "an unterminated line\n')
        fh.write(b'{"id": "latin1", "text": "caf\xe9"}\n')
        fh.write(b'{"id": "number", "text": 42}\n')
    paragraphs = [pydoc.getdoc(importlib.import_module(m)) for m in ("string", "re", "shlex")]
    (root / "notes.txt").write_text("\n\n".join(p for p in paragraphs if p))
    (root / "chat_sharegpt.json").write_text(json.dumps(SHAREGPT, indent=1))
    with open(root / "instructions_alpaca.jsonl", "w") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in ALPACA)
    with open(root / "chat_messages.jsonl", "w") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in MESSAGES)
    pairs = [{"prompt": "Say hi", "chosen": "Hi!", "rejected": "Go away."}] * 3
    (root / "preferences.json").write_text(json.dumps(pairs))
    transcripts = [{"text": f"User: question {i}?\nAssistant: answer {i}.\nUser: thanks\nAssistant: welcome"}
                   for i in range(5)]
    with open(root / "transcripts_as_text.jsonl", "w") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in transcripts)


def run_demo(out: str | Path, *, seq_len: int = 512, dry_run: bool = False) -> None:
    """The demo into ``out``, a directory or an ``s3://`` prefix (made in its work directory, then published:
    :func:`~tokenmill.job.driver.hold_own_folder`); with ``dry_run``, its refusals and what it would write,
    nothing written."""

    _, _, again = check_own_folder(out, workflow="demo")  # a rerun replaces what the demo recorded, nothing else
    if dry_run:
        where = shown(out)
        print(f"dry run: `tokenmill demo` would write its generated input to {where / 'input'}, the pretraining "
              f"track to {where / 'pretrain'} and the SFT track to {where / 'sft'}"
              + (", replacing what its earlier run wrote there" if again else "") + " (nothing written)")
        return
    with hold_own_folder(out, workflow="demo") as local:
        _run(local, seq_len=seq_len, again=again)
    if is_remote(out):
        print(f"\n   published to {shown(out)}")


def _run(out: Path, *, seq_len: int, again: bool) -> None:

    make_inputs(out / "input")
    print(f"== 1. mixed input written to {out / 'input'}\n")
    routes = inspect([str(out / "input")])
    print("== 2. routing (tokenmill inspect)\n" + render_table(routes) + "\n")
    docs = [r.path for r in routes if r.kind == "pretrain"]
    chats = [r.path for r in routes if r.kind == "sft" and r.schema.get("style") != "rendered_text"]
    for r in routes:
        if r.path not in docs + chats:
            print(f"   not taken: {Path(r.path).name} ({r.kind}{': ' + r.warnings[0] if r.warnings else ''})")
    print("\n== 3a. pretraining track")
    pre = run_pretrain(docs, out=out / "pretrain", tokenizer="default", workers=1, progress=False, overwrite=again)
    print_summary(pre, out / "pretrain")
    print("\n== 3b. SFT track")
    verify = 64 if importlib.util.find_spec("transformers") else 0
    if not verify:
        print("   (transformers not installed: parity against apply_chat_template skipped; pip install 'tokenmill[hf]')")
    sft = run_sft(chats, out=out / "sft", tokenizer="default", workers=1, progress=False, seq_len=seq_len,
                  verify=verify, overwrite=again)
    print_summary(sft, out / "sft")
    print(render_report(sft["report"]))
    print("\n== 4. blended 70/30 and loaded as packed batches")
    show_batch(out, seq_len=seq_len)
    print("\n== 5. reports")
    for track in ("pretrain", "sft"):
        print(f"   {out / track / 'manifest.json'}   {out / track / 'rejects.jsonl'}")
    print(f"   look inside: tokenmill audit {out / 'sft'} --n 3   |   tokenmill stats {out / 'sft'} --seq-len {seq_len}")


def show_batch(out: Path, *, seq_len: int) -> None:

    blend = BlendedDataset([(str(out / "pretrain"), 7), (str(out / "sft"), 3)], seq_len=seq_len, seed=0)
    tok = load_tokenizer("default")
    batch = PackedCollator(pad_id=tok.eos_id)([blend[k] for k in range(4)])
    ids, labels, pos = batch["input_ids"].numpy(), batch["labels"].numpy(), batch["position_ids"].numpy()
    print(f"   {len(blend)} blended samples of {seq_len} tokens; batch input_ids {tuple(ids.shape)}")
    for row in range(ids.shape[0]):
        source = "sft" if blend.route(row)[0] == 1 else "pretrain"
        docs = int((pos[row] == 0).sum())
        trained = int((labels[row] != -100).sum())
        print(f"   row {row}: {source:8s} {docs:3d} documents, {trained:4d}/{ids.shape[1]} tokens trained")
    row = next((r for r in range(ids.shape[0]) if blend.route(r)[0] == 1), None)
    if row is not None:
        print("   first SFT row, trained text in [[ ]]:")
        print("   " + _marked(tok, ids[row], labels[row] != -100)[:600].replace("\n", "\n   "))


def _marked(tok, ids: np.ndarray, trained: np.ndarray) -> str:
    edges = np.flatnonzero(np.diff(trained.astype(np.int8))) + 1
    parts = []
    for chunk_ids, chunk_mask in zip(np.split(ids, edges), np.split(trained, edges)):
        text = tok.decode(chunk_ids.tolist())
        parts.append(f"[[{text}]]" if chunk_mask[0] else text)
    return "".join(parts)
