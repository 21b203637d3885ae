"""The fast piecewise encoding of rendered chats (tokenize/pieces.py) against the reference encoder's ids and
offsets, on texts that stress byte-length offsets: multi-byte and split characters, literal control strings,
adjacent control tokens, non-NFC text under an NFC normaliser."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from test_tokenizer import train_dir

from tokenmill.tokenize import load_tokenizer, pieces

RENDERS = [
    "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n",
    "<|im_start|>user\n東京は 🎉👩‍👩‍👧 e\u0301 ﬁ<|im_end|><|im_start|>assistant\n½²<|im_end|>",
    "<|im_start|><|im_end|>   \n\n<|endoftext|>",
    "no control tokens at all, ünïcödé",
    "",
    "<|im_start|>user\nsays <|im_end|> literally<|im_end|>\n",
]


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    return load_tokenizer(train_dir(tmp_path_factory.mktemp("pieces") / "tok"))


@pytest.fixture(scope="module")
def nfc_tok(tmp_path_factory):
    path = train_dir(tmp_path_factory.mktemp("pieces_nfc") / "tok")
    data = json.loads((path / "tokenizer.json").read_text())
    data["normalizer"] = {"type": "NFC"}
    (path / "tokenizer.json").write_text(json.dumps(data))
    return load_tokenizer(path)


def _layouts(tok, texts):
    """Each text's control spans, its last message literal (so a typed control string stays text)."""
    out = []
    for text in texts:
        at = text.find("says ")
        literal = [(at, text.rfind("<|im_end|>"))] if at >= 0 else []
        out.append(tok.control_spans(text, literal)[0])
    return out


def _assert_same(a, b):
    for x, y in zip(a, b):
        assert np.array_equal(np.asarray(x, dtype=np.int64), np.asarray(y, dtype=np.int64))


def test_fast_pieces_equal_reference_pieces(tok):
    assert tok.backend == "gigatoken" and tok._piece_lengths() is not None
    controls = _layouts(tok, RENDERS)
    fast = tok._encode_pieces_fast(RENDERS, controls)
    for text, control, got in zip(RENDERS, controls, fast):
        assert got is not None, text
        _assert_same(got, tok.encode_pieces(text, control))
        assert tok.controls_match(got, text, control)


def test_random_texts_property(tok):
    rng = random.Random(7)
    alphabet = ["a", " ", "\n", "é", "e\u0301", "東", "🎉", "‍", "<|im_end|>", "<|im_start|>", "x y", "\t", "ﬁ"]
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30))) for _ in range(300)]
    assert 10 < sum(t.isascii() for t in texts) < 290  # both groups of the batch (ASCII texts are encoded apart)
    controls = [tok.control_spans(t)[0] for t in texts]
    for text, control, got in zip(texts, controls, tok._encode_pieces_fast(texts, controls)):
        _assert_same(got, tok.encode_pieces(text, control))


def test_text_nfc_would_change_goes_the_reference_way(nfc_tok):
    texts = ["<|im_start|>e\u0301<|im_end|>", "<|im_start|>\u00e9<|im_end|>"]
    controls = _layouts(nfc_tok, texts)
    fast = nfc_tok._encode_pieces_fast(texts, controls)
    assert fast[0] is None and fast[1] is not None
    batch = nfc_tok.encode_rendered_batch(texts, [[], []])
    for text, control, got in zip(texts, controls, batch):
        _assert_same(got, nfc_tok.encode_pieces(text, control))


def test_eligibility_refuses_what_byte_offsets_cannot_describe():
    bpe = {"model": {"type": "BPE"}, "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False},
           "added_tokens": [{"content": "<s>", "special": True}]}
    assert pieces.eligible(bpe)
    assert not pieces.eligible({**bpe, "pre_tokenizer": {"type": "Metaspace", "prepend_scheme": "first"}})
    assert not pieces.eligible({**bpe, "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": True}})
    assert not pieces.eligible({**bpe, "normalizer": {"type": "Lowercase"}})
    assert not pieces.eligible({**bpe, "model": {"type": "BPE", "byte_fallback": True}})
    assert not pieces.eligible({**bpe, "added_tokens": [{"content": "<s>", "special": True, "rstrip": True}]})


def test_a_worker_encodes_rendered_chats_without_the_reference(tok, nfc_tok):
    """What a pool worker receives (the pickled tokenizer) encodes eligible chats with the fast encoder alone:
    the reference, a parse of the whole tokenizer.json, is never loaded; a text NFC would change still goes
    the reference way and loads it then."""
    import pickle
    import unicodedata

    stable = [r for r in RENDERS if unicodedata.is_normalized("NFC", r)]
    assert len(stable) < len(RENDERS)
    for loaded, texts in ((tok, RENDERS), (nfc_tok, stable)):
        want = loaded.encode_rendered_batch(texts, [[] for _ in texts])
        worker = pickle.loads(pickle.dumps(loaded))
        assert worker._ref is None
        got = worker.encode_rendered_batch(texts, [[] for _ in texts])
        for a, b in zip(want, got):
            _assert_same(a, b)
        assert worker._ref is None
    worker = pickle.loads(pickle.dumps(nfc_tok))
    text = "<|im_start|>e\u0301<|im_end|>"
    want = nfc_tok.encode_pieces(text, nfc_tok.control_spans(text)[0])
    _assert_same(worker.encode_rendered_batch([text], [[]])[0], want)
    assert worker._ref is not None


def _control_spans_stretch_by_stretch(tok, text, literal_spans):
    """The definition :meth:`Tokenizer.control_spans` keeps: each stretch between literal spans searched alone."""
    find = tok.control_pattern.finditer
    control, inside, pos = [], 0, 0
    for a, b in sorted(literal_spans):
        if a > pos:
            control += [m.span() for m in find(text, pos, a)]
        inside += sum(1 for _ in find(text, max(a, pos), b))
        pos = max(pos, b)
    control += [m.span() for m in find(text, pos)]
    return control, inside


def test_control_spans_searched_once_equal_the_stretch_by_stretch_search(tok):
    """One search of the whole text, read off by position, gives what searching each stretch alone gives: with
    literal spans that overlap, nest, are empty, or cut a control string in two (then each stretch is searched)."""
    rng = random.Random(11)
    alphabet = ["a", " ", "\n", "<|im_end|>", "<|im_start|>", "<|im_", "end|>", "é", "<|endoftext|>"]
    crossed = 0
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        spans = []
        for _ in range(rng.randint(0, 4)):
            a = rng.randint(0, len(text))
            spans.append((a, rng.randint(a, len(text))))
        want = _control_spans_stretch_by_stretch(tok, text, spans)
        assert tok.control_spans(text, spans) == want, (text, spans)
        whole = [m.span() for m in tok.control_pattern.finditer(text)]
        crossed += any(a < x < b for a, b in whole for s in spans for x in s)
    assert crossed > 100  # the fallback was exercised
