"""Every command that reads input meets the same hostile file (a malformed line, a field of the wrong type,
invalid UTF-8, a truncated last line): each bad record is counted and written to the rejects with its file,
line and reason, and the run goes on with the rest. ``pretrain`` and ``sft`` are covered by the other
hostile tests; here: ``curate``, ``decontaminate``, ``quality train``, ``sft select`` and ``synth``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import hostilekit as hk
import pytest

WORDS = "rivers carry water from the hills down to the sea while farmers watch the weather and the seasons"


def _docs(n: int, start: int = 0) -> list[dict]:
    return [{"id": f"doc-{i}", "text": f"Document {i}: {WORDS}, and page {i} says so again in its own words."}
            for i in range(start, start + n)]


def _check_rejects(path: Path, source: str, expected: dict[int, str]) -> None:
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    assert {r["source"] for r in rows} == {source}
    assert {r["loc"]: r["reason"] for r in rows} == expected
    assert all(r["detail"] for r in rows)


def test_curate(tmp_path):
    expected = hk.hostile_jsonl(tmp_path / "in" / "web.jsonl", _docs(12), field="text")
    result = hk.cli("curate", tmp_path / "in", "--out", tmp_path / "out", "--preset", "none", "--workers", "1",
                    "--no-progress")
    assert result.returncode == 0, result.stderr
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["counts"]["kept"] == 12 and sum(manifest["counts"]["rejected"].values()) == len(expected)
    _check_rejects(tmp_path / "out" / "rejects.jsonl", "web.jsonl", expected)


def test_decontaminate(tmp_path):
    expected = hk.hostile_jsonl(tmp_path / "in" / "web.jsonl", _docs(12), field="text")
    ev = tmp_path / "gsm8k.jsonl"
    ev.write_text(json.dumps({"question": "A baker bakes forty loaves every morning and sells half of them by noon "
                                          "to the school", "answer": "20"}) + "\n")
    result = hk.cli("decontaminate", tmp_path / "in", "--eval", ev, "--out", tmp_path / "out", "--workers", "1",
                    "--no-progress")
    assert result.returncode == 0, result.stderr
    report = json.loads((tmp_path / "out" / "decontamination.json").read_text())
    assert report["documents"] == 12 and report["kept"] == 12
    _check_rejects(tmp_path / "out" / "rejects.jsonl", "web.jsonl", expected)


def test_quality_train(tmp_path):
    pytest.importorskip("fasttext")
    expected = hk.hostile_jsonl(tmp_path / "pos.jsonl", _docs(20), field="text")
    neg = tmp_path / "neg.jsonl"
    neg.write_text("".join(json.dumps({"text": f"buy cheap pills now {i} click here " * 6}) + "\n" for i in range(20)))
    result = hk.cli("quality", "train", "--positive", tmp_path / "pos.jsonl", "--negative", neg,
                    "--param", "quantize=0", "--out", tmp_path / "model")  # quantising: test_quality.py
    assert result.returncode == 0, result.stderr
    assert "trained on 20 positive and 20 negative documents (4 unusable records skipped" in result.stdout
    _check_rejects(tmp_path / "model" / "rejects.jsonl", "pos.jsonl", expected)
    card = json.loads((tmp_path / "model" / "model.bin.card.json").read_text())
    assert card["data"]["unusable_by_reason"] == {"malformed_json": 2, "wrong_type": 1, "invalid_utf8": 1}


def test_sft_select(tmp_path):
    questions = ["Why is the sky blue", "How do bees make honey", "What causes ocean tides", "Who built Rome",
                 "When did dinosaurs vanish", "Where do rivers start", "Which metal rusts fastest",
                 "How are mountains formed", "What makes bread rise", "Why do cats purr"]
    good = [{"messages": [{"role": "user", "content": q + "?"},
                          {"role": "assistant", "content": f"Answer {i}: {WORDS}."}]} for i, q in enumerate(questions)]
    expected = hk.hostile_jsonl(tmp_path / "chats.jsonl", good, field="messages")
    result = hk.cli("sft", "select", tmp_path / "chats.jsonl", "--out", tmp_path / "sel", "--n", "5")
    assert result.returncode == 0, result.stderr
    manifest = json.loads((tmp_path / "sel" / "manifest.json").read_text())
    assert manifest["counts"]["input"] == 10 + len(expected) and manifest["counts"]["kept"] == 5
    _check_rejects(tmp_path / "sel" / "rejects.jsonl", "chats.jsonl", expected)


sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "synth"))


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("httpx")
    import tinyserver

    model = tinyserver.build_model(tmp_path_factory.mktemp("tiny") / "model")
    with tinyserver.serve(model) as (url, _):
        yield url, model


def test_synth_rephrase_and_distill(server, tmp_path):
    url, model = server
    expected = hk.hostile_jsonl(tmp_path / "docs.jsonl", _docs(3), field="text")
    common = ["--server", url, "--model", str(model), "--max-tokens", "32", "--retries", "1",
              "--cache-dir", tmp_path / "cache", "--no-progress"]
    result = hk.cli("synth", "rephrase", tmp_path / "docs.jsonl", "--out", tmp_path / "re", *common)
    assert result.returncode == 0, result.stderr
    manifest = json.loads((tmp_path / "re" / "manifest.json").read_text())
    assert manifest["counts"]["kept"] == 3
    _check_rejects(tmp_path / "re" / "rejects.jsonl", "docs.jsonl", expected)
    prompts = [{"id": f"p{i}", "prompt": f"What is six plus seven, case {i}?", "answer": "13"} for i in range(3)]
    expected = hk.hostile_jsonl(tmp_path / "prompts.jsonl", prompts, field="prompt")
    result = hk.cli("synth", "distill", tmp_path / "prompts.jsonl", "--out", tmp_path / "di", *common)
    assert result.returncode == 0, result.stderr
    _check_rejects(tmp_path / "di" / "rejects.jsonl", "prompts.jsonl", expected)
