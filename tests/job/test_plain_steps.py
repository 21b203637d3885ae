"""A plain callable step runs in the track's one cascade: its removals reach the decision ledger with a
reason per row, like a document step's, and ``tokenmill funnel`` replays them from the ledger."""

from __future__ import annotations

import json
import pickle
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tokenmill.curate.report.funnel import parse_sets, recompute
from tokenmill.errors import ConfigError
from tokenmill.pretrain import run_pretrain
from tokenmill.report.ledger import ledger_problems, read_ledger
from tokenmill.steps.plain import PlainStep, as_doc_step


def drop_odd_and_short(batch: pa.RecordBatch) -> tuple[pa.RecordBatch, dict[str, int]]:
    """Two reasons in one call: documents with 'odd' in them, and documents under 30 characters."""
    text = batch.column("text")
    odd = pc.match_substring(text, "odd")
    short = pc.less(pc.utf8_length(text), 30)
    gone = pc.or_(odd, short)
    counts = {"odd": pc.sum(odd).as_py() or 0, "short": pc.sum(pc.and_(short, pc.invert(odd))).as_py() or 0}
    return batch.filter(pc.invert(gone)), counts


def shout(batch: pa.RecordBatch) -> tuple[pa.RecordBatch, dict[str, int]]:
    """A plain step that rewrites the text."""
    return batch.set_column(batch.schema.get_field_index("text"), "text", pc.utf8_upper(batch.column("text"))), {}


@dataclass(frozen=True)
class MinChars:
    """A versioned plain step: its name carries its version, and its reasons are spelled with it."""

    min_chars: int
    name: str = "min_chars_v1"

    def __call__(self, batch: pa.RecordBatch) -> tuple[pa.RecordBatch, dict[str, int]]:
        keep = pc.greater_equal(pc.utf8_length(batch.column("text")), self.min_chars)
        return batch.filter(keep), {"min_chars_v1:too_short": len(batch) - (pc.sum(keep).as_py() or 0)}


def _corpus(tmp_path):
    src = tmp_path / "d.jsonl"
    texts = ["an even document that is long enough to stay", "an odd document that is long enough to go",
             "tiny", "another even document long enough to be kept", "short odd"]
    src.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    return src


def test_a_plain_steps_removals_reach_the_ledger_with_a_reason_per_row(tmp_path):
    out = tmp_path / "shards"
    manifest = run_pretrain([str(_corpus(tmp_path))], out=str(out), tokenizer="default", workers=1, progress=False,
                            steps=[drop_odd_and_short])
    assert ledger_problems(out, manifest) == []
    rows = read_ledger(out, manifest).to_pylist()
    name = PlainStep(drop_odd_and_short).name
    assert [r["reason"] for r in rows] == [None, f"{name}_v1:odd", f"{name}_v1:short", None, f"{name}_v1:odd"]
    assert manifest["counts"]["filtered"] == {f"{name}_v1:odd": 2, f"{name}_v1:short": 1}
    assert recompute(out, {})["kept"] == 2
    with pytest.raises(ConfigError, match="plain callable step"):
        recompute(out, parse_sets([f"{name}.threshold=3"]))


def test_a_versioned_plain_step_keeps_its_reasons_and_a_rewrite_is_kept(tmp_path):
    out = tmp_path / "shards"
    manifest = run_pretrain([str(_corpus(tmp_path))], out=str(out), tokenizer="default", workers=1, progress=False,
                            steps=[MinChars(min_chars=10), shout])
    assert manifest["counts"]["filtered"] == {"min_chars_v1:too_short": 2}  # the spelling the step gives
    assert ledger_problems(out, manifest) == []
    from tokenmill.shards import open_shards
    from tokenmill.tokenize import load_tokenizer

    tok = load_tokenizer("default")
    ds = open_shards(out)
    assert tok.decode(ds[0]["input_ids"].tolist()[:-1]) == "AN EVEN DOCUMENT THAT IS LONG ENOUGH TO STAY"


def test_plain_steps_pickle_and_document_steps_pass_through():
    wrapped = as_doc_step(drop_odd_and_short)
    assert isinstance(wrapped, PlainStep) and pickle.loads(pickle.dumps(wrapped)).name == wrapped.name
    length = MinChars(min_chars=3)
    assert as_doc_step(as_doc_step(length)).name == "min_chars"


def test_a_plain_step_that_drops_columns_is_refused(tmp_path):
    def bad(batch):
        return batch.select(["text"]), {}
    with pytest.raises(ConfigError, match="dropped columns"):
        PlainStep(bad).score(pa.record_batch({"id": ["a"], "text": ["x"]}))
