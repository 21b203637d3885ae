"""Every ``python`` block of docs/loader.md runs as written, on small shards with a tiny model; the collator
names ``remove_unused_columns=False`` when the Trainer dropped the mask."""

from __future__ import annotations

import re
import sys
import warnings
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sft"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "track"))
import chatkit
import trackkit as tk

from tokenmill.errors import ConfigError
from tokenmill.loader import PackedCollator, PackedDataset
from tokenmill.pretrain import run_pretrain
from tokenmill.sft.run import run_sft

DOC = Path(__file__).resolve().parents[2] / "docs" / "loader.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    root = tmp_path_factory.mktemp("loaderdocs")
    tok_dir = chatkit.build_tokenizer_dir(root / "tok")
    tk.write_chats(root / "chats.jsonl", 80)
    tk.write_docs(root / "docs.jsonl", 300)
    run_sft([str(root / "chats.jsonl")], out=root / "shards" / "sft", tokenizer=str(tok_dir), workers=1,
            verify=0, progress=False)
    run_pretrain([str(root / "docs.jsonl")], out=root / "shards" / "web", tokenizer=str(tok_dir), workers=1,
                 progress=False)
    return root, tok_dir


def tiny_model(vocab: int):
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=2048)
    return transformers.LlamaForCausalLM(config)


def hf_tokenizer(tok_dir: Path):
    tok = chatkit.hf_tokenizer(tok_dir)
    tok.pad_token = tok.eos_token
    return tok


@pytest.fixture(autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_the_doc_has_the_four_ways():
    text = "\n".join(BLOCKS)
    for needle in ("PackedLoader(", "Trainer(", "SFTTrainer(", 'to="hf"'):
        assert needle in text, needle


@pytest.mark.parametrize("k", range(len(BLOCKS)))
def test_doc_block_runs(workdir, monkeypatch, k):
    root, tok_dir = workdir
    if "SFTTrainer" in BLOCKS[k]:
        pytest.importorskip("trl")
        pytest.importorskip("datasets")
    monkeypatch.chdir(root)
    tokenizer = hf_tokenizer(tok_dir)
    namespace = {"model": tiny_model(len(tokenizer)), "tokenizer": tokenizer, "pairs": preference_pairs(tokenizer)}
    before = [p.detach().clone() for p in namespace["model"].parameters()]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exec(compile(BLOCKS[k], f"{DOC.name}[block {k}]", "exec"), namespace)
    # a reader copying the example should not be told that it uses a deprecated option
    deprecated = [str(w.message) for w in caught if issubclass(w.category, (DeprecationWarning, FutureWarning))]
    assert not deprecated, deprecated
    if "dpo_loss(" in BLOCKS[k]:  # the DPO loop trained: a finite loss, and the policy moved off the reference
        assert torch.isfinite(namespace["loss"])
        assert any(not torch.equal(a, b) for a, b in zip(before, namespace["model"].parameters()))


def preference_pairs(tokenizer, n: int = 24) -> list[dict]:
    """Pair dicts tokenized as TRL does: the completion is what prompt+completion adds after the prompt."""
    words = "the river flows past old stone houses while children count boats and birds".split()
    pairs = []
    for i in range(n):
        prompt = " ".join(words[i % 5: i % 5 + 4]) + "?"
        prompt_ids = tokenizer(prompt)["input_ids"]
        pair = {"pair_id": i, "prompt_ids": prompt_ids}
        for side, text in (("chosen", " ".join(words[i % 7:][:3])), ("rejected", words[-1 - i % 4])):
            ids = tokenizer(prompt + " " + text)["input_ids"][len(prompt_ids):] + [tokenizer.eos_token_id]
            pair[f"{side}_ids"], pair[f"{side}_mask"] = ids, [1] * len(ids)
        pairs.append(pair)
    return pairs


def test_collator_names_remove_unused_columns_when_trainer_drops_the_mask(workdir, tmp_path):
    root, tok_dir = workdir
    dataset = PackedDataset(root / "shards" / "sft", seq_len=512, seed=0)
    trainer = transformers.Trainer(
        model=tiny_model(dataset.vocab_size),
        args=transformers.TrainingArguments(output_dir=str(tmp_path), per_device_train_batch_size=2, max_steps=1,
                                            report_to="none"),  # remove_unused_columns left at True
        train_dataset=dataset, data_collator=PackedCollator(pad_id=dataset.pad_id))
    with pytest.raises(ConfigError, match="remove_unused_columns=False"):
        trainer.train()
