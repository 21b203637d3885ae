"""Small real inputs for the curation tests (written by the tests, never copied from shared data)."""

from __future__ import annotations

import json
from pathlib import Path

ENGLISH = [
    "The committee met on Tuesday to discuss the new library budget and the opening hours of the branch.",
    "Researchers found that the river had carried far more sediment this spring than in any year before.",
    "She walked to the station early, bought a newspaper and read it while waiting for the delayed train.",
    "Our small bakery has sold bread and cakes to the people of this town for more than forty years now.",
    "Write to the organisers at events@example.org or call (814) 360 8593 to reserve a seat for the talk.",
    "The garden needs water every evening during the summer, otherwise the young tomato plants will die.",
]
OTHER = [
    "Der Ausschuss hat am Dienstag über den neuen Haushalt der Bibliothek und die Öffnungszeiten beraten.",
    "Le comité s'est réuni mardi pour discuter du nouveau budget de la bibliothèque et des horaires.",
    "El comité se reunió el martes para hablar del nuevo presupuesto de la biblioteca y de los horarios.",
]
URLS = ["https://news.example.com/a", "http://shop.blocked.test/cart", "https://www.site.org/porn-pics/1",
        "not a url at all", None, "https://notblocked.test/page", "http://blog.site.org/x", "https://b.blocked.test/y",
        "https://de.site.org/", "ftp://files.site.org/readme"]


def write_corpus(path: Path, *, bad_rows: bool = True) -> Path:
    """A JSONL file of English and other-language documents with URLs, licences and a few bad records."""
    texts = ENGLISH + OTHER
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        for i, text in enumerate(texts):
            row = {"text": text, "url": URLS[i % len(URLS)], "license": ["cc-by-4.0", "MIT", None, "GPL-3.0"][i % 4]}
            fh.write(json.dumps(row).encode() + b"\n")
        if bad_rows:
            fh.write(b'{"text": 12345, "url": "http://x.org"}\n')  # wrong_type
            fh.write(b'{"text": "caf\xe9 au lait"}\n')  # invalid UTF-8
            fh.write(b'{"text": "ok text", "url": {"nested": [1, 2]}}\n')  # a URL column holding garbage
            fh.write(b'{"text": \n')  # malformed JSON
    return path
