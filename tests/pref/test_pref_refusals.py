"""Bad input to and around `tokenmill pref`: a one-line error naming the command or field to change."""

from __future__ import annotations

import json

import prefkit as pk


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_sft_refuses_preference_data_naming_pref(tmp_path):
    src = _write(tmp_path / "pairs.jsonl", [pk.good_pair(i) for i in range(5)])
    r = pk.cli("sft", str(src), "--out", str(tmp_path / "o"), "--tokenizer", "default")
    assert r.returncode == 1
    line = next(x for x in r.stderr.splitlines() if "pairs.jsonl" in x)
    assert "use `tokenmill pref`" in line


def test_pref_refuses_sft_and_pretraining_data_naming_their_command(tmp_path):
    chats = _write(tmp_path / "chats.jsonl", [{"messages": [{"role": "user", "content": "hi"},
                                                            {"role": "assistant", "content": "hello"}]}] * 4)
    docs = _write(tmp_path / "docs.jsonl", [{"text": pk.text(i, 80)} for i in range(4)])
    for src, command in ((chats, "`tokenmill sft`"), (docs, "`tokenmill pretrain`")):
        r = pk.cli("pref", str(src), "--out", str(tmp_path / "o"), "--tokenizer", "default")
        assert r.returncode == 1 and not (tmp_path / "o").exists()
        assert f"use {command}" in next(x for x in r.stderr.splitlines() if src.name in x)
    r = pk.cli("pref", str(chats), "--out", str(tmp_path / "o"), "--tokenizer", "default", "--force")
    assert r.returncode == 1  # no --force turns conversations into pairs


def test_kto_file_without_labels_names_the_label(tmp_path):
    src = _write(tmp_path / "kto.jsonl", [{"prompt": f"q {i}?", "completion": pk.text(i, 5)} for i in range(4)])
    r = pk.cli("pref", str(src), "--out", str(tmp_path / "o"), "--tokenizer", "default")
    assert r.returncode == 1
    assert "needs `label: true|false` on every record" in next(x for x in r.stderr.splitlines() if "kto.jsonl" in x)


def test_kto_records_missing_a_label_are_counted_rejects(tmp_path):
    rows = [{"prompt": f"q {i}?", "completion": pk.text(i, 5), "label": i % 2 == 0} for i in range(6)]
    rows.append({"prompt": "q?", "completion": "a"})
    src = _write(tmp_path / "kto.jsonl", rows)
    r = pk.cli("pref", str(src), "--out", str(tmp_path / "o"), "--tokenizer", "default", "--workers", "1")
    assert r.returncode == 0, r.stderr
    m = json.loads((tmp_path / "o" / "manifest.json").read_text())
    assert m["counts"]["rejected"] == {"missing_label": 1}
    assert m["report"]["unpaired"] == {"desirable": 3, "undesirable": 3}


def test_a_pair_cut_entirely_by_max_length_is_a_counted_reject(tmp_path):
    long = {"prompt": pk.text(1, 200), "chosen": " yes", "rejected": " no"}
    src = _write(tmp_path / "pairs.jsonl", [long, {"prompt": "Hi", "chosen": " yes", "rejected": " no"}])
    r = pk.cli("pref", str(src), "--out", str(tmp_path / "o"), "--tokenizer", "default", "--workers", "1",
               "--max-length", "50")
    assert r.returncode == 0, r.stderr
    m = json.loads((tmp_path / "o" / "manifest.json").read_text())
    assert m["counts"]["rejected"] == {"completion_truncated_away": 1} and m["counts"]["kept"] == 1
    reject = json.loads((tmp_path / "o" / "rejects.jsonl").read_text().splitlines()[0])
    assert "raise --max-length or set --max-prompt-length" in reject["detail"]


def test_val_split_is_refused(tmp_path):
    src = _write(tmp_path / "pairs.jsonl", [pk.good_pair(i) for i in range(3)])
    r = pk.cli("pref", str(src), "--out", str(tmp_path / "o"), "--tokenizer", "default", "--val-fraction", "0.1")
    assert r.returncode == 2 and "--val-fraction" in r.stderr
