"""Which EOS (and BOS) pretraining appends is said with the tokenizer line; a chat end-of-turn EOS
(``<|im_end|>`` of an instruct tokenizer) is warned about; ``--eos TOKEN`` (CLI, pipeline file, API) picks
another, checked against the vocabulary before any work."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from tokenmill.cli import main
from tokenmill.errors import TokenizerError
from tokenmill.pretrain import run_pretrain
from tokenmill.shards import open_shards

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sft"))
import chatkit as ck  # noqa: E402


@pytest.fixture()
def instruct(tmp_path):
    """A tokenizer whose named EOS is the chat end-of-turn token, as instruct models' are."""
    return ck.build_tokenizer_dir(tmp_path / "tok", bos="<s>", eos="<|im_end|>")


@pytest.fixture()
def docs(tmp_path):
    src = tmp_path / "docs.jsonl"
    src.write_text("".join(json.dumps({"text": f"The quick brown fox number {i} jumps over the lazy dog."}) + "\n"
                           for i in range(12)))
    return src


def _last_ids(out: Path) -> set[int]:
    shards = open_shards(out)
    return {int(shards.doc_tokens(i)[-1]) for i in range(len(shards))}


def test_a_chat_eos_gives_way_to_the_document_token_and_the_summary_says_so(instruct, docs, tmp_path, capsys):
    """An instruct tokenizer names ``<|im_end|>`` as EOS; a base model's documents end with ``<|endoftext|>``."""
    assert main(["pretrain", str(docs), "--tokenizer", str(instruct), "--out", str(tmp_path / "a"),
                 "--workers", "1", "--no-progress"]) == 0
    out = capsys.readouterr().out
    tokenizer_line = next(x for x in out.splitlines() if x.startswith("tokenizer:"))
    assert "appends EOS '<|endoftext|>' (id 0)" in tokenizer_line, tokenizer_line
    said = [x for x in out.splitlines() if "end-of-turn" in x]
    assert len(said) == 1 and "'<|im_end|>'" in said[0] and "'<|endoftext|>'" in said[0] and "--eos" in said[0]
    assert _last_ids(tmp_path / "a") == {0}
    eos = json.loads((tmp_path / "a" / "manifest.json").read_text())["config"]["eos"]
    assert (eos["token"], eos["id"], eos["given"], eos["tokenizer_eos"]) == ("<|endoftext|>", 0, False, "<|im_end|>")


def test_a_chat_eos_without_a_document_token_is_kept_and_warned_about(tmp_path, docs, capsys):
    specials = [t for t in ck.SPECIALS if t not in ("<|endoftext|>", "</s>")]
    tok = ck.build_tokenizer_dir(tmp_path / "tok2", bos="<s>", eos="<|im_end|>", specials=specials)
    assert main(["pretrain", str(docs), "--tokenizer", str(tok), "--out", str(tmp_path / "a"),
                 "--workers", "1", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "appends EOS '<|im_end|>'" in out
    warning = next(x for x in out.splitlines() if "end-of-turn" in x)
    assert warning.startswith("warning:") and "--eos TOKEN" in warning
    assert _last_ids(tmp_path / "a") == {specials.index("<|im_end|>")}


def test_choose_eos_keeps_a_given_token_and_a_document_eos():
    from tokenmill.pretrain.run import choose_eos
    from tokenmill.tokenize import load_tokenizer

    default = load_tokenizer("default")  # cl100k_im: <|endoftext|> already, so golden outputs do not move
    tok, note = choose_eos(default, None)
    assert tok is default and note == {"token": "<|endoftext|>", "id": 100257, "given": False}
    tok, note = choose_eos(default, "<|im_end|>")
    assert (tok.eos_token, note["given"], "warning" in note) == ("<|im_end|>", True, False)


def test_eos_flag_api_and_pipeline_file_pick_the_appended_token(instruct, docs, tmp_path, capsys):
    assert main(["pretrain", str(docs), "--tokenizer", str(instruct), "--out", str(tmp_path / "b"),
                 "--eos", "<|endoftext|>", "--workers", "1", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "appends EOS '<|endoftext|>' (id 0)" in out and "end-of-turn" not in out
    assert _last_ids(tmp_path / "b") == {0}
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert manifest["tokenizer"]["eos_id"] == 0 and manifest["tokenizer"]["eos_token"] == "<|endoftext|>"
    cfg = tmp_path / "pipeline.yaml"
    cfg.write_text("eos: '</s>'\n")
    assert main(["pretrain", str(docs), "--tokenizer", str(instruct), "--out", str(tmp_path / "c"),
                 "--config", str(cfg), "--workers", "1", "--no-progress"]) == 0
    assert _last_ids(tmp_path / "c") == {4}
    m = run_pretrain([str(docs)], out=str(tmp_path / "d"), tokenizer=str(instruct), eos="<|endoftext|>",
                     workers=1, progress=False)
    assert m["tokenizer"]["eos_id"] == 0 and np.all([_last_ids(tmp_path / "d") == {0}])


def test_an_eos_outside_the_vocabulary_is_refused_before_any_work(instruct, docs, tmp_path, capsys):
    with pytest.raises(TokenizerError, match="not a token"):
        run_pretrain([str(docs)], out=str(tmp_path / "e"), tokenizer=str(instruct), eos="<|nope|>", workers=1)
    assert not (tmp_path / "e").exists()
    assert main(["pretrain", str(docs), "--tokenizer", str(instruct), "--out", str(tmp_path / "f"),
                 "--eos", "<|nope|>", "--workers", "1", "--no-progress"]) == 1
    assert "not a token" in capsys.readouterr().err


def test_eos_in_an_sft_pipeline_file_is_refused(instruct, tmp_path, capsys):
    src = tmp_path / "chats.jsonl"
    src.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant",
                                                                               "content": "yo"}]}) + "\n")
    cfg = tmp_path / "pipeline.yaml"
    cfg.write_text("eos: '</s>'\n")
    assert main(["sft", str(src), "--tokenizer", str(instruct), "--out", str(tmp_path / "o"), "--config", str(cfg),
                 "--workers", "1", "--no-progress"]) == 1
    assert "eos: the appended end-of-document token is `tokenmill pretrain`'s" in capsys.readouterr().err
