"""Real-data tier: tokenmill's heuristic steps decide like datatrove's filters (one filter at a time, the
same documents) on at least 99% of real web documents, per filter, and on the conformance vectors built with
the default parameters. Deliberate differences are listed in docs/curation.md."""

from __future__ import annotations

import gzip
import json

import pyarrow as pa
import pytest

from tokenmill.curate.conformance import vectors
from tokenmill.steps.registry import step_class

WEB_FILES = ["pretrain/dolma_cc_en_head-0091.jsonl", "pretrain/dolma_cc_en_head-0174.jsonl",
             "pretrain/dclm_quality_agreement_data.jsonl", "pretrain/llamafactory_c4_demo.jsonl",
             "pretrain/dolma_provided_documents_000.json.gz",
             "curation/cc_text/dolma_CC-MAIN-20190717121559-20190717143559-00140.jsonl.gz"]
STRIDE = 5  # every 5th document: 262 of 1,308, to stay well under a minute with spaCy
FILTERS = {"gopher_quality": "GopherQualityFilter", "gopher_repetition": "GopherRepetitionFilter",
           "c4": "C4QualityFilter", "fineweb": "FineWebQualityFilter"}


def _web_texts(root) -> list[str]:
    texts = []
    for name in WEB_FILES:
        path = root / name
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as fh:
            texts.extend(json.loads(line)["text"] for line in fh if line.strip())
    return texts[::STRIDE]


def _datatrove_decisions(texts: list[str]) -> dict[str, list[bool]]:
    """Per filter: removed or not, each filter seeing every document (the word splitting is cached per text)."""
    pytest.importorskip("spacy", reason="datatrove's default English word tokenizer needs spacy")
    filters = pytest.importorskip("datatrove.pipeline.filters", reason="needs datatrove (pip install 'tokenmill[bench]')")
    from datatrove.data import Document

    made = {name: getattr(filters, cls)() for name, cls in FILTERS.items()}
    out = {name: [] for name in FILTERS}
    for i, text in enumerate(texts):
        for name, f in made.items():
            out[name].append(f.filter(Document(text=text, id=str(i))) is not True)
    return out


def _ours(name: str, texts: list[str]) -> list[bool]:
    step = step_class(name)()
    batch = pa.record_batch({"id": pa.array([str(i) for i in range(len(texts))]),
                             "text": pa.array(texts, pa.large_string())})
    return [d is not None for d in step.decide(step.score(batch).scores)]


@pytest.fixture(scope="module")
def web(shared_data):
    texts = _web_texts(shared_data)
    return texts, _datatrove_decisions(texts)


@pytest.mark.realdata
@pytest.mark.parametrize("name", list(FILTERS))
def test_decisions_agree_with_datatrove_on_real_web_documents(web, name):
    texts, reference = web
    ours = _ours(name, texts)
    agree = sum(a == b for a, b in zip(ours, reference[name])) / len(texts)
    removed = sum(reference[name])
    print(f"{name}: {agree:.2%} of {len(texts)} documents agree (datatrove removes {removed})")
    assert 0 < removed < len(texts)  # the sample exercises the filter both ways
    assert agree >= 0.99


@pytest.mark.realdata
def test_default_vectors_agree_with_datatrove(shared_data):
    cases = [v for v in vectors() if v["step"] in FILTERS and not v["params"] and v["text"] is not None]
    texts = [v["text"] for v in cases]
    reference = _datatrove_decisions(texts)
    disagree = [v["id"] for i, v in enumerate(cases)
                if (v["decision"] is not None) != reference[v["step"]][i]]
    print(f"{len(cases) - len(disagree)} of {len(cases)} default-parameter vectors agree; differ: {disagree}")
    assert disagree == []
