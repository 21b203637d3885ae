"""`tokenmill plan`: a recipe file over shards written by the real tracks, planned into plan.json/plan.html."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from html.parser import HTMLParser

import pytest
from recipekit import RECIPE, make_sources

from tokenmill.cli import main
from tokenmill.errors import ConfigError
from tokenmill.loader.recipe import load_recipe, parse_recipe
from tokenmill.shards import open_shards

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("recipe")
    make_sources(root)
    (root / "recipe.yaml").write_text(RECIPE)
    return root


@pytest.fixture(scope="module")
def planned(root):
    assert main(["plan", str(root / "recipe.yaml"), "--out", str(root / "plan")]) == 0
    return json.loads((root / "plan" / "plan.json").read_text())


def test_plan_json_holds_the_issue_keys_with_numbers_from_the_shards(root, planned):
    recipe = load_recipe(root / "recipe.yaml")
    g = 4 * 2
    assert [p["name"] for p in planned["phases"]] == ["stable", "decay", "long"]
    stable_steps, decay_steps = round(28_000 / (64 * g)), round(8_000 / (64 * g))
    assert [p["start_step"] for p in planned["phases"]] == [0, stable_steps, stable_steps + decay_steps]
    assert planned["total_steps"] == recipe.total_steps
    web = open_shards(root / "shards" / "web")
    assert planned["sources"]["web"]["tokens_available"] == web.n_tokens  # train split only (val/ apart)
    stable = planned["phases"][0]
    assert stable["tokens"] == {"web": stable_steps * g * 64}  # concat windows are full
    drawn = sum(p["tokens"].get("web", 0) for p in planned["phases"])
    assert planned["sources"]["web"]["tokens_drawn"] == drawn
    assert planned["sources"]["web"]["epochs"] == pytest.approx(drawn / web.n_tokens)
    decay = planned["phases"][1]
    assert abs(decay["samples_by_source"]["sft"] / decay["samples"] - 0.3) < 0.02
    assert all(isinstance(w, str) for w in planned["warnings"])


def test_long_phase_upsamples_long_documents(root, planned):
    long = open_shards(root / "shards" / "long")
    lengths = long.lengths.astype(int)
    assert planned["sources"]["long"]["tokens_per_pass"] == lengths.sum() + lengths[lengths >= 512].sum()
    share = planned["phases"][2]["long_doc_share"]["long"]
    served = list(lengths) + [n for n in lengths if n >= 512]
    assert share == pytest.approx(sum(n for n in served if n > 512) / sum(served))


def test_html_has_the_chart_and_a_table_per_phase(root, planned):
    html = (root / "plan" / "plan.html").read_text()
    assert html.count("<path class='area'") == 3 and html.count("<table class='phase'>") == 3
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", html) and "<script" not in html


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs).get("class")))


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (apt-get install -y chromium; .ci/run does it)")
def test_html_renders_in_headless_chromium(root, planned, tmp_path):
    page = root / "plan" / "plan.html"
    dom = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", f"file://{page}"],
                         capture_output=True, text=True, timeout=120).stdout
    parser = _Tags()
    parser.feed(dom)
    assert ("svg", "mixture") in parser.tags and parser.tags.count(("path", "area")) == 3
    shot = tmp_path / "plan.png"
    subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", f"--screenshot={shot}",
                    "--window-size=900,1200", f"file://{page}"], capture_output=True, timeout=120)
    assert shot.stat().st_size > 10_000


def _recipe(root, text: str, name: str = "r.yaml"):
    path = root / name
    path.write_text(text)
    return path


def test_warnings_for_repeats_exhaustion_and_masks_ignored(root, capsys):
    path = _recipe(root, """
seq_len: 64
batch: 8
sources: {web: {path: shards/web}, sft: {path: shards/sft}}
phases:
  - {name: stable, steps: 200, weights: {web: 1}}
  - {name: decay, steps: 20, weights: {web: 1, sft: 1}, ignore_loss_mask: true}
""", "warn.yaml")
    assert main(["plan", str(path), "--out", str(root / "warn")]) == 0
    plan = json.loads((root / "warn" / "plan.json").read_text())
    text = " | ".join(plan["warnings"])
    assert plan["sources"]["web"]["epochs"] > 4 and "more than 4" in text and "Muennighoff" in text
    assert "runs out of fresh samples" in text and "'stable'" in text
    assert "ignore_loss_mask" in text and "['sft']" in text
    assert "warning:" in capsys.readouterr().out


def test_recipe_that_cannot_run_exits_1(root, tmp_path, capsys, write_shards):
    import numpy as np
    from loaderkit import pretrain_docs

    other = write_shards(pretrain_docs(np.random.default_rng(0), 20), name="othertok", fingerprint="fp-other")
    path = _recipe(root, f"""
seq_len: 64
total_tokens: 10000
sources: {{web: {{path: shards/web}}, other: {{path: {other}}}}}
phases: [{{name: a, share: 1.0, weights: {{web: 1, other: 1}}}}]
""", "mismatch.yaml")
    assert main(["plan", str(path), "--out", str(tmp_path / "p")]) == 1
    err = capsys.readouterr().err
    assert "mismatched tokenizers" in err and "'other'" in err and "Traceback" not in err
    path = _recipe(root, """
seq_len: 64
sources: {web: {path: shards/web, max_epochs: 2}}
phases: [{name: a, steps: 500, weights: {web: 1}}]
""", "over.yaml")
    assert main(["plan", str(path), "--out", str(tmp_path / "q")]) == 1
    assert "sources.web.max_epochs" in capsys.readouterr().err
    assert main(["plan", str(path)]) == 2  # neither --out nor --check


@pytest.mark.parametrize("doc, field", [
    ({"sources": {"w": {"path": "x"}}, "phases": [{"steps": 1, "weights": {"w": 1}}]}, "seq_len: required"),
    ({"seq_len": 8, "sources": {"w": {"path": "x"}}, "phases": [{"steps": 1, "weights": {"code": 1}}]},
     "phases[0].weights.code: unknown source"),
    ({"seq_len": 8, "sources": {"w": {"path": "x"}}, "phases": [{"share": 0.5, "weights": {"w": 1}}]},
     "phases[0].share: needs total_tokens"),
    ({"seq_len": 8, "total_tokens": 100, "sources": {"w": {"path": "x"}},
      "phases": [{"share": 0.5, "weights": {"w": 1}}]}, "the shares add up to 0.5"),
    ({"seq_len": 8, "sources": {"w": {"path": "x", "epochs": 3}}, "phases": [{"steps": 1, "weights": {"w": 1}}]},
     "sources.w.epochs: unknown field"),
    ({"seq_len": 8, "sources": {"w": {"path": "x", "upsample_long": {"factor": 2}}},
      "phases": [{"steps": 1, "weights": {"w": 1}}]}, "sources.w.upsample_long.min_tokens: required"),
    ({"seq_len": 8, "sources": {"w": {"path": "x"}}, "phases": [{"steps": 1, "tokens": 5, "weights": {"w": 1}}]},
     "give exactly one of share, tokens or steps"),
    ({"seq_len": 8, "batch": 0, "sources": {"w": {"path": "x"}}, "phases": [{"steps": 1, "weights": {"w": 1}}]},
     "batch: expected a whole number >= 1"),
])
def test_bad_recipes_name_the_field(doc, field):
    with pytest.raises(ConfigError) as err:
        parse_recipe(doc)
    assert field in str(err.value)


def test_bad_recipe_on_the_command_line_is_one_error(tmp_path, capsys):
    path = _recipe(tmp_path, "seq_len: 8\nsources: {w: {path: nowhere}}\nphases: [{steps: 1, weights: {w: 1}}]\n")
    assert main(["plan", str(path), "--out", str(tmp_path / "p")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error:") and "sources.w.path" in err and "Traceback" not in err


def test_plan_needs_no_torch(root, tmp_path):
    import sys

    code = ("import sys; sys.modules['torch'] = None\n"
            "from tokenmill.cli import main\n"
            f"sys.exit(main(['plan', {str(root / 'recipe.yaml')!r}, '--out', {str(tmp_path / 'p')!r}]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


def test_a_source_too_short_for_its_window_is_refused(root, capsys):
    path = _recipe(root, """
seq_len: 64
sources: {long: {path: shards/long}}
phases: [{name: long, steps: 2, seq_len: 1048576, weights: {long: 1}}]
""", "short.yaml")
    assert main(["plan", str(path), "--out", str(root / "short")]) == 1
    assert "sources.long: no sample of 1,048,576 tokens" in capsys.readouterr().err


def test_run_shares_add_up(planned):
    shares = [p["run_share"] for p in planned["phases"]]
    totals = [sum(p["tokens"].values()) for p in planned["phases"]]
    assert sum(shares) == pytest.approx(1) and shares == pytest.approx([t / sum(totals) for t in totals])


def test_a_cap_keeps_the_documents_within_its_first_tokens(root):
    path = _recipe(root, """
seq_len: 64
sources: {web: {path: shards/web, cap_tokens: 3000}}
phases: [{name: a, steps: 10, weights: {web: 1}}]
""", "cap.yaml")
    assert main(["plan", str(path), "--out", str(root / "cap")]) == 0
    plan = json.loads((root / "cap" / "plan.json").read_text())
    lengths = [int(n) for n in open_shards(root / "shards" / "web").lengths]
    kept = next(i for i in range(len(lengths) + 1) if sum(lengths[:i + 1]) > 3000)
    assert plan["sources"]["web"]["documents"] == kept
    assert plan["sources"]["web"]["tokens_available"] == sum(lengths[:kept]) <= 3000
    assert plan["sources"]["web"]["epochs"] == pytest.approx(10 * 8 * 64 / sum(lengths[:kept]))


def test_plan_out_is_guarded_like_every_out(root, tmp_path, capsys):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "plan.json").write_text("my own notes")
    assert main(["plan", str(root / "recipe.yaml"), "--out", str(mine)]) == 1
    assert "not a tokenmill output" in capsys.readouterr().err
    assert (mine / "plan.json").read_text() == "my own notes"
    out = tmp_path / "plan"
    for _ in range(2):  # a second plan replaces the first
        assert main(["plan", str(root / "recipe.yaml"), "--out", str(out)]) == 0
    (out / "notes.txt").write_text("kept")
    assert main(["plan", str(root / "recipe.yaml"), "--out", str(out)]) == 0
    assert (out / "notes.txt").read_text() == "kept" and json.loads((out / "plan.json").read_text())["phases"]
