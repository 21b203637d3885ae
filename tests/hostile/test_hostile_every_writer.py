"""Every command that writes, driven end to end through the same five checks (issue 41 item 6, issue 42): a run
killed with kill -9 midway, then the same command again, ends with the bytes of a clean run; a rerun with
``--overwrite`` (``plan``, ``demo``, ``card``: a plain rerun, which replaces what they wrote) keeps a user's file;
a non-empty folder tokenmill did not write is refused, untouched; a second run into a busy ``--out`` is refused
at once, naming the first; ``--dry-run`` writes nothing.

The commands come from ``hostilekit.WRITERS`` (small inputs, one worker, several work units). ``synth``'s runs ask a
real inference server: ``transformers serve`` over the tiny local model of tests/synth/tinyserver.py, started once
for this module (tens of seconds) by the tests that run it; its refusal and dry run come before any request."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import hostilekit as hk
import pytest

from tokenmill.cli import main

# `demo` needs torch (its packed batch) and runs both tracks, `synth` a server that needs torch: the torch marker
COMMANDS = [pytest.param(c, marks=pytest.mark.torch) if c in ("demo", "synth") else c for c in sorted(hk.WRITERS)]
OWN_RERUN = ("plan", "demo", "card")  # a rerun replaces what they wrote: they take no --overwrite
JOB_PAUSE = "tokenmill.job.run:_execute"  # inside the job's hold on --out, before its stages
PAUSE = {"export bin": "tokenmill.shards.export:iter_batches", "export hf": "tokenmill.shards.export:iter_batches",
         "plan": "tokenmill.loader.plan_html:render_plan_html", "demo": "tokenmill.demo:_run",
         "card": "tokenmill.report.datacard:rebuild"}
JOB_KILL = "tokenmill.job.driver:_Timed.update"  # once the first unit of the first stage is committed
KILL = {"export bin": "os:replace", "export hf": "os:replace",  # the first finished file moved into place
        "plan": "tokenmill.loader.plan_html:render_plan_html",  # plan.json written, plan.html not
        "card": "tokenmill.report.datacard:render",  # datacard.json written, datacard.md not
        "synth": "tokenmill.synth.run:UnitProgress.update"}  # its units run in this process, each committed first


# a real `tokenmill` process killed with SIGKILL once argv[1] (module:Class.attribute) has returned the first time;
# ``os:replace`` counts only the renames of finished files into --out (argv[2]), never tokenmill's own state
KILLED = """
import importlib, os, signal, sys
from pathlib import Path
spec, out = sys.argv[1], Path(sys.argv[2])
module, _, attr = spec.partition(":")
*path, name = attr.split(".")
owner = importlib.import_module(module)
for part in path:
    owner = getattr(owner, part)
real = getattr(owner, name)
def into_out(dst):
    dst = Path(dst)
    return (dst.parent == out or dst.parent == out.parent and dst.name.startswith(out.name)) \\
        and not dst.name.endswith(".tmp") and "_state" not in dst.parts
def killed(*args, **kwargs):
    result = real(*args, **kwargs)
    if name != "replace" or into_out(args[1]):
        os.kill(os.getpid(), signal.SIGKILL)
    return result
setattr(owner, name, killed)
from tokenmill.cli import main
sys.exit(main(sys.argv[3:]))
"""


@pytest.fixture(scope="module")
def synth_server(tmp_path_factory):
    """``transformers serve`` over tests/synth/tinyserver.py's model, for this module's ``synth`` runs."""
    for extra in ("torch", "fastapi", "uvicorn", "httpx"):
        pytest.importorskip(extra, reason=f"synth's runs need an inference server: {extra} is not installed")
    sys.path.insert(0, str(Path(__file__).parents[1] / "synth"))
    import tinyserver

    model = tinyserver.build_model(tmp_path_factory.mktemp("synth-model") / "model")
    with tinyserver.serve(model) as (url, _):
        yield {"server": url, "model": str(model)}


@pytest.fixture
def runs(request, monkeypatch):
    """A test that runs its command: for ``synth``, point it at the module's server."""
    if request.node.callspec.params["command"] == "synth":
        for key, value in request.getfixturevalue("synth_server").items():
            monkeypatch.setitem(hk.SYNTH, key, value)


def _needs(command: str) -> None:
    if command in hk.NEEDS:
        pytest.importorskip(hk.NEEDS[command])


def _setup(command: str, tmp_path: Path, out: Path, *extra: str) -> list[str]:
    """The command line; for ``card``, ``out`` is made a finished run without its card first."""
    _needs(command)
    if command == "card" and not out.exists():
        hk.pretrain([hk.docs(tmp_path / "run-in" / "docs.jsonl", 20)], out, tokenizer="default")
        for name in ("datacard.md", "datacard.json"):
            (out / name).unlink()
    return hk.writer_argv(command, tmp_path, out, *extra)


def _files(out: Path) -> dict[str, bytes]:
    """What a command wrote at ``out`` (a folder, or the files named after it), with its path taken out of the
    bytes, and the parts that record the run's own time (the manifest's and card's ``run``, the rendered card)
    or a random id (``datasets``' ``_fingerprint``) left out."""
    if out.is_dir():
        paths = [p for p in out.rglob("*") if p.is_file() and "_state" not in p.relative_to(out).parts]
    else:
        paths = [p for p in out.parent.iterdir() if p.is_file() and p.name.startswith(out.name)]
    files = {}
    for p in paths:
        rel = str(p.relative_to(out)) if out.is_dir() else "OUT" + p.name[len(out.name):]
        if rel.endswith("datacard.md") or p.name.startswith("."):  # the card renders the run's time; a lock
            continue
        data = p.read_bytes().replace(str(out).encode(), b"OUT").replace(out.name.encode(), b"OUT")
        for keys, suffix in UNTIMED:
            if rel.endswith(suffix):
                doc = inner = json.loads(data)
                for key in keys[:-1]:
                    inner = inner.get(key) if isinstance(inner.get(key), dict) else {}
                inner.pop(keys[-1], None)
                data = json.dumps(doc, sort_keys=True).encode()
        files[rel] = data
    return files


OUT = "written-here"  # the output's name: taken out of the files' bytes, so never a word they hold otherwise
# what differs between two runs of the same command and data: the run's time and memory, a random id `datasets`
# gives a save, what the SFT parity check looked at (it skips the verdicts earlier runs cached: sft/verdicts.py),
# and the requests synth's process sent (a resumed or cached run sends fewer; `usage_generated` is the whole output's)
UNTIMED = [(("run",), "manifest.json"), (("run",), "datacard.json"), (("_fingerprint",), "state.json"),
           (("report", "parity"), "manifest.json"), (("usage_this_run",), "manifest.json")]


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("command", COMMANDS)
def test_killed_midway_then_the_same_command_ends_with_the_bytes_of_a_clean_run(command, tmp_path, runs):
    out = tmp_path / OUT
    argv = _setup(command, tmp_path, out)
    card = _files(out) if command == "card" else None
    spec = KILL.get(command, JOB_KILL)
    killed = subprocess.run([sys.executable, "-c", KILLED, spec, str(out), *argv], capture_output=True, text=True,
                            timeout=120)
    assert killed.returncode == -9, killed.stdout + killed.stderr
    again = hk.cli(*argv)
    assert again.returncode == 0, again.stderr
    if command == "card":  # the card the run's own finalize wrote, before it was removed
        clean_out = tmp_path / "clean"
        hk.pretrain([hk.docs(tmp_path / "run-in" / "docs.jsonl", 20)], clean_out, tokenizer="default")
        assert _files(out) == {**card, **{k: v for k, v in _files(clean_out).items() if k.startswith("datacard")}}
        return
    clean = tmp_path / "clean"
    assert main([*argv[:argv.index(str(out))], str(clean), *argv[argv.index(str(out)) + 1:]]) == 0
    got, want = _files(out), _files(clean)
    assert sorted(got) == sorted(want)
    assert [k for k in want if got[k] != want[k]] == []
    assert not [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp")]


@pytest.mark.parametrize("command", COMMANDS)
def test_a_rerun_with_overwrite_keeps_a_users_file(command, tmp_path, capsys, runs):
    out = tmp_path / OUT
    argv = _setup(command, tmp_path, out)
    assert main(argv) == 0, capsys.readouterr().err
    mine = out / "notes" / "mine.txt" if out.is_dir() else out.with_name(out.name + ".notes")
    mine.parent.mkdir(exist_ok=True)
    mine.write_text("mine")
    again = argv if command in OWN_RERUN else hk.writer_argv(command, tmp_path, out, "--overwrite")
    assert main(again) == 0, capsys.readouterr().err
    assert mine.read_text() == "mine"


@pytest.mark.parametrize("command", COMMANDS)
def test_a_folder_tokenmill_did_not_write_is_refused_untouched(command, tmp_path, capsys):
    out = tmp_path / OUT
    out.mkdir()
    (out / "theirs.txt").write_text("their file")
    if command == "card":
        (out / "manifest.json").write_text(json.dumps({"track": "pretrain", "counts": {"kept": 1}}))
    before = _tree(out)
    for argv in (_setup(command, tmp_path, out),
                 *([] if command in OWN_RERUN else [hk.writer_argv(command, tmp_path, out, "--overwrite")])):
        assert main(argv) == 1
        err = capsys.readouterr().err
        assert str(out) in err and "Traceback" not in err, err
        assert _tree(out) == before  # not even a lock file


@pytest.mark.parametrize("command", COMMANDS)
def test_a_second_run_into_a_busy_out_is_refused_naming_the_first(command, tmp_path, runs):
    out = tmp_path / OUT
    argv = _setup(command, tmp_path, out)
    first = subprocess.Popen([sys.executable, "-c", hk.PAUSED, PAUSE.get(command, JOB_PAUSE), *argv],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = first.stdout.readline()
        assert line.strip() == "paused", line + first.stderr.read()
        second = hk.cli(*argv)
    finally:
        _, err = first.communicate(input="", timeout=120)
    assert second.returncode == 1 and f"in use by another tokenmill run (pid {first.pid})" in second.stderr, \
        second.stdout + second.stderr
    assert first.returncode == 0, err


@pytest.mark.parametrize("command", COMMANDS)
def test_dry_run_writes_nothing(command, tmp_path, capsys):
    out = tmp_path / OUT
    argv = _setup(command, tmp_path, out, "--dry-run")
    before = _tree(tmp_path)
    assert main(argv) == 0, capsys.readouterr().err
    assert "dry run" in capsys.readouterr().out
    assert _tree(tmp_path) == before
    assert command == "card" or not list(tmp_path.glob(f"{OUT}*"))
