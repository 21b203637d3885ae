"""Provenance end to end: a document curated by ``tokenmill curate`` keeps its input file (relative to its
root), its id and its URL through ``documents/`` into the shards of ``tokenmill pretrain`` and the
manifest's per-origin counts."""

from __future__ import annotations

import json
from pathlib import Path

from tokenmill.curate.workflows.curate import run_curate
from tokenmill.pretrain import run_pretrain
from tokenmill.shards import open_shards


def _write(path: Path, n: int, tag: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"text": f"{tag} document {i} " + " ".join(f"{tag}{i}w{k}" for k in range(40)),
                                        "url": f"https://{tag}.example.org/{i}"}) + "\n" for i in range(n)))
    return path


def test_curated_documents_keep_their_origin_in_the_shards(tmp_path):
    crawl = tmp_path / "crawl"
    _write(crawl / "CC-MAIN-a.jsonl", 4, "alpha")
    _write(crawl / "sub" / "CC-MAIN-b.jsonl", 3, "beta")
    cur = tmp_path / "cur"
    run_curate([str(crawl)], out=cur, preset="none", workers=1, progress=False, report=False)
    shards = tmp_path / "shards"
    manifest = run_pretrain([str(cur / "documents")], out=str(shards), tokenizer="default", workers=1, progress=False)
    ds = open_shards(shards)
    sources = [ds[i]["source"] for i in range(len(ds))]
    ids = [ds[i]["id"] for i in range(len(ds))]
    assert sorted(set(sources)) == ["CC-MAIN-a.jsonl", "sub/CC-MAIN-b.jsonl"]
    assert sorted(ids) == sorted([f"CC-MAIN-a.jsonl:{i}" for i in range(1, 5)] +
                                 [f"sub/CC-MAIN-b.jsonl:{i}" for i in range(1, 4)])
    origins = manifest["origins"]
    assert origins == {"CC-MAIN-a.jsonl": {"kept": 4, "tokens": origins["CC-MAIN-a.jsonl"]["tokens"]},
                       "sub/CC-MAIN-b.jsonl": {"kept": 3, "tokens": origins["sub/CC-MAIN-b.jsonl"]["tokens"]}}
    assert sum(o["tokens"] for o in origins.values()) == manifest["counts"]["tokens"]
