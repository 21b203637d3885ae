"""The commands that write outside the track driver (``export``, ``card``, ``plan``, ``demo``, ``quality train``)
take the job flags where they apply, refuse the others with the reason (in their help and as a usage error,
never ignored), write nothing on ``--dry-run``, and write the same bytes again after a kill -9 (issue 41 item 6)."""

from __future__ import annotations

import hashlib
import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import hostilekit as hk
import pytest

from tokenmill.cli import main

# a real `tokenmill export` killed with SIGKILL after its second batch of sequences is written (batches of 64
# tokens, so that a small corpus is many batches)
KILLED_EXPORT = """
import os, signal, sys
import tokenmill.shards.export as ex
real = ex.iter_batches
def killed(ds, *, seq_len, batch_tokens=64):
    for k, batch in enumerate(real(ds, seq_len=seq_len, batch_tokens=64)):
        if k == 2:
            os.kill(os.getpid(), signal.SIGKILL)
        yield batch
ex.iter_batches = killed
from tokenmill.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _shards(tmp_path: Path) -> Path:
    out = tmp_path / "shards"
    hk.pretrain([hk.docs(tmp_path / "in" / "docs.jsonl", 30)], out, tokenizer="default")
    return out


def _tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _argv(command: str, tmp_path: Path) -> list[str]:
    """A command line of ``command`` over small inputs made in ``tmp_path``, writing under ``tmp_path/target``."""
    target = str(tmp_path / "target")
    if command == "card":
        return ["card", str(_shards(tmp_path))]
    if command == "demo":
        return ["demo", "--out", target]
    if command == "quality train":
        pos, neg = hk.docs(tmp_path / "pos.jsonl", 10), hk.docs(tmp_path / "neg.jsonl", 10, start=10)
        return ["quality", "train", "--positive", str(pos), "--negative", str(neg), "--out", target]
    shards = _shards(tmp_path)
    if command == "plan":
        (tmp_path / "recipe.yaml").write_text(hk.RECIPE)
        return ["plan", str(tmp_path / "recipe.yaml"), "--out", target]
    return ["export", str(shards), "--to", command.split()[1], "--out", target]


REFUSED = {"export bin": ("--limit", "3", "an export is every sequence"),
           "card": ("--limit", "3", "a card counts every record"),
           "plan": ("--workers", "2", "nothing to spread over workers"),
           "demo": ("--overwrite", None, "replaces exactly what the demo wrote"),
           "quality train": ("--config", "p.yaml", "takes no pipeline file")}


@pytest.mark.parametrize("command", sorted(REFUSED))
def test_a_job_flag_the_command_does_not_take_is_refused_with_its_reason(command, tmp_path, capsys):
    flag, value, why = REFUSED[command]
    argv = _argv(command, tmp_path)
    before = _tree(tmp_path)
    assert main([*argv, flag, *([value] if value else [])]) == 2
    err = capsys.readouterr().err
    assert f"does not take {flag}: " in err and why in err and "Traceback" not in err, err
    assert _tree(tmp_path) == before
    with pytest.raises(SystemExit):
        main([*argv[:2 if command == "quality train" else 1], "-h"])
    assert "Job flags it does not take" in capsys.readouterr().out  # and the help says so


DRY = ["export bin", "export megatron", "export hf", "card", "plan", "demo", "quality train"]


@pytest.mark.parametrize("command", DRY)
def test_dry_run_writes_nothing(command, tmp_path, capsys):
    if command == "export hf":
        pytest.importorskip("datasets")
    argv = _argv(command, tmp_path)
    if command == "card":
        for name in ("datacard.md", "datacard.json"):
            (Path(argv[1]) / name).unlink()
    before = _tree(tmp_path)
    assert main([*argv, "--dry-run"]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "dry run" in out and "nothing written" in out, out
    assert _tree(tmp_path) == before
    assert not (tmp_path / "target").exists() and not list(tmp_path.glob(".target*"))


@pytest.mark.parametrize("to", ["bin", "megatron"])
def test_export_dry_run_says_what_the_export_writes(to, tmp_path, capsys):
    argv = _argv(f"export {to}", tmp_path)
    assert main([*argv, "--seq-len", "8", "--dry-run"]) == 0
    said = capsys.readouterr().out
    assert main([*argv, "--seq-len", "8"]) == 0
    done = capsys.readouterr().out
    assert re.search(r"\d+ sequences, [\d,]+ tokens -> [^(\n]+", said)[0].strip() == \
        re.search(r"\d+ sequences, [\d,]+ tokens -> [^(\n]+", done)[0].strip()


@pytest.mark.parametrize("to", ["bin", "megatron", "hf"])
def test_export_killed_midway_then_run_again_writes_the_same_bytes(to, tmp_path):
    if to == "hf":
        pytest.importorskip("datasets")
    argv = _argv(f"export {to}", tmp_path)
    killed = subprocess.run([sys.executable, "-c", KILLED_EXPORT, *argv], capture_output=True, text=True, timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    target = tmp_path / "target"
    written = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("target"))
    assert written in ([], ["target"]) if to == "hf" else not [n for n in written if not n.endswith(".tmp")], written
    again = hk.cli(*argv)  # the same command, no --overwrite: the killed run left no target
    assert again.returncode == 0, again.stderr
    clean = tmp_path / "clean"
    assert main([*argv[:-1], str(clean)]) == 0
    if to == "hf":
        import datasets

        assert datasets.load_from_disk(str(target))[:] == datasets.load_from_disk(str(clean))[:]
        return
    names = [n.replace("target", "clean") for n in sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("target"))]
    assert names == sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("clean"))  # no .tmp left
    for name in names:
        assert (tmp_path / name.replace("clean", "target")).read_bytes() == (tmp_path / name).read_bytes() or \
            name.endswith(".json")
    if to == "bin":  # the sidecar names its own file: equal apart from that
        mine, theirs = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("target", "clean"))
        assert mine == theirs


def test_quality_train_limit_reads_the_first_records_of_every_input(tmp_path, capsys):
    pytest.importorskip("fasttext")
    pos, neg = hk.docs(tmp_path / "pos.jsonl", 30), hk.docs(tmp_path / "neg.jsonl", 30, start=100)
    model = tmp_path / "model"
    assert main(["quality", "train", "--positive", str(pos), "--negative", str(neg), "--out", str(model),
                 "--limit", "12"]) == 0, capsys.readouterr().err
    sources = json.loads((model / "model.bin.card.json").read_text())["data"]
    assert (sources["positive_documents"], sources["negative_documents"], sources["limit"]) == (12, 12, 12)


# a real `tokenmill quality train` killed with SIGKILL once the model is saved, as its digest is taken for the card
KILLED_TRAIN = """
import hashlib, os, signal, sys, types
import tokenmill.curate.quality.classifier as quality
def killed(data):
    os.kill(os.getpid(), signal.SIGKILL)
quality.hashlib = types.SimpleNamespace(sha256=killed, blake2b=hashlib.blake2b)
from tokenmill.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_quality_train_killed_after_saving_its_model_then_run_again_writes_the_same_bytes(tmp_path):
    """Killed with SIGKILL once the model is saved (its read stage committed, its fit not): the rerun resumes at
    the fit and writes the model and card a clean run writes, byte for byte, and no file of the killed run."""
    pytest.importorskip("fasttext")
    argv = [*_argv("quality train", tmp_path), "--param", "quantize=0", "--workers", "1"]  # the full model: quicker
    argv = [*argv[:-6], *argv[-4:], *argv[-6:-4]]  # --out last
    killed = subprocess.run([sys.executable, "-c", KILLED_TRAIN, *argv], capture_output=True, text=True, timeout=300)
    assert killed.returncode != 0, killed.stderr
    target = tmp_path / "target"
    assert not (target / "model.bin").exists() and not (target / "manifest.json").exists()
    again = hk.cli(*argv, timeout=300)
    assert again.returncode == 0, again.stderr
    assert main([*argv[:-1], str(tmp_path / "clean")]) == 0
    for name in ("model.bin", "model.bin.card.json", "datacard.json"):
        assert (target / name).read_bytes() == (tmp_path / "clean" / name).read_bytes(), name
    assert not [p for p in target.rglob("*") if p.name.endswith(".tmp")]


ENVELOPE = {"tokenmill", "track", "inputs", "config", "counts", "identity", "run", "rejects_file", "skipped_inputs"}


def test_an_hf_export_writes_the_envelope_and_the_exported_runs_data_card(tmp_path, capsys):
    datasets = pytest.importorskip("datasets")
    from huggingface_hub import DatasetCard

    argv = _argv("export hf", tmp_path)
    assert main([*argv, "--seq-len", "8"]) == 0, capsys.readouterr().err
    target, shards = tmp_path / "target", tmp_path / "shards"
    manifest = json.loads((target / "manifest.json").read_text())
    assert ENVELOPE <= set(manifest) and manifest["track"] == "export"
    assert manifest["counts"] == json.loads((shards / "manifest.json").read_text())["counts"]  # nothing dropped
    card = json.loads((target / "datacard.json").read_text())
    source_card = json.loads((shards / "datacard.json").read_text())
    assert {k: v for k, v in card.items() if k != "export"} == source_card  # the exported run's card
    assert card["export"]["sequences"] == len(datasets.load_from_disk(str(target)))
    assert DatasetCard.load(target / "datacard.md").data.tags == ["tokenmill", "pretrain"]
    assert "## Export" in (target / "datacard.md").read_text()
    before = (target / "datacard.md").read_bytes()
    (target / "datacard.md").unlink()
    (target / "datacard.json").unlink()
    assert main(["card", str(target)]) == 0
    assert (target / "datacard.md").read_bytes() == before  # rebuilt from the same records


# a real `tokenmill export` killed with SIGKILL as it renames its second finished file into place (``hf``: moves its
# second dataset file into --out): the first is there, the rest are not
KILLED_IN_PUBLISH = """
import os, signal, sys
from pathlib import Path
real, seen = os.replace, []
target = Path(sys.argv[sys.argv.index("--out") + 1])
def replace(src, dst):
    dst = Path(dst)
    if (dst.parent == target or dst.parent == target.parent and dst.name.startswith(target.name)) \\
            and not dst.name.endswith(".tmp") and "_state" not in dst.parts:
        seen.append(dst)
        if len(seen) == 2:
            os.kill(os.getpid(), signal.SIGKILL)
    real(src, dst)
os.replace = replace
from tokenmill.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _export_files(tmp_path: Path, name: str) -> dict[str, bytes]:
    """What an export named ``name`` wrote under ``tmp_path`` (a folder's files, or the files named after it), its
    manifest's ``run`` (its time and memory) left out and its own name taken out."""
    root = tmp_path / name
    paths = [p for p in root.rglob("*") if p.is_file() and "_state" not in p.relative_to(root).parts] if root.is_dir() \
        else [p for p in tmp_path.iterdir() if p.name.startswith(name)]
    files = {str(p.relative_to(tmp_path)).replace(name, "OUT"): p.read_bytes().replace(name.encode(), b"OUT")
             for p in paths}
    for rel, key in [(r, k) for r in files for k in ("run", "_fingerprint") if r.endswith(TIMED[k])]:
        doc = json.loads(files[rel])
        doc.pop(key)
        files[rel] = json.dumps(doc, sort_keys=True).encode()
    return files


TIMED = {"run": "manifest.json", "_fingerprint": "/state.json"}  # the run's time; a random id `datasets` gives a save


@pytest.mark.parametrize("to", ["bin", "megatron", "hf"])
def test_export_killed_between_two_renames_then_the_same_command_again_writes_the_same_bytes(to, tmp_path):
    """Killed with part of its files in place (what ``--overwrite`` was needed for): the same command again, no
    flag, does the export again and ends with the files of a clean export, byte for byte, no ``.tmp`` left."""
    if to == "hf":
        pytest.importorskip("datasets")
    argv = [*_argv(f"export {to}", tmp_path), "--seq-len", "8"]
    argv = [*argv[:-4], *argv[-2:], *argv[-4:-2]]  # --out last
    killed = subprocess.run([sys.executable, "-c", KILLED_IN_PUBLISH, *argv], capture_output=True, text=True, timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert _export_files(tmp_path, "target")  # part of the export is in place
    again = hk.cli(*argv)
    assert again.returncode == 0, again.stderr
    assert main([*argv[:-1], str(tmp_path / "clean")]) == 0
    assert _export_files(tmp_path, "target") == _export_files(tmp_path, "clean")
    assert not [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp")]
    assert hk.cli(*argv).returncode == 1  # a finished export is replaced only with --overwrite


@pytest.mark.parametrize("to", ["bin", "megatron"])
def test_a_file_export_writes_the_envelope_and_the_exported_runs_data_card_beside_its_files(to, tmp_path, capsys):
    argv = _argv(f"export {to}", tmp_path)
    assert main([*argv, "--seq-len", "8"]) == 0, capsys.readouterr().err
    said = capsys.readouterr().out
    shards = tmp_path / "shards"
    manifest = json.loads((tmp_path / "target.manifest.json").read_text())
    assert ENVELOPE <= set(manifest) and manifest["track"] == "export" and manifest["config"]["to"] == to
    assert manifest["counts"] == json.loads((shards / "manifest.json").read_text())["counts"]  # nothing dropped
    assert {"seconds", "peak_rss", "units"} <= set(manifest["run"])
    files = {"bin": ["target", "target.json"], "megatron": ["target.bin", "target.idx"]}[to]
    assert manifest["export"]["files"] == files and manifest["export"]["seq_len"] == 8
    card = json.loads((tmp_path / "target.datacard.json").read_text())
    assert {k: v for k, v in card.items() if k != "export"} == json.loads((shards / "datacard.json").read_text())
    assert card["export"]["sequences"] == manifest["export"]["sequences"] and f"{card['export']['sequences']:,} sequences" in said
    md = (tmp_path / "target.datacard.md").read_text()
    assert "## Export" in md and {"bin": "flat token file", "megatron": "Megatron-LM"}[to] in md
    assert "target.datacard.md" in said  # the summary names every file written


def test_a_plan_writes_the_envelope_naming_its_recipe_and_its_digest(tmp_path, capsys):
    argv = _argv("plan", tmp_path)
    assert main(argv) == 0, capsys.readouterr().err
    manifest = json.loads((tmp_path / "target" / "manifest.json").read_text())
    assert ENVELOPE <= set(manifest) and manifest["track"] == "plan"
    recipe = tmp_path / "recipe.yaml"
    assert manifest["config"]["recipe"] == str(recipe)
    assert manifest["config"]["recipe_sha256"] == hashlib.sha256(recipe.read_bytes()).hexdigest()
    assert manifest["inputs"][0] == {"path": str(recipe), "format": "recipe", "sha256": manifest["config"]["recipe_sha256"]}
    plan = json.loads((tmp_path / "target" / "plan.json").read_text())
    assert [i["path"] for i in manifest["inputs"][1:]] == [s["path"] for s in plan["sources"].values()]
    assert manifest["counts"]["tokens"] == plan["tokens_drawn"] > 0
    assert not (tmp_path / "target" / "datacard.md").exists()  # a plan is not data: no card (its --out help says so)
