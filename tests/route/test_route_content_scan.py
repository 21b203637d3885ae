"""The one-pass speaker-line scan and the tag prefilters give exactly what one scan per family gives."""

from __future__ import annotations

import random

from tokenmill.route import content


def _per_family(text: str) -> dict[str, list[tuple[int, str]]]:
    """Each family's matches with its own pattern, as the router used to scan (one pass per family)."""
    return {name: [(m.start(), m.group(1)) for m in pattern.finditer(text)] for name, pattern in content._PAIR_LINE.items()}


def _one_pass(text: str) -> dict[str, list[tuple[int, str]]]:
    lines = list(content._ANY_PAIR_LINE.finditer(text))
    return {name: [(m.start(), m.group(1)) for m in lines if content._PAIR_WORD[name].fullmatch(m.group(1))]
            for name in content.SPEAKER_PAIRS}


def _texts(n: int, seed: int = 0) -> list[str]:
    words = sorted({w for u, a in content.SPEAKER_PAIRS.values() for w in (*u, *a)})
    words += ["answers", "qa", "clients", "in", "out", "assist", "Q&A", "user", "assistant"]
    pieces = [" ", "\t", ":", "：", "\n", "\r\n", " :", "\t：", "x", "-", "  "]
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(1, 30)):
            w = rng.choice(words)
            w = rng.choice([w, w.upper(), w.title(), w.swapcase()])
            parts += [rng.choice(pieces) if rng.random() < 0.5 else "", w, rng.choice(pieces), rng.choice(pieces)]
        out.append("".join(parts))
    return out


def test_one_pass_speaker_scan_equals_one_scan_per_family():
    for text in _texts(3000):
        assert _one_pass(text) == _per_family(text), text


def test_tag_prefilters_only_skip_texts_without_a_match():
    samples = _texts(200, seed=1) + [
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nhello<|im_end|>",
        "[INST] hi [/INST] hello", "<|user|>\nhi<|assistant|>\nhello", "<｜User｜>hi<｜Assistant｜>hello",
        "### Instruction:\ndo it\n\n### Response:\ndone", "#### human : x", "USER: hi ASSISTANT: hello</s>",
        "<start_of_turn>user\nhi<end_of_turn>", "<|start_header_id|>user<|end_header_id|>",
        "<user>hi</user><assistant>hello</assistant>", "plain prose with a colon: and ## a heading",
    ]
    for text in samples:
        for name, pattern in content.TAG_MARKERS.items():
            if pattern.search(text):
                assert any(needle in text for needle in content._TAG_NEEDS[name]), (name, text)
        if content.XML_TURNS.search(text):
            assert "</" in text
    assert content.transcript_markers("USER: hi ASSISTANT: hello</s>") == {"vicuna": 2}
