"""Each track refuses the other track's data, says why, and never leaves a traceback."""

from __future__ import annotations

import json

import pytest
import trackkit as tk

from tokenmill.cli import main


@pytest.fixture()
def files(tmp_path):
    docs = tmp_path / "docs.jsonl"
    tk.write_docs(docs, 30)
    sharegpt = tmp_path / "sharegpt.json"
    sharegpt.write_text(json.dumps([{"conversations": [{"from": "human", "value": f"Question {i}?"},
                                                       {"from": "gpt", "value": f"Answer {i}."}]}
                                    for i in range(30)]))
    chatml = tmp_path / "transcripts.jsonl"
    chatml.write_text("".join(json.dumps({"text": f"<|im_start|>user\nQuestion {i}?<|im_end|>\n"
                                                  f"<|im_start|>assistant\nAnswer {i}.<|im_end|>\n"}) + "\n"
                              for i in range(30)))
    prefs = tmp_path / "prefs.jsonl"
    prefs.write_text("".join(json.dumps({"prompt": f"Q{i}?", "chosen": f"Good {i}.", "rejected": f"Bad {i}."})
                             + "\n" for i in range(30)))
    return {"docs": docs, "sharegpt": sharegpt, "chatml": chatml, "prefs": prefs}


def run(capsys, *args) -> tuple[int, str]:
    code = main([*map(str, args), "--workers", "1", "--no-progress"])
    return code, capsys.readouterr().err


def test_sft_refuses_a_document_corpus(files, tmp_path, capsys):
    code, err = run(capsys, "sft", files["docs"], "--out", tmp_path / "out")
    assert code == 1  # a data error (exit statuses: README)
    assert "refusing" in err and "docs.jsonl" in err and "pretrain" in err and "--force" in err
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_sft_forced_on_documents_fails_cleanly(files, tmp_path):
    done = tk.cli("sft", str(files["docs"]), "--out", str(tmp_path / "out"), "--force", "--workers", "1")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert "documents" in done.stderr and "tokenmill pretrain" in done.stderr


@pytest.mark.parametrize("name, why", [("sharegpt", "sft data"), ("chatml", "chat transcripts")])
def test_pretrain_refuses_conversations(files, tmp_path, capsys, name, why):
    code, err = run(capsys, "pretrain", files[name], "--out", tmp_path / "out")
    assert code == 1  # a data error (exit statuses: README)
    assert "refusing" in err and files[name].name in err and why in err
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_pretrain_forced_on_transcripts_runs(files, tmp_path, capsys):
    code, _ = run(capsys, "pretrain", files["chatml"], "--out", tmp_path / "out", "--force")
    assert code == 0
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["counts"]["kept"] == 30


@pytest.mark.parametrize("force", [[], ["--force"]])
def test_sft_refuses_preference_pairs_even_when_forced(files, tmp_path, capsys, force):
    code, err = run(capsys, "sft", files["prefs"], "--out", tmp_path / "out", *force)
    assert code == 1  # a data error (exit statuses: README)
    assert "preference" in err and "chosen" in err and "rejected" in err
    assert "--force" not in err  # forcing does not help here


def test_mixed_inputs_name_only_the_wrong_ones(files, tmp_path, capsys):
    code, err = run(capsys, "pretrain", files["docs"], files["sharegpt"], "--out", tmp_path / "out")
    assert code == 1  # a data error (exit statuses: README)
    assert "sharegpt.json" in err and "docs.jsonl" not in err


def test_missing_input_is_a_clean_error(tmp_path):
    done = tk.cli("pretrain", str(tmp_path / "nope.jsonl"), "--out", str(tmp_path / "out"))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "nope.jsonl" in done.stderr


def test_an_explicit_mapping_routes_its_own_file_only(files, tmp_path):
    """Mapping one input by hand is a routing decision for that input; the others are still checked."""
    from tokenmill.errors import RoutingError
    from tokenmill.pretrain import run_pretrain

    mapped = {"transcripts.jsonl": {"record": "Document", "text": "text"}}
    m = run_pretrain([str(files["chatml"])], out=tmp_path / "ok", schemas=mapped, workers=1, progress=False)
    assert m["counts"]["kept"] == 30
    with pytest.raises(RoutingError, match="sharegpt.json"):
        run_pretrain([str(files["chatml"]), str(files["sharegpt"])], out=tmp_path / "no", schemas=mapped,
                     workers=1, progress=False)
