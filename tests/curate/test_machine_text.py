"""machine_text on long human text: evidence is counted in the densest page (WINDOW words), not over the whole
document, so a novel that uses a few dozen of the over-used words across 100,000 words is not model-written;
a model-written page inside a long human text still is. Hedges that people write too ("it's important to
note that") weigh as one over-used word, not as assistant boilerplate. Calibrated on real long-form text:
BENCHMARKS.md, "machine_text on human long-form text"."""

from __future__ import annotations

import random

import pyarrow as pa

from tokenmill.curate.consent.machine_text import REFERENCE, MachineText

PAGE_EVIDENCE = "word:delve; word:intricate; word:meticulous; word:showcasing; word:tapestry"
PLAIN = ("the of and to a in that was he she it with as his her had for not but at on be is you my said "
         "which by this have from they all were so there one would their been when what an no more who "
         "if him me them could than some very into time any only did before such upon room house letter").split()


def _human(words: int, markers: list[str], seed: int = 0) -> str:
    """``words`` ordinary words with each of ``markers`` used once, spread evenly (a long text's rare words)."""
    rng = random.Random(seed)
    text = [rng.choice(PLAIN) for _ in range(words)]
    for i, w in enumerate(markers):
        text[(i + 1) * words // (len(markers) + 1)] = w
    return " ".join(text) + "."


def _scores(*texts: str) -> dict:
    return MachineText().score(pa.record_batch({"text": pa.array(list(texts), pa.large_string())})).scores


def test_a_long_human_text_does_not_gather_evidence_by_its_length():
    rare = sorted(REFERENCE)[:40]  # forty distinct over-used words over a novel's length
    s = _scores(_human(120_000, rare))
    assert s["score"][0] < 0.5, s["evidence"][0]
    assert s["markers"][0] <= 1.0  # at most one over-used word in any page


def test_a_model_written_page_inside_a_long_human_text_is_found():
    page = "We delve into the rich tapestry of the valley, showcasing its meticulous and intricate terraces."
    text = _human(20_000, ["moreover", "profound"]) + " " + page + " " + _human(20_000, ["realm"], seed=1)
    s = _scores(text, page)
    assert s["score"][0] >= 0.5 and s["score"][0] == s["score"][1]
    assert s["evidence"].to_pylist() == [PAGE_EVIDENCE] * 2


def test_a_hedge_people_write_too_is_not_enough_alone():
    s = _scores("It's important to note that the ferry leaves at nine. Feel free to ask at the desk.",
                "As an AI language model, I cannot browse the web.")
    assert s["phrases"].tolist() == [0, 1]
    assert s["score"][0] < 0.5 <= s["score"][1]
    assert s["evidence"][0].as_py() == "phrase:feel free to ask; phrase:it's important to note that"

