"""The fast tokenizer's start-up parity check also runs on documents of the run's own inputs."""

from __future__ import annotations

import json

from tokenmill.io import expand_inputs
from tokenmill.job.run import parity_texts


def test_parity_texts_take_documents_from_every_input(tmp_path):
    (tmp_path / "web.jsonl").write_text("".join(json.dumps({"body": f"page {i} " * 5}) + "\n" for i in range(40)))
    (tmp_path / "book.txt").write_text("A whole book, one document.\n\nSecond paragraph.")
    files = expand_inputs([str(tmp_path)])
    schemas = {"web.jsonl": {"text": "body"}, "book.txt": {"text": "text"}}
    texts = parity_texts(files, schemas, text_mode="auto", per_file=16, max_chars=12)
    assert texts.count("A whole book") == 1
    assert sum(t.startswith("page ") for t in texts) == 16
    assert all(len(t) <= 12 for t in texts)
    capped = parity_texts(files, schemas, text_mode="auto", per_file=16, max_chars=12, budget=30)
    assert sum(map(len, capped)) <= 30 and len(capped) == 3
