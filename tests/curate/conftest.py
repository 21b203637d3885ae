"""Fixtures the curation tests share."""

from __future__ import annotations

import contextlib
import io
import zipfile

import pytest


@pytest.fixture(scope="session")
def realdata_quality_model(shared_data, tmp_path_factory) -> tuple[str, str]:
    """A quality model trained once per session by ``tokenmill quality train`` on the shared quality sets
    (positives: OpenStax Anatomy; negatives: NLTK's raw web text), and what the command printed.

    Training quantises the model (about a minute here); the tests that use it are one group of
    ``SERIAL_GROUPS`` (tests/conftest.py), so one worker trains it for all of them.
    """
    from tokenmill.cli import main

    pytest.importorskip("fasttext")
    tmp = tmp_path_factory.mktemp("quality")
    quality = shared_data / "curation" / "quality"
    with zipfile.ZipFile(quality / "nltk_webtext.zip") as zf:  # raw web text: the negatives
        zf.extractall(tmp / "neg")
    path = tmp / "quality.bin"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = main(["quality", "train", "--positive", str(quality / "openstax_anatomy"), "--negative",
                     str(tmp / "neg" / "webtext"), "--text-mode", "file", "--out", str(path)])
    assert code == 0, printed.getvalue()
    return str(path), printed.getvalue()
