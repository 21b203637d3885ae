"""Directories nested deeper than Python's recursion limit are walked like any other (the walk keeps its
own stack), in the same order."""

from __future__ import annotations

import os

import hostilekit as hk
import pytest

from tokenmill.io.paths import expand_inputs_report


@pytest.fixture
def deep_tree(tmp_path):
    """Removes what a test nested below ``tmp_path/in``, bottom up (``shutil.rmtree``, pytest's clean-up,
    recurses once per level)."""
    yield tmp_path / "in"
    found, stack = [], [str(tmp_path / "in")]
    while stack:  # os.walk recurses once per level too (before Python 3.12)
        top = stack.pop()
        found.append(top)
        for entry in os.scandir(top):
            if entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)
            else:
                os.unlink(entry.path)
    for top in reversed(found):
        os.rmdir(top)


def _nest(root, depth: int):
    """``root/d/d/.../d`` (``depth`` levels) with a corpus at the top and at the bottom."""
    hk.docs(root / "top.jsonl", 3)
    deep = str(root)
    for _ in range(depth):  # os.makedirs recurses once per level
        deep = os.path.join(deep, "d")
        os.mkdir(deep)
    hk.docs(type(root)(deep) / "bottom.jsonl", 2, start=3)
    (root / "d" / "_SUCCESS").write_text("")
    return deep


def test_a_directory_nested_1500_deep_is_walked(tmp_path, deep_tree):
    deep = _nest(deep_tree, 1500)
    files, skipped = expand_inputs_report([str(tmp_path / "in")])
    assert [f.path for f in files] == [os.path.join(deep, "bottom.jsonl"), str(tmp_path / "in" / "top.jsonl")]
    assert skipped == [{"path": str(tmp_path / "in" / "d" / "_SUCCESS"), "reason": "hidden_or_underscore"}]
    manifest = hk.pretrain([tmp_path / "in"], tmp_path / "out")
    assert manifest["counts"]["kept"] == 5


def test_a_glob_over_deep_directories_is_walked(tmp_path, deep_tree):
    deep = _nest(deep_tree, 1500)
    files, _ = expand_inputs_report([str(tmp_path / "in" / "*")])
    assert [f.path for f in files] == [os.path.join(deep, "bottom.jsonl"), str(tmp_path / "in" / "top.jsonl")]
