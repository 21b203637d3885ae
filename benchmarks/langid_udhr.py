"""Language-ID accuracy on single UDHR sentences in 30 languages, and documents/s on real web text.

    PYTHONPATH=src python benchmarks/langid_udhr.py [--shared ../shared/data] [--per-language 100]

Sentences: each UDHR translation (nltk's udhr2, one file per language, label = file name) is split after
``. ! ? ; 。 ！ ？``; sentences of at least 20 characters, the first ``--per-language`` of each language,
the title lines skipped. Expected labels are ISO 639-1 (``nob`` -> ``nb``, ``mly_latn`` -> ``ms``).
Runs tokenmill's ``language`` step (py3langid's model) with its full label set, restricted to the 30
languages, and with lingua's Indonesian/Malay disambiguation; prints a Markdown table.
"""

from __future__ import annotations

import argparse
import re
import time
import zipfile
from collections import Counter
from pathlib import Path

import pyarrow as pa

from tokenmill.curate.filters.language import Language

LANGS = {"eng": "en", "deu": "de", "fra": "fr", "spa": "es", "ita": "it", "por_PT": "pt", "nld": "nl", "rus": "ru",
         "pol": "pl", "ces": "cs", "swe": "sv", "dan": "da", "nob": "nb", "fin": "fi", "hun": "hu", "tur": "tr",
         "ell_monotonic": "el", "arb": "ar", "heb": "he", "hin": "hi", "jpn": "ja", "cmn_hans": "zh", "kor": "ko",
         "vie": "vi", "ind": "id", "mly_latn": "ms", "ukr": "uk", "ron": "ro", "bul": "bg", "cat": "ca"}
SPLIT = re.compile(r"(?<=[.!?;。！？])\s*")


def sentences(shared: Path, per_language: int, min_chars: int = 20) -> list[tuple[str, str]]:
    z = zipfile.ZipFile(shared / "curation" / "langid" / "nltk_udhr2.zip")
    out = []
    for name, label in LANGS.items():
        lines = z.read(f"udhr2/{name}.txt").decode("utf-8").splitlines()[3:]
        sents = [s.strip() for line in lines for s in SPLIT.split(line)]
        out += [(s, label) for s in sents if len(s) >= min_chars][:per_language]
    return out


def evaluate(step: Language, data: list[tuple[str, str]]) -> tuple[float, float, Counter]:
    batch = pa.RecordBatch.from_pydict({"text": [t for t, _ in data]})
    step.setup()
    started = time.perf_counter()
    labels = step.score(batch).scores["label"].to_pylist()
    seconds = time.perf_counter() - started
    errors = Counter((want, got) for (_, want), got in zip(data, labels) if want != got)
    return 1 - sum(errors.values()) / len(data), len(data) / seconds, errors


def web_rate(shared: Path) -> tuple[int, float, float]:
    import json

    texts = []
    heads = sorted((shared / "pretrain").glob("dolma_cc_en_head-*.jsonl"))
    for p in heads + [shared / "pretrain" / "llamafactory_c4_demo.jsonl"]:
        texts += [json.loads(line)["text"] for line in p.open()]
    step = Language()
    step.setup()
    batch = pa.RecordBatch.from_pydict({"text": texts})
    started = time.perf_counter()
    step.score(batch)
    seconds = time.perf_counter() - started
    return len(texts), len(texts) / seconds, sum(len(t.encode()) for t in texts) / seconds / 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=str(Path(__file__).resolve().parents[1].parent / "shared" / "data"))
    ap.add_argument("--per-language", type=int, default=100)
    args = ap.parse_args()
    shared = Path(args.shared)
    data = sentences(shared, args.per_language)
    rows = [("py3langid, all 140 labels", Language(languages=[])),
            ("py3langid, restricted to the 30", Language(languages=[], candidates=sorted(set(LANGS.values())))),
            ("py3langid + lingua for id/ms, all labels", Language(languages=[], disambiguate=True)),
            ("py3langid + lingua for id/ms, restricted", Language(languages=[], candidates=sorted(set(LANGS.values())),
                                                                  disambiguate=True))]
    print(f"{len(data)} sentences, {len(LANGS)} languages\n")
    print("| configuration | accuracy | sentences/s (1 core) | most frequent errors (expected→got) |")
    print("|---|---:|---:|---|")
    for name, step in rows:
        acc, rate, errors = evaluate(step, data)
        top = ", ".join(f"{a}→{b} {n}" for (a, b), n in errors.most_common(4))
        print(f"| {name} | {acc:.1%} | {rate:,.0f} | {top} |")
    n, docs_s, mb_s = web_rate(shared)
    print(f"\nreal web documents ({n:,}, first 10,000 characters each): {docs_s:,.0f} docs/s, {mb_s:.2f} MB/s on one core")


if __name__ == "__main__":
    main()
