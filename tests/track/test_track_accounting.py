"""Every record in = kept + filtered + rejected, and every reject is a line of rejects.jsonl with its raw record."""

from __future__ import annotations

import base64
import json
from collections import Counter
from pathlib import Path

import pytest
import trackkit as tk

from tokenmill.cli import main
from tokenmill.shards import open_shards

# line number -> (raw line bytes, expected reason or None when kept)
PRETRAIN_LINES = [
    (b'{"id": "a", "text": "First good document."}', None),
    (b'{"id": "b", "text": "unterminated', "malformed_json"),
    (b'{"id": "c", "text": "caf\xe9 in latin-1"}', "invalid_utf8"),
    (b'["a", "list", "not", "an", "object"]', "not_an_object"),
    (b'{"id": "e", "text": 42}', "wrong_type"),
    (b'{"id": "f", "body": "no text field"}', "missing_field"),
    (b'{"id": "g", "text": "   \\n\\t "}', "empty_document"),
    (b'{"id": "h", "text": null}', "missing_field"),
    (b'{"id": "i", "text": "Second good document, with \xc3\xa9 and \xf0\x9f\x9a\x80."}', None),
    (b'{"id": "j", "text": ["a", "list"]}', "wrong_type"),
    (b'{"id": "k", "text": "Third good one."}', None),
]

SFT_ROWS = [
    (tk.chat(("user", "Hi"), ("assistant", "Hello!")), None),
    (tk.chat(("wizard", "Hi"), ("assistant", "Hello!")), "unknown_role"),
    (tk.chat(("user", "Hi")), "no_assistant"),
    (tk.chat(("user", "Hi"), ("assistant", "")), "empty_assistant"),
    (tk.chat(("user", "Hi"), ("user", "again"), ("assistant", "ok")), "consecutive_roles"),
    (tk.chat(("user", 5), ("assistant", "ok")), "wrong_type"),
    ({"messages": "not a list"}, "wrong_type"),
    (tk.chat(("system", "Be brief."), ("user", "2+2?"), ("assistant", "4")), None),
]


def write_pretrain_file(path: Path) -> None:
    path.write_bytes(b"\n".join(line for line, _ in PRETRAIN_LINES) + b"\n")


def expected_rejects(table) -> dict[int, str]:
    return {i + 1: reason for i, (_, reason) in enumerate(table) if reason}


def check_counts(manifest: dict, table) -> None:
    c = manifest["counts"]
    reasons = Counter(reason for _, reason in table if reason)
    assert c["input"] == len(table)
    assert c["kept"] == sum(1 for _, reason in table if reason is None)
    assert c["rejected"] == dict(reasons)
    assert c["input"] == c["kept"] + sum(c["filtered"].values()) + sum(c["rejected"].values())
    assert c["balanced"] is True


def test_pretrain_accounts_for_every_record(tmp_path, capsys):
    src = tmp_path / "docs.jsonl"
    write_pretrain_file(src)
    out = tmp_path / "out"
    assert main(["pretrain", str(src), "--out", str(out), "--workers", "1", "--no-progress"]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    check_counts(manifest, PRETRAIN_LINES)

    rejects = tk.read_rejects(out)
    assert {r["loc"]: r["reason"] for r in rejects} == expected_rejects(PRETRAIN_LINES)
    assert len(rejects) == len(expected_rejects(PRETRAIN_LINES))
    for r in rejects:
        line = PRETRAIN_LINES[r["loc"] - 1][0]
        assert r["source"] == "docs.jsonl" and r["detail"]
        if r["reason"] == "invalid_utf8":
            assert "raw" not in r and base64.b64decode(r["raw_b64"]) == line
        elif r["reason"] in ("malformed_json", "not_an_object"):
            assert r["raw"] == line.decode()
        else:
            assert r["raw"] == json.loads(line)

    shards = open_shards(out)
    assert [shards[i]["id"] for i in range(len(shards))] == ["a", "i", "k"]
    printed = capsys.readouterr().out
    assert manifest["identity"] in printed and "rejects:" in printed and "manifest:" in printed
    assert "input 11 = kept 3 + filtered 0 (none) + rejected 8" in printed


def test_pretrain_as_a_process_prints_the_summary_and_no_traceback(tmp_path):
    src = tmp_path / "docs.jsonl"
    write_pretrain_file(src)
    done = tk.cli("pretrain", str(src), "--out", str(tmp_path / "out"), "--workers", "1")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "input 11 = kept 3 + filtered 0 (none) + rejected 8" in done.stdout
    assert "malformed_json 1" in done.stdout and "invalid_utf8 1" in done.stdout


def test_sft_accounts_for_every_record(tmp_path, capsys):
    src = tmp_path / "chats.jsonl"
    lines = [json.dumps(row).encode() for row, _ in SFT_ROWS] + [b"{not json"]
    src.write_bytes(b"\n".join(lines) + b"\n")
    table = SFT_ROWS + [(None, "malformed_json")]
    out = tmp_path / "out"
    assert main(["sft", str(src), "--out", str(out), "--workers", "1", "--no-progress"]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    check_counts(manifest, table)
    rejects = tk.read_rejects(out)
    assert sorted((r["loc"], r["reason"]) for r in rejects) == sorted(expected_rejects(table).items())
    for r in rejects:
        assert r["source"] == "chats.jsonl" and r["detail"]
        want = table[r["loc"] - 1][0]
        assert r["raw"] == (want if want is not None else "{not json")
    printed = capsys.readouterr().out
    assert manifest["identity"] in printed and "SFT report" in printed
    assert manifest["report"]["parity"]["checked"] == 2


def test_sft_as_a_process_has_no_traceback(tmp_path):
    src = tmp_path / "chats.jsonl"
    src.write_text("\n".join(json.dumps(row) for row, _ in SFT_ROWS) + "\n")
    done = tk.cli("sft", str(src), "--out", str(tmp_path / "out"), "--workers", "1")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "input 8 = kept 2" in done.stdout


@pytest.mark.parametrize("step, reason", [({"name": "length", "min_chars": 18}, "length_v1:too_short"),
                                          ({"name": "length", "max_chars": 18}, "length_v1:too_long")])
def test_filtered_documents_are_counted_by_reason(tmp_path, step, reason):
    src = tmp_path / "docs.jsonl"
    write_pretrain_file(src)
    cfg = tmp_path / "pipeline.yaml"
    cfg.write_text(json.dumps({"steps": [step]}))  # JSON is YAML
    out = tmp_path / "out"
    assert main(["pretrain", str(src), "--out", str(out), "--config", str(cfg), "--workers", "1",
                 "--no-progress"]) == 0
    c = json.loads((out / "manifest.json").read_text())["counts"]
    # the good texts have 21, 40 and 15 characters
    assert c["filtered"] == {reason: 1 if "short" in reason else 2}
    assert c["kept"] == 3 - c["filtered"][reason]
    assert c["balanced"] and c["input"] == len(PRETRAIN_LINES)
