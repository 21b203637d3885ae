"""Documents/s of the language, url and pii steps on real web text; PII precision on labelled examples.

    PYTHONPATH=src python benchmarks/curate_steps.py [--shared ../shared/data]

Web text: the JSONL documents of ``pretrain/`` (dolma CC heads, C4 demo, DCLM agreement data), URLs as
given (documents without one get a synthetic ``https://example.org/<n>``). One process, one core.
PII: NeMo-Curator's tagged fixtures and Presidio's labelled context sentences (e-mail, IP, phone only),
plus a list of look-alikes (versions, dates, prices, card and social-security numbers) that must stay.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path

import pyarrow as pa

from tokenmill.curate.filters.language import Language
from tokenmill.curate.filters.pii import Pii
from tokenmill.curate.filters.url import UrlFilter

LOOKALIKES = ["version 1.2.3.4 released", "python 3.11.4 and v1.2.3.4 and 1.2.3.4.5", "on 2021-03-04 or 03/04/2021",
              "12.03.2021 and 2021.03.12", "costs $1,234.56 or 1.234,56 EUR or 1,234,567", "ISBN 0306406152",
              "Unix time 1609459200", "at 12:30:45 in std::vector", "card 4095-2609-9393-4932", "ssn 078-05-1126",
              "chapter 10.2.1 and section 3.4", "build 10.0.19041.1 of Windows", "order #12345678 shipped"]


def web_batch(shared: Path) -> pa.RecordBatch:
    texts, urls = [], []
    for p in sorted((shared / "pretrain").glob("*.jsonl")):
        for i, line in enumerate(p.open()):
            row = json.loads(line)
            if isinstance(row.get("text"), str):
                texts.append(row["text"])
                meta = row.get("metadata")
                url = row.get("url") or (meta or {}).get("url") if isinstance(meta, dict) else row.get("url")
                urls.append(url if isinstance(url, str) else f"https://example.org/{p.stem}/{i}")
    return pa.RecordBatch.from_pydict({"text": pa.array(texts, pa.large_string()), "url": urls})


def rss_mb() -> float:
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmRSS:")) / 1024


def rate(step, batch) -> tuple[float, float]:
    before = rss_mb()
    step.setup()
    print(f"<!-- {step.name}: setup adds {rss_mb() - before:.0f} MB RSS -->")
    started = time.perf_counter()
    step.score(batch)
    s = time.perf_counter() - started
    return batch.num_rows / s, batch.column("text").nbytes / s / 1e6


def py3langid_loop_rate(batch, max_chars=10_000) -> float:
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    ident = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    texts = [t[:max_chars].replace("\n", " ") for t in batch.column("text").to_pylist()]
    started = time.perf_counter()
    for t in texts:
        ident.classify(t)
    return len(texts) / (time.perf_counter() - started)


def pii_precision(shared: Path) -> dict[str, int]:
    kinds = {"email": "<EMAIL>", "ip_address": "<IP_ADDRESS>", "phone_number": "<PHONE_NUMBER>"}
    tp = fp = fn = 0
    pii = Pii()
    lines = []
    for path in sorted((shared / "curation" / "pii").glob("nemo_curator_pii_*.txt")):
        lines += path.read_text().splitlines()
    for line in lines:
        expected = re.sub(r"<(\w+)>(.*?)</\1>", lambda m: kinds.get(m.group(1), m.group(2)), line)
        got, counts = pii.redact(re.sub(r"</?\w+>", "", line))
        want, made = sum(expected.count(v) for v in kinds.values()), sum(counts.values())
        hit = made if got == expected else min(made, want) if got.count("<") >= expected.count("<") else 0
        tp, fp, fn = tp + hit, fp + made - hit, fn + want - hit
    blocks = (shared / "curation" / "pii" / "presidio_context_sentences_tests.txt").read_text().split("\n\n")
    wanted = {"IP_ADDRESS": "ip", "PHONE_NUMBER": "phone"}
    for block in blocks:
        rows = [r for r in block.strip().splitlines() if not r.startswith("#")]
        if len(rows) != 2:
            continue
        kind, sentence = rows
        counts = pii.redact(sentence)[1]
        expect = wanted.get(kind)
        for k, n in counts.items():  # a sentence of a kind may hold several of it ("one of these phones")
            if k == expect:
                tp += n
            else:
                fp += n
        if expect and counts[expect] == 0:
            fn += 1
    neg_fp = sum(sum(pii.redact(t)[1].values()) for t in LOOKALIKES)
    return {"tp": tp, "fp": fp, "fn": fn, "lookalikes": len(LOOKALIKES), "lookalike_fp": neg_fp}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=str(Path(__file__).resolve().parents[1].parent / "shared" / "data"))
    shared = Path(ap.parse_args().shared)
    batch = web_batch(shared)
    print(f"{batch.num_rows:,} web documents, {batch.column('text').nbytes / 1e6:.1f} MB\n")
    print("| step | docs/s (1 core) | MB/s |")
    print("|---|---:|---:|")
    for name, step in [("language (batched automaton)", Language()), ("url (default list)", UrlFilter()),
                       ("pii", Pii())]:
        d, mb = rate(step, batch)
        print(f"| {name} | {d:,.0f} | {mb:.2f} |")
    print(f"| py3langid's own per-byte loop, same texts | {py3langid_loop_rate(batch):,.0f} | |")
    p = pii_precision(shared)
    precision = p["tp"] / max(p["tp"] + p["fp"], 1)
    recall = p["tp"] / max(p["tp"] + p["fn"], 1)
    print(f"\nPII (e-mail, IP, phone): {p['tp']} found, {p['fp']} false positives, {p['fn']} missed: precision "
          f"{precision:.1%}, recall {recall:.1%}; {p['lookalike_fp']} replacements in {p['lookalikes']} look-alikes")


if __name__ == "__main__":
    main()
