"""The language identifier's tables, cached under $TOKENMILL_CACHE: read back memory-mapped, with the same
labels and probability bits as a fresh load; another model file or other candidates never reuse an entry;
an entry that does not read back is ignored and written again."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

pytest.importorskip("py3langid")

from py3langid.langid import MODEL_DIR, MODEL_FILE, LanguageIdentifier  # noqa: E402

from tokenmill.curate.filters import langid_cache  # noqa: E402
from tokenmill.curate.filters.langid_batch import BatchIdentifier  # noqa: E402
from tokenmill.curate.filters.language import _load  # noqa: E402

TEXTS = ["The committee examined the evidence.", "Der Ausschuss prüfte die Beweise.", "", "a",
         "Le comité a examiné les preuves.", "委员会审查了证据。", "Комитет изучил доказательства."] * 3
SHIPPED = MODEL_DIR / MODEL_FILE


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENMILL_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / "langid"


def fresh(candidates=None):
    ident = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    if candidates:
        ident.set_languages(candidates)
    return BatchIdentifier(ident).classify(TEXTS)


def same(got, want) -> None:
    assert got[0] == want[0] and got[1].tobytes() == want[1].tobytes()


def test_a_cached_load_is_memory_mapped_and_classifies_as_a_fresh_one(cache):
    same(_load(None, None).classify(TEXTS), fresh())
    (entry,) = cache.iterdir()
    cached = _load(None, None)
    assert isinstance(np.asarray(cached.ptc).base, np.memmap)  # the entry's file, not a copy
    assert not cached.ptc.flags.writeable
    same(cached.classify(TEXTS), fresh())
    assert list(cache.iterdir()) == [entry]


def test_other_candidates_or_another_model_file_never_reuse_an_entry(cache, tmp_path):
    same(_load(None, None).classify(TEXTS), fresh())
    same(_load(None, ["en", "de"]).classify(TEXTS), fresh(["en", "de"]))
    assert len(list(cache.iterdir())) == 2
    assert langid_cache.entry_key(SHIPPED, ["de", "en"]) == langid_cache.entry_key(SHIPPED, ["en", "de"])
    copy = tmp_path / "model.npz.xz"
    shutil.copyfile(SHIPPED, copy)
    assert langid_cache.entry_key(copy, []) == langid_cache.entry_key(SHIPPED, [])  # keyed by bytes, not by path
    with open(copy, "ab") as fh:
        fh.write(b"\0")
    assert langid_cache.entry_key(copy, []) != langid_cache.entry_key(SHIPPED, [])


@pytest.mark.parametrize("damage", ["truncate", "garbage", "index", "missing", "shape"])
def test_an_entry_that_does_not_read_back_is_ignored_and_written_again(cache, damage):
    _load(None, ["en", "de", "fr"])
    (entry,) = cache.iterdir()
    target = entry / "nextrow.npy"
    if damage == "truncate":
        target.write_bytes(target.read_bytes()[: target.stat().st_size // 2])
    elif damage == "garbage":
        target.write_bytes(b"not an array")
    elif damage == "index":
        (entry / "tables.json").write_text("{")
    elif damage == "missing":
        (entry / "ptc.npy").unlink()
    else:
        np.save(entry / "pc.npy", np.zeros(5, dtype=np.float32))  # another model's
    assert langid_cache.read_entry(entry) is None
    same(_load(None, ["en", "de", "fr"]).classify(TEXTS), fresh(["en", "de", "fr"]))
    assert langid_cache.read_entry(entry) is not None  # written again
    assert [p.name for p in cache.iterdir()] == [entry.name]  # no temporary directory left


def test_a_cache_that_cannot_be_written_only_costs_the_load(tmp_path, monkeypatch):
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("TOKENMILL_CACHE", str(tmp_path / "file"))  # a file: nothing can be created under it
    same(_load(None, ["en", "fr"]).classify(TEXTS), fresh(["en", "fr"]))


def test_unknown_candidates_of_a_model_file_are_refused(cache, tmp_path):
    with pytest.raises(ValueError, match="the model has no label"):
        _load(str(SHIPPED), ["en", "qq"])
    assert not cache.exists() or not list(cache.iterdir())
