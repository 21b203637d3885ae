"""pref/inputs.py: every preference layout read into one Pair; bad records are rejects naming what to change."""

from __future__ import annotations

import json

import pytest

from tokenmill.errors import ConfigError
from tokenmill.pref.inputs import read_pair, read_pairs
from tokenmill.route.classify import classify_rows

PAIR = {"style": "preference", "prompt": "prompt", "chosen": "chosen", "rejected": "rejected"}


def _routed(rows):
    kind, _, _, schema, _ = classify_rows(rows, format="jsonl")
    assert kind == "preference"
    return schema


def _texts(turns):
    return [(m["role"], m["content"]) for m in turns]


def test_trl_standard_is_text_form():
    p = read_pair({"prompt": "The sky is", "chosen": " blue.", "rejected": " green."}, 1, source="a", schema=PAIR)
    assert (p.form, p.prompt, p.chosen, p.rejected) == ("text", "The sky is", " blue.", " green.")


def test_trl_conversational():
    row = {"prompt": [{"role": "user", "content": "Sky?"}], "chosen": [{"role": "assistant", "content": "Blue."}],
           "rejected": [{"role": "assistant", "content": "Green."}]}
    p = read_pair(row, 1, source="a", schema=_routed([row]))
    assert p.form == "chat" and _texts(p.prompt) == [("user", "Sky?")]
    assert _texts(p.chosen) == [("assistant", "Blue.")] and _texts(p.rejected) == [("assistant", "Green.")]


def test_implicit_prompt_is_the_common_prefix():
    convo = [{"role": "user", "content": "Sky?"}]
    row = {"chosen": convo + [{"role": "assistant", "content": "Blue."}],
           "rejected": convo + [{"role": "assistant", "content": "Green."}]}
    p = read_pair(row, 1, source="a", schema=_routed([row]))
    assert _texts(p.prompt) == [("user", "Sky?")] and _texts(p.chosen) == [("assistant", "Blue.")]


def test_implicit_text_prompt_moves_the_space_to_the_completions():
    row = {"chosen": "The sky is blue.", "rejected": "The sky is green."}
    p = read_pair(row, 1, source="a", schema={"style": "preference", "chosen": "chosen", "rejected": "rejected"})
    assert (p.prompt, p.chosen, p.rejected) == ("The sky is", " blue.", " green.")


def test_llamafactory_conversations_with_single_turns():
    row = {"conversations": [{"from": "system", "value": "Be brief."}, {"from": "human", "value": "Hi"}],
           "chosen": {"from": "gpt", "value": "Hello!"}, "rejected": {"from": "gpt", "value": "Go away."}}
    p = read_pair(row, 1, source="a", schema=_routed([row]))
    assert _texts(p.prompt) == [("system", "Be brief."), ("user", "Hi")]
    assert _texts(p.chosen) == [("assistant", "Hello!")] and _texts(p.rejected) == [("assistant", "Go away.")]


def test_llamafactory_messages_with_typed_parts():
    user = {"role": "user", "content": [{"type": "text", "text": "Name a "}, {"type": "text", "text": "color"}]}
    row = {"chosen_messages": [user, {"role": "assistant", "content": [{"type": "text", "text": "Blue"}]}],
           "rejected_messages": [user, {"role": "assistant", "content": [{"type": "text", "text": "Seven"}]}]}
    p = read_pair(row, 1, source="a", schema=_routed([row]))
    assert _texts(p.prompt) == [("user", "Name a color")] and _texts(p.rejected) == [("assistant", "Seven")]


def test_kto_prompt_completion_and_messages():
    row = {"prompt": "Sky?", "completion": "Green.", "label": False}
    p = read_pair(row, 1, source="a", schema=_routed([row]))
    assert (p.paired, p.label, p.chosen) == (False, False, "Green.")
    row = {"messages": [{"role": "user", "content": "Sky?"}, {"role": "assistant", "content": "Blue."}], "label": True}
    p = read_pair(row, 1, source="a", schema=_routed([row]))
    assert p.label is True and _texts(p.prompt) == [("user", "Sky?")] and _texts(p.chosen) == [("assistant", "Blue.")]


def test_kto_record_without_label_is_a_reject_naming_the_label():
    schema = _routed([{"prompt": "a", "completion": "b", "label": True}])
    kept, rejects = read_pairs([{"prompt": "a", "completion": "b"}], [7], source="kto.jsonl", schema=schema)
    assert not kept and (rejects[0].source, rejects[0].loc, rejects[0].reason) == ("kto.jsonl", 7, "missing_label")
    assert "boolean 'label'" in rejects[0].detail


def test_ratings_kept_as_metadata():
    row = {"prompt": "p", "chosen": "a", "rejected": "b", "chosen-rating": 5, "rejected-rating": 2.5}
    p = read_pair(row, 1, source="a", schema=PAIR)
    assert p.meta == {"chosen_rating": 5, "rejected_rating": 2.5} and p.margin == 2.5


@pytest.mark.parametrize("row, reason", [
    ({"chosen": [{"role": "user", "content": "A"}, {"role": "assistant", "content": "x"}],
      "rejected": [{"role": "user", "content": "B"}, {"role": "assistant", "content": "x"}]}, "prompt_differs"),
    ({"chosen": [{"role": "user", "content": "A"}, {"role": "assistant", "content": "x"}],
      "rejected": [{"role": "user", "content": "A"}, {"role": "assistant", "content": "x"}]}, "identical_completions"),
    ({"chosen": 3, "rejected": "b", "prompt": "p"}, "wrong_type"),
    ({"prompt": "p", "rejected": "b"}, "missing_field"),
    ({"prompt": "p", "chosen": "a", "rejected": "b", "chosen-rating": "high"}, "wrong_type"),
])
def test_schema_errors_are_rejects_with_file_line_and_reason(row, reason):
    schema = {"style": "preference", "prompt": "prompt" if "prompt" in row else None, "chosen": "chosen",
              "rejected": "rejected"}
    kept, rejects = read_pairs([row], [3], source="pairs.jsonl", schema=schema)
    assert not kept and [(r.source, r.loc, r.reason) for r in rejects] == [("pairs.jsonl", 3, reason)]


def test_an_explicit_mapping_reads_other_column_names(tmp_path):
    from tokenmill.job.options import JobOptions
    from tokenmill.pref.run import run_pref
    from tokenmill.shards.pairs import PreferenceDataset

    src = tmp_path / "odd.jsonl"
    src.write_text("".join(json.dumps({"question": f"q{i}?", "good": f"yes {i}", "bad": "no"}) + "\n"
                           for i in range(3)))
    schema = {"odd.jsonl": {"style": "preference", "prompt": "question", "chosen": "good", "rejected": "bad"}}
    m = run_pref([str(src)], out=tmp_path / "out", tokenizer="default", options=JobOptions(workers=1), schemas=schema)
    assert m["counts"]["kept"] == 3 and len(PreferenceDataset(tmp_path / "out")) == 3
    with pytest.raises(ConfigError, match="'rejected' must name a column"):
        run_pref([str(src)], out=tmp_path / "o2", tokenizer="default", schemas={"*": {"chosen": "good"}})
