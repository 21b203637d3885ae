"""The Python API from a script without ``if __name__ == "__main__":``: it runs (in-process, one worker)
and says how to get several workers, instead of multiprocessing's bootstrapping traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from tokenmill._guard import _unguarded

BODY = """
from tokenmill.pretrain import run_pretrain

manifest = run_pretrain(["docs.jsonl"], out="out", tokenizer="default", workers=2, unit_bytes=20_000,
                        progress=False)
print("kept", manifest["counts"]["kept"], "units", manifest["run"]["units"])
"""


@pytest.fixture
def workdir(tmp_path):
    with open(tmp_path / "docs.jsonl", "w") as f:
        for i in range(200):
            f.write(json.dumps({"text": f"document {i} " * 40}) + "\n")
    return tmp_path


def run_script(workdir, source: str) -> subprocess.CompletedProcess:
    (workdir / "script.py").write_text(source)
    return subprocess.run([sys.executable, "script.py"], cwd=workdir, capture_output=True, text=True, timeout=180,
                          env={**os.environ, "PYTHONWARNINGS": "default"})


def test_a_script_without_the_guard_runs_names_the_guard_and_gives_the_same_bytes(workdir):
    unguarded = run_script(workdir, BODY)
    assert unguarded.returncode == 0 and "Traceback" not in unguarded.stderr, unguarded.stderr[-2000:]
    assert "kept 200" in unguarded.stdout
    assert 'if __name__ == "__main__":' in unguarded.stderr and "one worker" in unguarded.stderr
    first = {p.name: p.read_bytes() for p in (workdir / "out").glob("shard-*")}
    (workdir / "out").rename(workdir / "out-unguarded")
    guarded = "def main():\n" + textwrap.indent(BODY, "    ") + '\n\nif __name__ == "__main__":\n    main()\n'
    done = run_script(workdir, guarded)
    assert done.returncode == 0 and "one worker" not in done.stderr, done.stderr[-2000:]
    assert {p.name: p.read_bytes() for p in (workdir / "out").glob("shard-*")} == first


@pytest.mark.parametrize("source, unguarded", [
    ("x = 1\n", True),
    ('if __name__ == "__main__":\n    pass\n', False),
    ("if '__main__' == __name__:\n    pass\n", False),
    ('def f():\n    if __name__ == "__main__":\n        pass\n', True),
])
def test_guard_detection(tmp_path, source, unguarded):
    path = tmp_path / f"s{abs(hash(source))}.py"
    path.write_text(source)
    assert _unguarded(str(path)) is unguarded
