"""A schema path goes as deep as the data does: ``text: doc.content.text`` maps (JSONL and Parquet), and a
path whose first key is wrong is still named with a suggestion."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tokenmill.cli import main
from tokenmill.shards import open_shards

ROWS = [{"doc": {"content": {"text": f"Deeply nested document number {i} about rivers.", "lang": "en"}, "n": i}}
        for i in range(12)]


def _write(tmp_path, fmt):
    path = tmp_path / f"nested.{fmt}"
    if fmt == "jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    else:
        pq.write_table(pa.Table.from_pylist(ROWS), path)
    return path


def _pipeline(tmp_path, src, text_path):
    cfg = tmp_path / "pipeline.yaml"
    cfg.write_text(f"inputs: [{src}]\nout: {tmp_path / 'out'}\ntokenizer: default\n"
                   f"schema:\n  '*': {{text: {text_path}}}\n")
    return cfg


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_a_two_level_path_maps_the_text(tmp_path, fmt, capsys):
    src = _write(tmp_path, fmt)
    code = main(["pretrain", "--config", str(_pipeline(tmp_path, src, "doc.content.text")), "--workers", "1",
                 "--no-progress"])
    assert code == 0, capsys.readouterr().err
    assert open_shards(tmp_path / "out").n_docs == 12


def test_a_wrong_first_key_below_the_root_is_named(tmp_path, capsys):
    src = _write(tmp_path, "jsonl")
    code = main(["pretrain", "--config", str(_pipeline(tmp_path, src, "doc.contnt.text")), "--workers", "1",
                 "--no-progress"])
    err = capsys.readouterr().err
    assert code == 1 and "holds no key 'contnt'" in err and "did you mean 'content'" in err, err


def test_sft_columns_take_dotted_paths_too(tmp_path, capsys):
    src = tmp_path / "deep.jsonl"
    src.write_text("".join(json.dumps({"ex": {"q": {"text": f"What is {i} plus one?"}, "a": f"It is {i + 1}."}}) + "\n"
                           for i in range(10)))
    cfg = tmp_path / "sft.yaml"
    cfg.write_text(f"inputs: [{src}]\nout: {tmp_path / 'sft'}\ntokenizer: default\nschema:\n  '*': {{record: Conversation, "
                   "style: prompt_response, prompt: ex.q.text, response: ex.a}\n")
    code = main(["sft", "--config", str(cfg), "--workers", "1", "--no-progress", "--verify", "0"])
    assert code == 0, capsys.readouterr().err
    assert open_shards(tmp_path / "sft").n_docs == 10
