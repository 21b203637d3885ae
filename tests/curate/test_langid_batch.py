"""The batched language identifier gives py3langid's own labels (its per-byte loop is the oracle)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from curatekit import ENGLISH, OTHER

EDGE = ["", "   ", "12345 678", "ALL CAPS ENGLISH TEXT ABOUT THE WEATHER", "日本語の文章です。今日は晴れです。",
        "Это предложение на русском языке.", "مرحبا بكم في هذا الموقع", "a", "\U0001F600 emoji only \u200b",
        "mixed English und Deutsch in einem Satz, with words from both", "x" * 3000]


def _oracle():
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)


def _agree(texts):
    from tokenmill.curate.filters.langid_batch import BatchIdentifier

    ident = _oracle()
    want = [ident.classify(t) for t in texts]
    labels, probs = BatchIdentifier(ident, chunk_bytes=2000).classify(texts)  # small chunks: several passes
    assert labels == [w[0] for w in want]
    assert np.allclose(probs, [w[1] for w in want], atol=1e-4)


def test_batch_labels_equal_py3langid():
    _agree(ENGLISH + OTHER + EDGE)


def test_batch_labels_equal_py3langid_on_a_restricted_model():
    from tokenmill.curate.filters.langid_batch import BatchIdentifier

    ident = _oracle()
    ident.set_languages(["en", "de", "fr", "no", "nn", "da"])
    texts = ENGLISH + OTHER + ["Været var fint i dag, og vi gikk en lang tur langs elva."]
    labels, _ = BatchIdentifier(ident).classify(texts)
    assert labels == [ident.classify(t)[0] for t in texts]


def test_batch_labels_equal_py3langid_on_real_web_documents(shared_data):
    path = shared_data / "pretrain" / "dolma_cc_en_head-0174.jsonl"
    texts = [json.loads(line)["text"][:4000] for line in path.open()][:60]
    if not texts:
        pytest.skip(f"{path} holds no documents")
    _agree(texts)


def test_exp_is_within_one_float32_step_of_the_c_library():
    import math

    from tokenmill.curate.filters.langid_batch import exp_nonpositive

    x = np.concatenate([np.linspace(-120, 0, 400_001, dtype=np.float32), np.float32([0.0, -0.0, -1e-30, -87.3, -103.9])])
    got = exp_nonpositive(x)
    want = np.array([math.exp(float(v)) for v in x]).astype(np.float32)
    steps = np.abs(got.view(np.int32).astype(np.int64) - want.view(np.int32).astype(np.int64))
    assert steps.max() <= 1 and (steps == 0).mean() > 0.999
    assert set(got[x == 0].tolist()) == {1.0} and got[x < -104].max(initial=0) == 0


def test_log1p_of_counts_is_the_c_library_log1p():
    import math

    from tokenmill.curate.filters.langid_batch import log1p_counts

    counts = np.array([0, 1, 2, 3, 4095, 4096, 70_000, 1], dtype=np.int64)
    assert log1p_counts(counts).tolist() == [np.float32(math.log1p(c)) for c in counts.tolist()]


_DIGEST = """
import hashlib, json, sys
from py3langid.langid import MODEL_FILE, LanguageIdentifier
from tokenmill.curate.filters.langid_batch import BatchIdentifier
texts = json.loads(sys.stdin.read())
labels, probs = BatchIdentifier(LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)).classify(texts)
print(hashlib.sha256(json.dumps(labels).encode() + probs.tobytes()).hexdigest())
"""


def _avx2() -> bool:
    import platform

    try:
        return platform.machine() in ("x86_64", "AMD64") and " avx2" in open("/proc/cpuinfo").read()
    except OSError:
        return False


@pytest.mark.skipif(not _avx2(), reason="the CPU variants below are x86-64 ones that need AVX2")
def test_probability_bits_are_the_same_on_every_cpu_path():
    """The ledger's language scores must not depend on the machine: numpy's SIMD dispatch levels (AVX-512,
    AVX2, the SSE baseline) and OpenBLAS's CPU-specific kernels all give the same bits."""
    import os
    import random
    import subprocess
    import sys

    rng = random.Random(0)  # long texts of many distinct byte n-grams, where the order of the sums shows
    syllables = ["ka", "ter", "mon", "di", "ous", "ing", "the", "sch", "ei", "ung", "qu", "é", "ß", "tion", "ver", "al"]
    texts = ENGLISH + OTHER + EDGE + [" ".join("".join(rng.choices(syllables, k=rng.randint(1, 4)))
                                               for _ in range(rng.randint(50, 600))) for _ in range(60)]
    variants = [{}, {"OPENBLAS_CORETYPE": "Zen"}, {"NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR"},
                {"NPY_DISABLE_CPU_FEATURES": "X86_V3 X86_V4 AVX512_ICL AVX512_SPR"},
                {"OPENBLAS_CORETYPE": "Haswell"}, {"OPENBLAS_CORETYPE": "Prescott"}]
    digests = []
    for extra in variants:
        env = {**os.environ, **extra}
        done = subprocess.run([sys.executable, "-c", _DIGEST], input=json.dumps(texts), env=env, text=True,
                              capture_output=True, timeout=300)
        assert done.returncode == 0, (extra, done.stderr[-2000:])
        digests.append(done.stdout.strip())
    assert len(set(digests)) == 1, dict(zip(map(str, variants), digests))
