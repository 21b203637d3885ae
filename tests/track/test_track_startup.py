"""Start-up: a one-worker run loads its tokenizer in place (no throwaway child process)."""

from __future__ import annotations

import trackkit as tk

from tokenmill.pretrain import run_pretrain
from tokenmill.shards import open_shards
from tokenmill.tokenize import isolated


def test_one_worker_loads_the_tokenizer_in_place(tmp_path, monkeypatch):
    started = []
    real = isolated.ProcessPoolExecutor

    def counting(*args, **kwargs):
        started.append(kwargs.get("max_workers"))
        return real(*args, **kwargs)

    monkeypatch.setattr(isolated, "ProcessPoolExecutor", counting)
    texts = tk.write_docs(tmp_path / "docs.jsonl", 20, seed=3)
    one = run_pretrain([str(tmp_path / "docs.jsonl")], out=tmp_path / "one", workers=1, progress=False)
    assert started == [] and one["counts"]["kept"] == len(texts)
    two = run_pretrain([str(tmp_path / "docs.jsonl")], out=tmp_path / "two", workers=2, progress=False,
                       unit_bytes=1024)
    assert started == [1] and two["counts"]["tokens"] == one["counts"]["tokens"]
    a, b = open_shards(tmp_path / "one"), open_shards(tmp_path / "two")
    assert [d["input_ids"].tolist() for d in a] == [d["input_ids"].tolist() for d in b]
