"""inspect() over small files written in the tests, read through tokenmill.io."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
from route_samples import PROSE, WEB_PAGE

from tokenmill.route import Route, inspect, render_json, render_table


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def only(routes: list[Route]) -> Route:
    assert len(routes) == 1
    return routes[0]


def test_jsonl_sharegpt(tmp_path):
    conv = [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"}]
    path = write_jsonl(tmp_path / "chat.jsonl", [{"conversations": conv}] * 5)
    route = only(inspect([path]))
    assert (route.format, route.kind, route.records_sampled) == ("jsonl", "sft", 5)
    assert route.schema["style"] == "sharegpt"


def test_json_array_alpaca(tmp_path):
    path = tmp_path / "alpaca.json"
    path.write_text(json.dumps([{"instruction": "Add 1 and 1.", "input": "", "output": "2"}] * 4))
    route = only(inspect([str(path)]))
    assert (route.format, route.kind, route.schema["style"]) == ("json", "sft", "alpaca")


def test_parquet_documents_with_unknown_text_name(tmp_path):
    table = pa.table({"raw": [PROSE * 2] * 6, "uid": [str(i) for i in range(6)]})
    pq.write_table(table, tmp_path / "docs.parquet")
    route = only(inspect([str(tmp_path / "docs.parquet")]))
    assert (route.format, route.kind, route.schema["text"], route.schema["id"]) == ("parquet", "pretrain", "raw", "uid")


def test_text_files_prose_and_transcript(tmp_path):
    (tmp_path / "book.txt").write_text(PROSE * 20)
    (tmp_path / "chat.txt").write_text("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nhello<|im_end|>\n")
    routes = {r.path.rsplit("/", 1)[-1]: r for r in inspect([str(tmp_path)])}
    assert routes["book.txt"].kind == "pretrain"
    assert routes["chat.txt"].kind == "sft"
    assert routes["chat.txt"].schema["style"] == "rendered_text"


def test_sample_limits_records_and_bad_lines_become_warnings(tmp_path):
    rows = [{"question": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(50)]
    path = tmp_path / "qa.jsonl"
    path.write_text("{not json\n" + "".join(json.dumps(r) + "\n" for r in rows))
    route = only(inspect([str(path)], sample=10))
    assert route.kind == "sft"
    assert route.records_sampled <= 10
    assert route.evidence["rejects"] and "could not be read" in route.warnings[0]


def test_one_route_per_file_and_renderers(tmp_path):
    write_jsonl(tmp_path / "a.jsonl", [{"text": PROSE}] * 3)
    write_jsonl(tmp_path / "b.jsonl", [{"prompt": "", "completion": WEB_PAGE}] * 3)
    write_jsonl(tmp_path / "c.jsonl", [{"prompt": "p", "chosen": "c", "rejected": "r"}] * 3)
    routes = sorted(inspect([str(tmp_path)]), key=lambda r: r.path)
    assert [r.kind for r in routes] == ["pretrain", "pretrain", "preference"]
    table = render_table(routes)
    lines = table.splitlines()
    assert lines[0].split() == ["path", "format", "kind", "conf", "sampled", "schema"]  # records read, not all
    assert "Document text=text" in lines[1]
    assert any(line.startswith("    ! responses look like whole web pages") for line in lines)
    assert "preference chosen=chosen rejected=rejected" in table
    decoded = json.loads(render_json(routes))
    assert [d["kind"] for d in decoded] == ["pretrain", "pretrain", "preference"]
    assert decoded[2]["schema"]["chosen"] == "chosen"
