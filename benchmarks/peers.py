"""One tokenization approach per call, run in its own process by ``pretrain_throughput.py``.

    python benchmarks/peers.py NAME --corpus DIR --tokenizer DIR --work DIR [--workers N]

NAME is one of ``bare_hf``, ``bare_gigatoken``, ``hf_datasets``, ``datatrove``. Prints one JSON line with
``seconds`` (the timed part), ``docs`` and ``tokens`` (EOS included where the approach writes one).

The bare encoders time only the encoding of texts already in memory (reading the Parquet corpus into a
list first is not timed), in batches of 1,000 documents, without special tokens, after an untimed warm-up on
8 documents (thread pools start). The pipelines are timed from start to finished output: HF ``datasets``
loads the Parquet files (building its Arrow cache) and maps a batched ``AutoTokenizer`` call with
``num_proc`` workers; datatrove runs ``ParquetReader`` -> ``DocumentTokenizer`` (no shuffling) on a local
executor with ``--workers`` tasks.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq

BATCH = 1000


def corpus_files(corpus: str) -> list[str]:
    return sorted(str(p) for p in Path(corpus).glob("*.parquet"))


def load_texts(corpus: str) -> list[str]:
    texts: list[str] = []
    for path in corpus_files(corpus):
        texts.extend(pq.read_table(path, columns=["text"]).column("text").to_pylist())
    return texts


def eos_token(tokenizer_dir: str) -> str:
    config = json.loads((Path(tokenizer_dir) / "tokenizer_config.json").read_text())
    eos = config.get("eos_token")
    return eos["content"] if isinstance(eos, dict) else eos


def bare_hf(args: argparse.Namespace) -> dict:
    from transformers import AutoTokenizer

    backend = AutoTokenizer.from_pretrained(args.tokenizer).backend_tokenizer
    texts = load_texts(args.corpus)
    backend.encode_batch(texts[:8], add_special_tokens=False)  # warm-up, not timed
    start = time.perf_counter()
    tokens = 0
    for i in range(0, len(texts), BATCH):
        tokens += sum(len(e.ids) for e in backend.encode_batch(texts[i:i + BATCH], add_special_tokens=False))
    return {"seconds": time.perf_counter() - start, "docs": len(texts), "tokens": tokens}


def bare_gigatoken(args: argparse.Namespace) -> dict:
    import awkward as ak
    import gigatoken
    from transformers import AutoTokenizer

    encoder = gigatoken.Tokenizer(AutoTokenizer.from_pretrained(args.tokenizer).backend_tokenizer)
    texts = load_texts(args.corpus)
    encoder.encode_batch(texts[:8])  # warm-up, not timed
    start = time.perf_counter()
    tokens = 0
    for i in range(0, len(texts), BATCH):
        tokens += int(ak.sum(ak.num(encoder.encode_batch(texts[i:i + BATCH]))))
    return {"seconds": time.perf_counter() - start, "docs": len(texts), "tokens": tokens}


def hf_datasets(args: argparse.Namespace) -> dict:
    from datasets import load_dataset
    from transformers import AutoTokenizer

    start = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(args.tokenizer)
    eos = tokenizer.convert_tokens_to_ids(eos_token(args.tokenizer))

    def encode(batch):
        ids = tokenizer(batch["text"], add_special_tokens=False)["input_ids"]
        return {"input_ids": [x + [eos] for x in ids]}

    ds = load_dataset("parquet", data_files=corpus_files(args.corpus), split="train",
                      cache_dir=str(Path(args.work) / "hf_cache"))
    out = ds.map(encode, batched=True, batch_size=BATCH, num_proc=args.workers, remove_columns=ds.column_names)
    seconds = time.perf_counter() - start
    tokens = sum(len(x) for batch in out.iter(batch_size=10_000) for x in batch["input_ids"])
    return {"seconds": seconds, "docs": len(out), "tokens": tokens}


def datatrove(args: argparse.Namespace) -> dict:
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.readers import ParquetReader
    from datatrove.pipeline.tokens import DocumentTokenizer
    from transformers import AutoTokenizer

    work = Path(args.work)
    tokenizer_json = work / "tokenizer.json"
    AutoTokenizer.from_pretrained(args.tokenizer).backend_tokenizer.save(str(tokenizer_json))
    start = time.perf_counter()
    LocalPipelineExecutor(
        pipeline=[
            ParquetReader(args.corpus, glob_pattern="*.parquet", text_key="text", id_key="id"),
            DocumentTokenizer(output_folder=str(work / "tokens"), tokenizer_name_or_path=str(tokenizer_json),
                              eos_token=eos_token(args.tokenizer), shuffle_documents=False),
        ],
        tasks=args.workers, workers=args.workers, logging_dir=str(work / "logs"),
    ).run()
    seconds = time.perf_counter() - start
    return {"seconds": seconds, **_datatrove_counts(work / "tokens")}


def _datatrove_counts(folder: Path) -> dict:
    """Documents from the index files (one uint64 end per document), tokens from the .ds sizes (uint32 ids)."""
    docs = sum(p.stat().st_size // 8 for p in folder.glob("*.ds.index"))
    width = 4  # vocabularies above 65,535 ids are stored as uint32
    tokens = sum(p.stat().st_size // width for p in folder.glob("*.ds"))
    return {"docs": docs, "tokens": tokens}


PEERS = {"bare_hf": bare_hf, "bare_gigatoken": bare_gigatoken, "hf_datasets": hf_datasets, "datatrove": datatrove}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", choices=sorted(PEERS))
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--tokenizer", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    Path(args.work).mkdir(parents=True, exist_ok=True)
    print(json.dumps(PEERS[args.name](args)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
