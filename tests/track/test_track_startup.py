"""Start-up: a one-worker run loads its tokenizer in place (no throwaway child process)."""

from __future__ import annotations

import trackkit as tk

from tokenmill.pretrain import run_pretrain
from tokenmill.shards import open_shards
from tokenmill.tokenize import isolated


def test_one_worker_loads_the_tokenizer_in_place(tmp_path, monkeypatch):
    started = []
    real = isolated.ProcessPoolExecutor

    def counting(*args, **kwargs):
        started.append(kwargs.get("max_workers"))
        return real(*args, **kwargs)

    monkeypatch.setattr(isolated, "ProcessPoolExecutor", counting)
    texts = tk.write_docs(tmp_path / "docs.jsonl", 20, seed=3)
    one = run_pretrain([str(tmp_path / "docs.jsonl")], out=tmp_path / "one", workers=1, progress=False)
    assert started == [] and one["counts"]["kept"] == len(texts)
    two = run_pretrain([str(tmp_path / "docs.jsonl")], out=tmp_path / "two", workers=2, progress=False,
                       unit_bytes=1024)
    assert started == [1] and two["counts"]["tokens"] == one["counts"]["tokens"]
    a, b = open_shards(tmp_path / "one"), open_shards(tmp_path / "two")
    assert [d["input_ids"].tolist() for d in a] == [d["input_ids"].tolist() for d in b]


def test_the_command_never_imports_pandas(tmp_path):
    """pyarrow imports pandas to ask whether a list is a pandas object; the `tokenmill` process answers no (a
    caller's own process, calling ``main(argv)``, keeps pyarrow's default)."""
    import os
    import subprocess
    import sys

    tk.write_docs(tmp_path / "docs.jsonl", 20, seed=3)
    code = ("import sys\nfrom tokenmill.cli import main\n"
            f"sys.argv = ['tokenmill', 'pretrain', {str(tmp_path / 'docs.jsonl')!r}, '--out', {str(tmp_path / 'out')!r}, "
            "'--workers', '1', '--no-progress', '--tokenizer', 'default']\n"
            "code = main()\nprint(code, 'pandas' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=os.environ, timeout=300)
    assert done.stdout.splitlines()[-1].split() == ["0", "False"], done.stderr[-2000:]
    assert open_shards(tmp_path / "out").lengths.sum() > 0
