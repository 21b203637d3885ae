"""Decide what kind of data a sample of records is: pretrain, sft, preference or unknown.

Rules, in order (the first that applies decides; no file names are consulted):

1. **Preference** - fields named with ``chosen`` and ``rejected``; pairwise ``response_j``/``response_k``;
   KTO's ``prompt``/``completion`` with a boolean ``label`` (``route/shapes.py``).
2. **Conversations** - a field holding lists of turn dicts in at least half the records
   (``sharegpt`` when turns are ``from``/``value``, else ``messages``).
3. **Alpaca** - ``instruction`` + ``output``-like string fields.
4. **Named pairs** - a prompt-like field (``prompt``, ``question``, ``problem``, ``query``, ``input``...) and
   a response-like field (``response``, ``completion``, ``answer``, ``solution``, ``output``, ``content``...);
   the longest response-like field wins (``solution`` over a short final ``answer``).
5. **Named documents** - a ``text``/``content``/``body``/``document`` string field (``unknown`` when it is
   short and a ``label`` with few values sits beside it: classification data).
6. **Content pairs** - unknown names: a field of questions or requests (60 % of values ask with ``?`` or open
   with a question word or imperative verb) beside a field at least half as long.
7. **Content documents** - unknown names: the longest string field averaging 200+ characters.
8. Otherwise **unknown** (numeric tables, labels, nested data without free text).

Then the content is checked against the schema, record by record:

- A document column whose records hold 2+ chat turn markers (ChatML, ``[INST]``, Llama-3 headers,
  ``### Instruction:``/``### Response:``, alternating ``Human:``/``Assistant:`` lines) in at least
  30 % of the records is ``sft`` (style ``rendered_text``): SFT data in a pretraining costume.
  Turns marked only by ``Q:``/``A:`` or ``Question:``/``Answer:`` lines are a transcript only when nothing says
  document: prose before the first question (an FAQ page, an interview), or one question whose answer holds
  code, runs long, or sits beside corpus metadata columns (``meta``, ``stats``, ``url``...: a StackExchange dump
  as RedPajama ships it). Such records are counted apart (``qa_documents``), lower the confidence (each agrees
  by ``signs / (signs + 1)``) and are named in a warning.
- A ``label`` column beside long documents is named in a warning (the labels go to each document's ``meta``).
- Conversation records whose prompt side is empty in at least half the records while the response is a
  web page or a long document are web text in an SFT costume: ``pretrain`` (text = the response field)
  for pair and Alpaca layouts, ``unknown`` for turn lists.

Confidence is the share of sampled records that agree with the decision (non-empty document, prompt and
response both present, transcript markers found ...), times 0.85 when the schema came from content
statistics alone rather than from field names.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from tokenmill.route import schema as sch
from tokenmill.route.content import looks_like_web_page, qa_layout, transcript_markers, turn_count
from tokenmill.route.messages import find_messages
from tokenmill.route.profile import CONTENT_KEYS, ROLE_KEYS, Column, profile
from tokenmill.route.qa import QaCount, corpus_metadata
from tokenmill.route.shapes import classification_warning, kto_schema, label_warning, pairwise_schema

TRANSCRIPT_SHARE = 0.3  # share of records with >= MIN_TURNS markers that makes a text column SFT
MIN_TURNS = 2
EMPTY_PROMPT_SHARE = 0.5  # share of empty prompts that makes "SFT" records not SFT
DOCUMENT_CHARS = 500  # a response at least this long with no prompt reads as a document
CONTENT_ONLY = 0.85  # confidence factor when the schema was inferred from content, not names

Result = tuple[str, float, dict, dict, list[str]]


def classify_rows(rows: list[dict[str, Any]], *, format: str) -> Result:
    """(kind, confidence, evidence, schema, warnings) for a sample of records of one input."""
    rows = [r for r in rows if isinstance(r, dict)]
    if not rows:
        return "unknown", 0.0, {"records": 0}, {"record": None, "columns": []}, ["no readable records in the sample"]
    cols = profile(rows)
    evidence = {"records": len(rows), "format": format, "columns": {k: c.present for k, c in cols.items()}}
    preference = sch.preference_schema(cols) or pairwise_schema(cols)
    if preference:
        return _preference(rows, preference, evidence)
    kto = kto_schema(rows, cols)
    if kto:
        return _kto(rows, kto, evidence)
    layout = find_messages(rows, cols)
    if layout and layout.fit * 2 >= len(rows):
        named = layout.role_key in ROLE_KEYS and layout.content_key in CONTENT_KEYS
        return _conversations(rows, sch.messages_schema(layout, cols, rows), cols, evidence, named=named)
    named = sch.alpaca_schema(cols) or sch.pair_schema(cols, len(rows))
    if named:
        return _conversations(rows, named, cols, evidence, named=True)
    document, by_name = sch.document_schema(cols, len(rows))
    if document and by_name:
        labelled = classification_warning(rows, cols, document["text"])
        if labelled:
            evidence.update(schema_from="names", classification=True)
            return "unknown", 0.9, evidence, document, [labelled]
        return _documents(rows, document, cols, evidence, named=True)
    pair = sch.content_pair_schema(rows, cols)
    if pair:
        return _conversations(rows, pair, cols, evidence, named=False)
    if document:
        return _documents(rows, document, cols, evidence, named=False)
    return _unknown(rows, cols, evidence)


def _preference(rows: list[dict], schema: dict, evidence: dict) -> Result:
    fit = sum(bool(r.get(schema["chosen"])) and bool(r.get(schema["rejected"])) for r in rows)
    evidence.update(schema_from="names", fit=fit)
    warnings = [] if fit == len(rows) else [f"{len(rows) - fit} of {len(rows)} records lack a chosen or rejected value"]
    return "preference", _share(fit, rows), evidence, schema, warnings


def _kto(rows: list[dict], schema: dict, evidence: dict) -> Result:
    bad = sum(r.get("label") is False for r in rows)
    evidence.update(schema_from="names", undesired=bad)
    warning = (f"KTO-style unpaired preference data (prompt, completion, boolean label): {bad} of {len(rows)} "
               "sampled completions are labelled false, i.e. what the model must not say; never SFT data")
    return "preference", 1.0, evidence, schema, [warning]


def _documents(rows: list[dict], schema: dict, cols: dict[str, Column], evidence: dict, *, named: bool) -> Result:
    text = schema["text"]
    meta = corpus_metadata(cols, text)
    fit, transcripts, markers, qa = 0, 0, Counter(), QaCount()
    for row in rows:
        value = row.get(text)
        if not isinstance(value, str) or not value.strip():
            continue
        fit += 1
        found = transcript_markers(value)
        if turn_count(found) < MIN_TURNS:
            continue
        layout = qa_layout(value)
        signs = layout.signs(corpus_meta=bool(meta)) if layout else []
        if signs:
            qa.add(signs)
            continue
        transcripts += 1
        markers.update(found.keys())
    evidence.update(
        schema_from="names" if named else "content", fit=fit, transcripts=transcripts, markers=dict(markers),
    )
    if qa.records:
        evidence.update(qa_documents=qa.records, qa_document_signs=dict(qa.signs))
    n = len(rows)
    notes = ([qa.warning(n, meta)] if qa.records else []) + [w for w in (label_warning(rows, cols, text),) if w]
    if transcripts >= TRANSCRIPT_SHARE * n:
        found = sorted(markers, key=lambda m: (-markers[m], m))
        warning = (
            f"text column {text!r} holds chat transcripts in {transcripts} of {n} records (markers: "
            f"{', '.join(found)}): SFT data in a pretraining costume; parse it into conversations for the "
            "SFT track instead of training on the rendered text"
        )
        schema = sch.rendered_text_schema(text, found, cols)
        return "sft", _share(transcripts, rows), evidence, schema, [warning, *notes]
    warnings = _document_warnings(text, fit, transcripts, n) + notes
    factor = 1.0 if named else CONTENT_ONLY
    agree = fit - transcripts - qa.records + qa.agreement
    return "pretrain", round(agree / n * factor, 3), evidence, schema, warnings


def _document_warnings(text: str, fit: int, transcripts: int, n: int) -> list[str]:
    warnings = []
    if fit < n:
        warnings.append(f"{n - fit} of {n} records have an empty or missing {text!r}")
    if transcripts:
        warnings.append(
            f"{transcripts} of {n} documents look like chat transcripts (below the "
            f"{TRANSCRIPT_SHARE:.0%} that would make the file SFT)"
        )
    return warnings


def _conversations(rows: list[dict], schema: dict, cols: dict[str, Column], evidence: dict, *, named: bool) -> Result:
    counts = _conversation_counts(rows, schema)
    evidence.update(schema_from="names" if named else "content", **counts)
    n = len(rows)
    if counts["empty_prompt"] >= EMPTY_PROMPT_SHARE * n and counts["document_responses"] * 2 >= n:
        return _web_responses(rows, schema, cols, evidence, counts)
    warnings = []
    if counts["agree"] < n:
        warnings.append(f"{n - counts['agree']} of {n} records lack a non-empty prompt or response")
    if counts["rendered_prompts"] * 2 >= n:
        warnings.append(
            f"the prompt side already holds a rendered prompt template in {counts['rendered_prompts']} "
            f"of {n} records (### Instruction: / chat tags); the template text becomes part of the "
            "user turn"
        )
    factor = 1.0 if named else CONTENT_ONLY
    return "sft", round(_share(counts["agree"], rows) * factor, 3), evidence, schema, warnings


def _conversation_counts(rows: list[dict], schema: dict) -> dict[str, int]:
    counts = Counter(fit=0, agree=0, empty_prompt=0, document_responses=0, web_pages=0, rendered_prompts=0)
    for row in rows:
        texts = sch.record_texts(row, schema)
        if texts is None:
            continue
        prompt, response = texts
        counts["fit"] += 1
        if not prompt.strip():
            web = looks_like_web_page(response)
            counts["empty_prompt"] += 1
            counts["web_pages"] += web
            counts["document_responses"] += web or len(response) >= DOCUMENT_CHARS
        elif response.strip():
            counts["agree"] += 1
        counts["rendered_prompts"] += turn_count(transcript_markers(prompt)) >= 1
    return dict(counts)


def _web_responses(rows: list[dict], schema: dict, cols: dict[str, Column], evidence: dict, counts: dict) -> Result:
    n, docs = len(rows), counts["document_responses"]
    response = schema.get("response") or schema.get("output")
    warning = (
        f"responses look like whole web pages with empty prompts: {counts['empty_prompt']} of {n} records "
        f"have no prompt, {docs} of them carry a long document ({counts['web_pages']} with web boilerplate); "
        "this is web text in an SFT costume"
    )
    if response is None:
        return "unknown", _share(docs, rows), evidence, schema, [warning + "; it fits neither track as it is"]
    warning += f"; the pretrain track reads {response!r} as the document text"
    return "pretrain", _share(docs, rows), evidence, sch.document_mapping(response, cols), [warning]


def _unknown(rows: list[dict], cols: dict[str, Column], evidence: dict) -> Result:
    no_text = sum(not any(isinstance(v, str) and len(v) >= 20 for v in r.values()) for r in rows)
    evidence.update(schema_from="none", without_free_text=no_text)
    warning = f"no text, conversation or preference fields found among {sorted(map(str, cols))}"
    return "unknown", _share(no_text, rows), evidence, {"record": None, "columns": list(cols)}, [warning]


def _share(k: int, rows: list) -> float:
    return round(k / len(rows), 3) if rows else 0.0
