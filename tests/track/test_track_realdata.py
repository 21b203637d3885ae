"""Real data, real tokenizers: both tracks over ../shared/data against the reference libraries."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import trackkit as tk

from tokenmill.cli import main
from tokenmill.pretrain import run_pretrain
from tokenmill.shards import open_shards, verify_shards
from tokenmill.tokenize import load_tokenizer

pytestmark = pytest.mark.realdata

TOKENIZERS = ["qwen2", "gpt2", "llama2", "mistral"]


def assemble(name: str, data: Path, root: Path) -> Path:
    """A model-style tokenizer directory in ``root`` from the shared files."""
    tok, tpl = data / "tokenizers", data / "chat_templates"
    d = root / name
    d.mkdir()
    if name == "qwen2":
        shutil.copy(tok / "qwen2_vocab.json", d / "vocab.json")
        shutil.copy(tok / "qwen2_merges.txt", d / "merges.txt")
        shutil.copy(tpl / "qwen2-1.5b-instruct-finetune_tokenizer_config.json", d / "tokenizer_config.json")
    elif name == "gpt2":
        shutil.copy(tok / "gpt2_vocab.json", d / "vocab.json")
        shutil.copy(tok / "gpt2_merges.txt", d / "merges.txt")
        (d / "tokenizer_config.json").write_text(json.dumps({
            "tokenizer_class": "GPT2Tokenizer", "bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>",
            "unk_token": "<|endoftext|>"}))
    elif name == "llama2":
        shutil.copy(tok / "llama2_tokenizer.model", d / "tokenizer.model")
        shutil.copy(tok / "llama2_tokenizer_config.json", d / "tokenizer_config.json")
    else:
        shutil.copy(tok / "mistral-7b-instruct-v0.3_tokenizer.json", d / "tokenizer.json")
        shutil.copy(tpl / "mistral-7b-instruct-v0.3_tokenizer_config.json", d / "tokenizer_config.json")
    return d


@pytest.fixture(scope="module")
def tokenizer_dirs(shared_data, tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tokenizers")
    return {name: assemble(name, shared_data, root) for name in TOKENIZERS}


@pytest.fixture(scope="module")
def documents(shared_data) -> tuple[list[Path], list[str]]:
    """The JSONL files of shared_data/pretrain and their texts, in file order."""
    files = sorted((shared_data / "pretrain").glob("*.jsonl"))
    texts = [json.loads(line)["text"] for f in files for line in f.read_text(encoding="utf-8").splitlines()]
    return files, texts


def reference_ids(name: str, directory: Path, texts: list[str]) -> tuple[list[list[int]], bool, int]:
    """(ids of every text, whether the tokenizer adds a BOS, the EOS id that ends a document) from the model's own
    libraries: its EOS, or its document token when that EOS is a chat end-of-turn token (an instruct tokenizer's
    ``<|im_end|>``: pretraining ends documents with ``<|endoftext|>``, see ``choose_eos``).

    Llama-2 ships a SentencePiece model, so SentencePiece itself is the reference: the BPE conversion
    ``transformers`` makes of it splits runs of spaces differently on a few of these documents.
    """
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(str(directory))
    adds_bos = hf.bos_token_id is not None and hf("x").input_ids[0] == hf.bos_token_id
    if name == "llama2":
        import sentencepiece

        sp = sentencepiece.SentencePieceProcessor(model_file=str(directory / "tokenizer.model"))
        return [sp.encode(t) for t in texts], adds_bos, _document_eos(hf)
    return [hf.encode(t, add_special_tokens=False) for t in texts], adds_bos, _document_eos(hf)


def _document_eos(hf) -> int:
    from tokenmill.pretrain.run import CHAT_END_OF_TURN, DOCUMENT_EOS

    if hf.eos_token not in CHAT_END_OF_TURN:
        return hf.eos_token_id
    vocab = hf.get_vocab()
    return next((vocab[t] for t in DOCUMENT_EOS if t in vocab), hf.eos_token_id)


@pytest.mark.parametrize("name", TOKENIZERS)
def test_pretrain_ids_equal_the_reference_and_fast_equals_slow(name, tokenizer_dirs, documents, tmp_path):
    files, texts = documents
    directory = tokenizer_dirs[name]
    fast = tmp_path / "fast"
    manifest = run_pretrain([str(f) for f in files], out=fast, tokenizer=str(directory), workers=1,
                            progress=False)
    assert manifest["counts"]["kept"] == len(texts) and manifest["counts"]["balanced"]
    assert manifest["tokenizer"]["backend"] == "gigatoken"
    want, adds_bos, eos = reference_ids(name, directory, texts)
    shards = open_shards(fast)
    bos = [shards.bos_id] if adds_bos else []
    assert eos is not None and shards.eos_id == eos
    for i, ids in enumerate(want):
        assert shards[i]["input_ids"].tolist() == bos + ids + [eos], f"{name}: document {i}"
    assert verify_shards(fast) == []

    slow_tok = load_tokenizer(str(directory), fast=False)
    assert slow_tok.backend != "gigatoken"
    run_pretrain([str(f) for f in files], out=tmp_path / "slow", tokenizer=slow_tok, workers=1, progress=False)
    fast_files, slow_files = tk.output_files(fast), tk.output_files(tmp_path / "slow")
    # the headers name the backend that wrote them; every byte of ids, offsets and documents is the same
    card = {"datacard.md", "datacard.json"}  # the data card names the tokenizer's backend too
    data = [k for k in fast_files if not k.endswith(".json") and k not in card]
    assert data and all(fast_files[k] == slow_files[k] for k in data)
    assert sorted(fast_files) == sorted(slow_files)
    for k in fast_files.keys() - data - card:
        fast_header, slow_header = json.loads(fast_files[k]), json.loads(slow_files[k])
        assert fast_header["tokenizer_info"].pop("backend") == "gigatoken"
        slow_header["tokenizer_info"].pop("backend")
        assert fast_header == slow_header, k


def test_a_bare_tokenizer_file_writes_what_the_full_directory_writes(shared_data, tokenizer_dirs, tmp_path):
    """BOS from the tokenizer.json post-processor, EOS from its special tokens: same shards as with the config."""
    src = shared_data / "pretrain" / "datajuicer_demo-dataset-deduplication.jsonl"
    bare = shared_data / "tokenizers" / "mistral-7b-instruct-v0.3_tokenizer.json"
    for spec, out in ((bare, "bare"), (tokenizer_dirs["mistral"], "dir")):
        assert main(["pretrain", str(src), "--out", str(tmp_path / out), "--tokenizer", str(spec),
                     "--workers", "1", "--no-progress"]) == 0
    a, b = open_shards(tmp_path / "bare"), open_shards(tmp_path / "dir")
    assert len(a) == len(b) > 0
    for i in range(len(a)):
        assert a[i]["input_ids"].tolist() == b[i]["input_ids"].tolist()
        assert a[i]["input_ids"][0] == 1 and a[i]["input_ids"][-1] == 2  # <s> ... </s>


def sft_files(shared_data: Path) -> list[Path]:
    return sorted(p for p in (shared_data / "sft").iterdir() if "dpo" not in p.name)


def test_sft_over_every_conversation_file_with_parity(shared_data, tokenizer_dirs, tmp_path, capsys):
    out = tmp_path / "out"
    template = shared_data / "chat_templates" / "ortx_qwen2.5_tokenizer_config.json"
    code = main(["sft", *map(str, sft_files(shared_data)), "--out", str(out), "--tokenizer",
                 str(tokenizer_dirs["qwen2"]), "--chat-template", str(template), "--workers", "2", "--no-progress"])
    assert code == 0, capsys.readouterr().err
    m = json.loads((out / "manifest.json").read_text())
    c = m["counts"]
    assert c["balanced"] and c["kept"] > 9000 and sum(c["rejected"].values()) < 0.01 * c["input"]
    assert {Path(i["path"]).name for i in m["inputs"]} == {p.name for p in sft_files(shared_data)}
    parity = m["report"]["parity"]
    assert parity["checked"] >= 100 and "unavailable" not in parity
    assert len(tk.read_rejects(out)) == sum(c["rejected"].values())
    shards = open_shards(out)
    assert shards.has_mask and len(shards) == c["kept"] and verify_shards(out) == []


def test_inspect_sends_every_conversation_file_to_sft(shared_data, capsys):
    assert main(["inspect", "--json", str(shared_data / "sft")]) == 0
    routes = {Path(r["path"]).name: r["kind"] for r in json.loads(capsys.readouterr().out)}
    assert routes.keys() == {p.name for p in (shared_data / "sft").iterdir()}
    for name, kind in routes.items():
        assert kind == ("preference" if "dpo" in name else "sft"), name
