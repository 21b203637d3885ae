"""After Ctrl-C the CLI says how to resume; with ``--overwrite`` the same command would start over, so the
hint says to drop the flag."""

from __future__ import annotations

import pytest

from tokenmill import cli


def _interrupted(args):
    raise KeyboardInterrupt


@pytest.mark.parametrize("extra, hint", [
    ([], "run the same command again to resume"),
    (["--overwrite"], "run the same command again without --overwrite to resume"),
])
def test_the_hint_after_ctrl_c_names_overwrite_when_given(tmp_path, monkeypatch, capsys, extra, hint):
    (tmp_path / "a.txt").write_text("some text\n", encoding="utf-8")
    monkeypatch.setattr("tokenmill.cli.pretrain.run", _interrupted)
    code = cli.main(["pretrain", str(tmp_path / "a.txt"), "--out", str(tmp_path / "out"), *extra])
    assert code == cli.EXIT_INTERRUPTED
    assert f"interrupted: {hint}" in capsys.readouterr().err
