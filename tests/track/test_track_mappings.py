"""Explicit schema mappings are checked against each input's fields before any work (nothing written)."""

from __future__ import annotations

import json

import pytest

from tokenmill.errors import ConfigError
from tokenmill.pretrain import run_pretrain
from tokenmill.sft.run import run_sft


@pytest.fixture()
def docs(tmp_path):
    src = tmp_path / "docs.jsonl"
    rows = [{"doc_id": f"d{i}", "body": f"document number {i} about rivers", "meta": {"url": f"https://e/{i}"}}
            for i in range(6)]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return src


@pytest.fixture()
def chats(tmp_path):
    src = tmp_path / "chats.jsonl"
    rows = [{"question": f"What is {i} + 1?", "answer": f"It is {i + 1}."} for i in range(6)]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    turns = tmp_path / "turns.jsonl"
    rows = [{"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": f"hello {i}"}]}
            for i in range(6)]
    turns.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return src, turns


def test_a_misspelled_document_field_is_refused_before_any_work(tmp_path, docs):
    out = tmp_path / "out"
    with pytest.raises(ConfigError) as err:
        run_pretrain([str(docs)], out=out, schemas={"*": {"text": "bdy", "id": "doc_id", "url": "meta.ulr"}},
                     workers=1, progress=False)
    text = str(err.value)
    assert "'bdy'" in text and "did you mean 'body'" in text and "doc_id, body, meta" in text
    assert "'meta' holds no key 'ulr' (did you mean 'url'?)" in text
    assert len(err.value.problems) == 2 and not out.exists()


def test_a_correct_mapping_with_a_dotted_path_runs(tmp_path, docs):
    m = run_pretrain([str(docs)], out=tmp_path / "out", schemas={"*": {"text": "body", "url": "meta.url"}},
                     workers=1, progress=False)
    assert m["counts"]["kept"] == 6


def test_unknown_keys_and_unmatched_paths_are_named(tmp_path, docs):
    with pytest.raises(ConfigError) as err:
        run_pretrain([str(docs)], out=tmp_path / "out", workers=1, progress=False,
                     schemas={"docs.jsonl": {"text": "body", "lisence": "x"}, "other.jsonl": {"text": "body"}})
    problems = err.value.problems
    assert any("unknown key 'lisence' (did you mean 'license'?)" in p for p in problems)
    assert any("schema['other.jsonl']: matches no input; inputs are: docs.jsonl" in p for p in problems)


def test_a_bad_sft_mapping_fails_before_the_output_exists(tmp_path, chats):
    out = tmp_path / "out"
    mapping = {"record": "Conversation", "style": "prompt_response", "prompt": "question", "respones": "answer"}
    with pytest.raises(ConfigError) as err:
        run_sft([str(chats[0])], out=out, schemas={"*": mapping}, workers=1, progress=False, verify=0)
    text = str(err.value)
    assert "unknown key 'respones' (did you mean 'response'?)" in text and "needs 'response'" in text
    assert not out.exists()


def test_sft_columns_and_turn_keys_are_checked_against_the_sample(tmp_path, chats):
    out = tmp_path / "out"
    pairs = {"record": "Conversation", "style": "prompt_response", "prompt": "questoin", "response": "answer"}
    turns = {"record": "Conversation", "style": "sharegpt", "messages": "conversations", "role_key": "role"}
    with pytest.raises(ConfigError) as err:
        run_sft([str(chats[0]), str(chats[1])], out=out, workers=1, progress=False, verify=0,
                schemas={"chats.jsonl": pairs, "turns.jsonl": turns})
    problems = err.value.problems
    assert len(problems) == 2 and not out.exists()
    assert "'prompt' names field 'questoin'" in problems[0] and "did you mean 'question'" in problems[0]
    assert "role_key 'role' is not a key of the turns in 'conversations'" in problems[1]
    assert "from, value" in problems[1]
    good = {**turns, "role_key": "from"}
    m = run_sft([str(chats[1])], out=out, workers=1, progress=False, verify=0, schemas={"*": good})
    assert m["counts"]["kept"] == 6


def test_step_specs_are_refused_before_any_work(tmp_path, docs):
    out = tmp_path / "out"
    with pytest.raises(ConfigError) as err:
        run_pretrain([str(docs)], out=out, steps=[{"name": "length", "min_chars": 5}, "length"], workers=1,
                     progress=False, schemas={"*": {"text": "body"}})
    assert err.value.problems == [
        "steps[0]: expected a step, got dict (a step spec: build it with tokenmill.steps.build.build_steps)",
        "steps[1]: expected a step, got str"]
    assert not out.exists()
