"""pref/tokenize.py against TRL's own DPO preparation (DPOTrainer._prepare_dataset, TRL 1.x) on every template
family of the SFT parity tests, and the loss mask on the completions by the SFT rule."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from tokenmill.pref.inputs import read_pair
from tokenmill.pref.tokenize import tokenize_pairs
from tokenmill.sft.render import MaskPolicy
from tokenmill.sft.template import load_template
from tokenmill.tokenize import load_tokenizer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sft"))
import chatkit as ck  # noqa: E402

FAMILIES = ["LLAMA3", "MISTRAL", "GENERATION", "QWEN3", "GEMMA", "R1", "LLAMA2", "chatml"]
SCHEMA = {"style": "preference", "prompt": "prompt", "chosen": "chosen", "rejected": "rejected"}
ROWS = [
    {"prompt": [{"role": "user", "content": "Hello there, how are you?"}],
     "chosen": [{"role": "assistant", "content": "Sure! Here you go."}],
     "rejected": [{"role": "assistant", "content": "The answer is 42."}]},
    {"prompt": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "question one"},
                {"role": "assistant", "content": "answer"}, {"role": "user", "content": "weather Paris?"}],
     "chosen": [{"role": "assistant", "content": "Paris is sunny."}],
     "rejected": [{"role": "assistant", "content": "London."}]},
]
TEXT_ROWS = [{"prompt": "The quick brown fox", "chosen": " jumps over the lazy dog.", "rejected": " is brown."},
             {"prompt": "1 + 1 =", "chosen": " 2.", "rejected": " 42.</s>"}]


@pytest.fixture(scope="module")
def toks(tmp_path_factory):
    d = ck.build_tokenizer_dir(tmp_path_factory.mktemp("tok"), specials=ck.FAMILY_SPECIALS)
    return load_tokenizer(d), ck.hf_tokenizer(d)


def trl_columns(hf, rows: list[dict]) -> list[dict]:
    """TRL's own tokenization: DPOTrainer._prepare_dataset on these rows (no model needed)."""
    datasets = pytest.importorskip("datasets")
    dpo = pytest.importorskip("trl.trainer.dpo_trainer")
    args = SimpleNamespace(dataset_num_proc=None, max_length=None, truncation_mode="keep_start")
    prepared = dpo.DPOTrainer._prepare_dataset(SimpleNamespace(_tokenizer=hf), datasets.Dataset.from_list(rows), hf,
                                                args, "test")
    return [{k: ex[k] for k in ("prompt_ids", "chosen_ids", "rejected_ids")} for ex in prepared]


def ours(tok, rows, template):
    pairs = [read_pair(r, i, source="t", schema=SCHEMA) for i, r in enumerate(rows)]
    got = tokenize_pairs(pairs, tokenizer=tok, template=template, policy=MaskPolicy())
    return got


@pytest.mark.parametrize("family", FAMILIES)
def test_equal_to_trl_on_every_template_family(toks, family):
    tok, hf = toks
    template = load_template() if family == "chatml" else load_template(getattr(ck, family))
    hf.chat_template = template.source
    got = ours(tok, ROWS, template)
    want = trl_columns(hf, ROWS)
    for g, w in zip(got, want):
        assert {"prompt_ids": g.prompt_ids.tolist(), "chosen_ids": g.chosen_ids.tolist(),
                "rejected_ids": g.rejected_ids.tolist()} == w
        assert len(g.chosen_mask) == len(g.chosen_ids) and len(g.rejected_mask) == len(g.rejected_ids)


def test_standard_text_pairs_equal_to_trl(toks):
    tok, hf = toks
    got = ours(tok, TEXT_ROWS, load_template())
    for g, w in zip(got, trl_columns(hf, TEXT_ROWS)):
        assert [g.prompt_ids.tolist(), g.chosen_ids.tolist(), g.rejected_ids.tolist()] == list(w.values())
        assert g.chosen_mask.all() and g.rejected_mask.all()  # a text completion is trained whole, EOS included


def test_completion_mask_is_the_sft_rule(toks):
    """ChatML: the reply and its <|im_end|> are trained, the newline after it is not; nothing of the prompt."""
    tok, _ = toks
    g = ours(tok, ROWS[:1], load_template())[0]
    trained = tok.decode(g.chosen_ids[g.chosen_mask.astype(bool)].tolist())
    assert trained == "Sure! Here you go.<|im_end|>"
    assert tok.decode(g.chosen_ids[~g.chosen_mask.astype(bool)].tolist()) == "\n"


def test_prompt_rendered_differently_alone_is_counted_and_its_history_untrained(toks):
    """Qwen3-style: the history's reasoning block appears in the prompt alone, not in the whole render; the split
    falls inside the prompt (as TRL's), and the prompt's earlier assistant turn stays untrained."""
    tok, _ = toks
    g = ours(tok, ROWS[1:], load_template(ck.QWEN3))[0]
    assert g.prompt_cut.startswith("<think>")
    trained = tok.decode(g.chosen_ids[g.chosen_mask.astype(bool)].tolist())
    assert trained == "Paris is sunny.<|im_end|>"
    assert not np.any(g.chosen_mask[:5])
