"""report.html: self-contained, every chart present, removed documents escaped; checked in headless Chromium."""

from __future__ import annotations

import re
import shutil
import subprocess
from html.parser import HTMLParser

import numpy as np
import pytest
from curatekit import write_corpus

from tokenmill.curate.report import html as curate_html
from tokenmill.curate.workflows.curate import run_curate

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


class _Elements(HTMLParser):
    def __init__(self):
        super().__init__()
        self.found: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.found.append((tag, dict(attrs)))

    def count(self, tag, cls=None):
        return sum(1 for t, a in self.found if t == tag and (cls is None or cls in (a.get("class") or "").split()))


def _elements(html: str) -> _Elements:
    p = _Elements()
    p.feed(html)
    return p


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("report")
    src = write_corpus(tmp / "in" / "web.jsonl").parent
    with open(src / "a.jsonl", "w") as fh:  # a removed document whose text would break the page if not escaped
        fh.write('{"text": "<script>alert(1)</script> Ein deutscher Satz über das Wetter heute.", "url": "http://a.de/"}\n')
    steps = [{"name": "url", "block_domains": ["blocked.test"]}, {"name": "language", "languages": ["en"]},
             {"name": "pii"}, {"name": "length", "min_chars": 99}]
    run_curate([str(src)], out=tmp / "out", steps=steps, workers=1)
    return tmp / "out" / "report.html"


def test_report_is_self_contained_and_has_every_section(report):
    html = report.read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", html) and "<link" not in html
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    el = _elements(html)
    assert el.count("svg", "funnel") == 1 and el.count("svg", "rules") == 1
    assert el.count("svg", "hist") >= 5 and el.count("line", "threshold") >= 2
    assert el.count("pre", "sample") >= 3 and el.count("h3", "reason") >= 3


def load(path):
    """The DOM headless Chromium built from ``path``, and the console errors it logged."""
    proc = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
                           "--v=0", "--dump-dom", f"file://{path}"], capture_output=True, text=True, timeout=120)
    errors = [line for line in proc.stderr.splitlines() if "CONSOLE" in line]
    return proc.stdout, errors


NO_CHROMIUM = "chromium not installed (apt-get install -y chromium; .ci/run does it)"


@pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)
def test_report_loads_in_headless_chromium_without_console_errors(report, tmp_path):
    # the detector works: a page with a script error is caught
    broken = tmp_path / "broken.html"
    broken.write_text("<html><body><script>undefined_function();</script></body></html>")
    assert load(broken)[1]
    dom, errors = load(report)
    assert errors == []
    el = _elements(dom)  # the DOM as the browser built it
    assert el.count("svg", "funnel") == 1 and el.count("svg", "rules") == 1 and el.count("svg", "hist") >= 5
    assert el.count("rect") > 20 and el.count("line", "threshold") >= 2


def test_a_histogram_has_a_y_axis_and_marks_both_ends_of_a_range():
    marks = curate_html.thresholds_of({"name": "gopher_quality", "params": {"min_doc_words": 50, "max_doc_words": 100000}},
                               ("doc_words",))
    assert marks["doc_words"] == [50.0, 100000.0]
    svg = curate_html.hist_svg("gopher_quality.doc_words", np.array([10.0, 60, 70, 200, 5000]), marks["doc_words"])
    assert svg.count('class="threshold"') == 2
    assert '<g class="y-axis">' in svg and ">4<" in svg  # the tallest bar's count labels the axis


def test_the_report_header_names_no_preset_as_none_of_python():
    assert curate_html._pipeline({"preset": None, "steps": [{"name": "c4"}]}) == "steps listed in the pipeline file"
    assert curate_html._pipeline({"preset": "dclm"}) == "preset: dclm"
    assert "None" not in curate_html._pipeline({"preset": None})
