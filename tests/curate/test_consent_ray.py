"""The consent steps and machine_text on a local Ray cluster: the same documents, ledger, funnel and data card,
byte for byte, as the local engine, from WARC input (headers and HTML head in meta) and a robots.txt WARC."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("ray", reason="ray is not installed (pip install 'tokenmill[ray]')")
pytest.importorskip("protego")
pytest.importorskip("fastwarc")

from consentkit import ROBOTS_DIR, URLS, page, write_robots_warc, write_warc  # noqa: E402

from tokenmill.curate.workflows.curate import run_curate  # noqa: E402
from tokenmill.engine.ray import RayExecutor  # noqa: E402


def _outputs(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and "_state" not in p.parts and p.name not in ("manifest.json", ".tokenmill.lock")}


def _inputs(tmp_path: Path) -> tuple[Path, Path]:
    pages = [{"url": u, "date": f"2024-0{1 + i % 9}-01T00:00:00Z"} for i, u in enumerate(URLS)]
    pages += [{"url": "https://a.example/noai", "headers": {"X-Robots-Tag": "noai"}},
              {"url": "https://a.example/meta", "html": page(head='<meta name="tdm-reservation" content="1">')},
              {"url": "https://b.example/cc", "html": page(footer='<a rel="license" href="https://creativecommons.org/'
                                                                  'licenses/by-nc/4.0/">CC BY-NC</a>')},
              {"url": "https://b.example/ai", "html": page(body="As an AI language model, I hope this helps! " * 5)}]
    pages *= 3  # several units
    for i, p in enumerate(pages):
        p["url"] += f"?n={i}"
    crawl = tmp_path / "in"
    for k in range(3):
        write_warc(crawl / f"part-{k}.warc.gz", pages[k::3])
    captures = [(f.stem, "2024-01-01T00:00:00Z", f.read_bytes(), "200 OK") for f in sorted(ROBOTS_DIR.glob("*.txt"))]
    captures.append(("a.example", "2024-01-01T00:00:00Z", b"User-agent: ClaudeBot\nDisallow: /private\n", "200 OK"))
    return crawl, write_robots_warc(tmp_path / "robots.warc.gz", captures)


def test_consent_steps_same_bytes_on_ray_as_local(ray_cluster, tmp_path):
    crawl, robots = _inputs(tmp_path)
    steps = [{"name": "robots", "snapshot": str(robots)}, {"name": "tdm_optout"},
             {"name": "license", "detect": True, "unknown": "keep"}, {"name": "machine_text"}]
    local = run_curate([str(crawl)], out=tmp_path / "local", steps=steps, workers=1, report=False, unit_bytes=4000)
    ray = run_curate([str(crawl)], out=tmp_path / "ray", steps=steps, executor=RayExecutor(workers=2), report=False,
                     unit_bytes=4000)
    f = local["counts"]["filtered"]
    assert local["run"]["units"] >= 3 and local["counts"]["balanced"]
    assert {"robots_v2:disallowed", "robots_v2:unreadable", "tdm_v2:reserved", "license_v2:not_allowed",
            "machine_text_v2:machine_written"} <= set(f)
    for key in ("counts", "funnel", "documents", "stage_ledgers", "stage_packs", "decision_ledger", "steps"):
        assert ray[key] == local[key], key
    want = _outputs(tmp_path / "local")
    assert "datacard.md" in want and any(k.startswith("ledger/") for k in want)
    assert _outputs(tmp_path / "ray") == want
