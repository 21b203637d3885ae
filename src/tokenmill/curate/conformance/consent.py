"""Conformance vectors for the consent steps (``consent.jsonl``): ``robots``, ``tdm_optout``, ``license`` with
detection and ``machine_text``. Rewrite the file with ``python -m tokenmill.curate.conformance.consent``.

Unlike the heuristic vectors, a consent vector is a whole document: ``doc`` holds ``url``, ``text``,
``license`` and ``meta`` (the JSON object a WARC response leaves there: ``http_headers``, ``html_head``,
``html_links``, ``date``), and ``files`` the snapshot the step reads (file name -> content; every file's
modification time is 2024-01-01T00:00:00Z), passed as the ``snapshot`` parameter when ``params`` names
``"snapshot": "$SNAPSHOT"``. ``scores`` are every statistic (ledger column ``<step>.<name>``), ``decision`` the
rule that removes the document, or null. A case whose decision is not the one it was built for stops the
build, naming it.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from tokenmill.steps.cascade import as_numpy
from tokenmill.steps.registry import step_class

VECTORS = "consent.jsonl"
SNAPSHOT_TIME = 1704067200  # 2024-01-01T00:00:00Z
SNAP = "$SNAPSHOT"

ROBOTS = {"example.com.txt": "User-agent: GPTBot\nDisallow: /\n\nUser-agent: *\nDisallow: /private/\nAllow: /private/ok$\n",
          "shop.example.txt": "User-agent: CCBot\nUser-agent: Google-Extended\nDisallow: /*.html$\n",
          "open.example.txt": "User-agent: *\nDisallow:\n",
          "broken.example.txt": "<!DOCTYPE html><html><body>Not found</body></html>",
          "xn--bcher-kva.example.txt": "User-agent: *\nDisallow: /\n",  # bücher.example
          "MÜNCHEN.EXAMPLE.TXT": "User-agent: *\nDisallow: /\n"}
TDMREP = {"rep.example.tdmrep.json": json.dumps([{"location": "/free/*", "tdm-reservation": 0},
                                                {"location": "/*", "tdm-reservation": 1,
                                                 "tdm-policy": "https://rep.example/policy.json"}])}


def _doc(url: str | None = None, text: str = "Some text.", meta: dict | None = None, license: str | None = None) -> dict:
    return {"url": url, "text": text, "license": license, "meta": meta}


def robots_cases() -> Iterator[tuple]:
    p = {"snapshot": SNAP}
    yield "robots", p, _doc("https://example.com/a"), "disallowed", "GPTBot's own group disallows everything"
    yield "robots", p, _doc("https://www.example.com/a"), "disallowed", "www. is the same host"
    yield "robots", {**p, "agents": ["CCBot"]}, _doc("https://example.com/a"), None, "only CCBot asked: allowed"
    yield "robots", {**p, "agents": ["CCBot"]}, _doc("https://example.com/private/x"), "disallowed", "* group"
    yield "robots", {**p, "agents": ["CCBot"]}, _doc("https://example.com/private/ok"), None, "longer Allow wins"
    yield "robots", p, _doc("https://shop.example/p/1.html"), "disallowed", "wildcard and $ (CCBot's group)"
    yield "robots", p, _doc("https://shop.example/p/1.html?x=1"), None, "$ anchors the end: query breaks it"
    yield "robots", p, _doc("https://open.example/anything"), None, "empty Disallow allows all"
    yield "robots", p, _doc("https://nowhere.example/"), None, "no robots.txt: kept and counted"
    yield "robots", {**p, "missing": "remove"}, _doc("https://nowhere.example/"), "no_robots", "policy remove"
    yield "robots", p, _doc("https://broken.example/"), "unreadable", "an HTML page served as robots.txt"
    yield "robots", {**p, "unreadable": "keep"}, _doc("https://broken.example/"), None, "policy keep"
    yield "robots", p, _doc(None), None, "no URL"
    yield "robots", p, _doc("not a url"), None, "garbage URL: no host (bad_url)"
    yield "robots", p, _doc("example.com/a"), "disallowed", "no scheme: read as https://example.com/a"
    yield "robots", p, _doc("//shop.example/p/1.html"), "disallowed", "scheme-relative URL"
    yield "robots", p, _doc("https://bücher.example/x"), "disallowed", "IDN host, punycode file name"
    yield "robots", p, _doc("https://xn--mnchen-3ya.example/x"), "disallowed", "punycode host, IDN file name"


def tdm_cases() -> Iterator[tuple]:
    t = "tdm_optout"
    yield t, {}, _doc(meta={"http_headers": {"tdm-reservation": "1", "tdm-policy": "http://localhost/test/policy.json"}}), \
        "reserved", "TDMRep header with a policy"
    yield t, {}, _doc(meta={"http_headers": {"tdm-reservation": "0"}, "html_head": '<meta name="robots" content="noai">'}), \
        None, "an explicit 0 in the header stops the search"
    yield t, {}, _doc(meta={"http_headers": {"x-robots-tag": "noai"}}), "reserved", "X-Robots-Tag: noai"
    yield t, {}, _doc(meta={"http_headers": {"x-robots-tag": "noimageai"}}), None, "images only"
    yield t, {}, _doc(meta={"http_headers": {"x-robots-tag": "demobot: noai, examplebot: noai, spawningbot: all"}}), \
        None, "noai for agents not asked"
    yield t, {}, _doc(meta={"http_headers": {"x-robots-tag": "GPTBot: noai"}}), "reserved", "noai for GPTBot"
    yield t, {}, _doc(meta={"html_head": '<meta name="tdm-reservation" content="1">'}), "reserved", "meta tdm"
    yield t, {}, _doc(meta={"html_head": "<meta content='noindex, noai' name='robots'>"}), "reserved", "meta robots"
    yield t, {}, _doc(meta={"html_head": '<meta name="robots" content="noindex">'}), None, "noindex is not noai"
    yield t, {"snapshot": SNAP}, _doc("https://rep.example/news/1"), "reserved", "tdmrep.json rule"
    yield t, {"snapshot": SNAP}, _doc("https://rep.example/free/1"), None, "tdmrep.json first rule: 0"
    yield t, {"snapshot": SNAP}, _doc("rep.example/news/1"), "reserved", "tdmrep.json rule, URL without a scheme"
    yield t, {"reserved": "keep"}, _doc(meta={"http_headers": {"tdm-reservation": "1"}}), None, "record only"
    yield t, {}, _doc(), None, "no meta at all"


PYTHON_BLOG = '<a rel="license" href="http://creativecommons.org/licenses/by-nc-sa/3.0/">'


def license_cases() -> Iterator[tuple]:
    d = {"detect": True}
    yield "license", d, _doc(meta={"html_links": [{"tag": PYTHON_BLOG, "before": "<p>"}]}), "not_allowed", "rel=license NC"
    wiki = '<link rel="license" href="//creativecommons.org/licenses/by-sa/3.0/"/>'
    yield "license", d, _doc(meta={"html_links": [{"tag": wiki, "before": "<head>"}]}), None, "by-sa-3.0 is allowed"
    yield "license", d, _doc(meta={"html_links": [{"tag": '<a href="https://creativecommons.org/licenses/by-nc/2.0/">',
                                                   "before": "Cider and Ice. Foto: "}]}), "unknown_license", "photo credit"
    yield "license", d, _doc(text="Text is licensed under a Creative Commons Attribution 4.0 International License."), \
        None, "badge text"
    yield "license", d, _doc(text="# SPDX-License-Identifier: GPL-3.0-only\nimport os"), "not_allowed", "SPDX id"
    yield "license", d, _doc(text="CC BY-NC 4.0", license="MIT"), None, "the field wins"
    yield "license", d, _doc(text="send it cc by email"), "unknown_license", "lowercase without a version"
    yield "license", {**d, "unknown": "keep"}, _doc(text="no licence here"), None, "unknown kept"


def machine_text_cases() -> Iterator[tuple]:
    m = "machine_text"
    yield m, {}, _doc(text="As an AI language model, I cannot browse the internet."), "machine_written", "boilerplate"
    yield m, {}, _doc(text="Certainly! Here’s a summary. I hope this helps!"), "machine_written", "curly apostrophe"
    yield m, {}, _doc(text="We delve into the rich tapestry of history, showcasing meticulous craft."), \
        "machine_written", "over-used words"
    yield m, {}, _doc(text="The cat sat on the mat and the dog slept by the fire all afternoon."), None, "plain prose"
    yield m, {}, _doc(text="A robust and comprehensive plan for the town's crucial bridge repairs was agreed on " * 3), \
        None, "common words used often stay under"
    yield m, {}, _doc(text="It's important to note that the bridge closes at nine."), None, "a hedge people write too"
    yield m, {}, _doc(text="We delve into it. " + "The cat sat on the mat by the fire. " * 40 + "A tapestry hung there. "
                      + "The dog slept. " * 40 + "It was meticulous."), None, "rare words pages apart"
    yield m, {"record_only": True}, _doc(text="As an AI language model, I can't."), None, "record only"
    yield m, {"threshold": 0.99}, _doc(text="Certainly! Here's a summary."), None, "a high threshold"


def all_cases() -> Iterator[tuple]:
    yield from robots_cases()
    yield from tdm_cases()
    yield from license_cases()
    yield from machine_text_cases()


def write_snapshot(root: Path) -> str:
    for name, text in {**ROBOTS, **TDMREP}.items():
        (root / name).write_text(text, encoding="utf-8")
        os.utime(root / name, (SNAPSHOT_TIME, SNAPSHOT_TIME))
    return str(root)


def _plain(value: Any) -> Any:
    value = value.item() if isinstance(value, np.generic) else value
    return round(value, 12) if isinstance(value, float) else value


def score_doc(step_name: str, params: dict, doc: dict, snapshot: str) -> dict:
    """One document through one step: ``{"scores", "decision"}`` as a vector records them."""
    params = {k: snapshot if v == SNAP else v for k, v in params.items()}
    step = step_class(step_name)(**params)
    meta = None if doc.get("meta") is None else json.dumps(doc["meta"])
    batch = pa.record_batch({"id": ["0"], "text": pa.array([doc.get("text")], pa.large_string()),
                             "url": pa.array([doc.get("url")], pa.string()),
                             "license": pa.array([doc.get("license")], pa.string()), "meta": pa.array([meta], pa.string())})
    scored = step.score(batch)
    scores = {k: as_numpy(v) for k, v in scored.scores.items()}
    return {"scores": {k: _plain(v[0]) for k, v in sorted(scores.items())}, "decision": step.decide(scores)[0]}


def vectors() -> Iterator[dict]:
    with resources.files(__spec__.parent).joinpath(VECTORS).open("r", encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def build(snapshot: str) -> tuple[list[dict], list[str]]:
    rows, problems, counters = [], [], {}
    for step, params, doc, want, note in all_cases():
        counters[step] = counters.get(step, 0) + 1
        got = score_doc(step, params, doc, snapshot)
        row = {"id": f"{step}-{counters[step]:03d}", "step": step, "params": params, "doc": doc, "note": note, **got}
        if SNAP in params.values():
            row["files"] = {**ROBOTS, **TDMREP}
        if got["decision"] != want:
            problems.append(f"{row['id']} ({note}): built for {want!r}, step decides {got['decision']!r} {got['scores']}")
        rows.append(row)
    return rows, problems


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        rows, problems = build(write_snapshot(Path(tmp)))
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print(f"{len(problems)} case(s) disagree; {VECTORS} not written", file=sys.stderr)
        return 1
    out = Path(__file__).with_name(VECTORS)
    out.write_text("".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows), encoding="utf-8")
    print(f"wrote {len(rows)} vectors to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
