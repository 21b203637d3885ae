"""Tools are normalised to ``{"type": "function", "function": {...}}`` whatever the dataset's style, and tool
calls without an id get deterministic 9-character ids (the form Mistral's templates require)."""

from __future__ import annotations

import json
import shutil

import pytest

from tokenmill.sft.normalize import normalize_rows

SHAREGPT = {"record": "Conversation", "style": "sharegpt", "messages": "conversations", "role_key": "from",
            "content_key": "value", "tools": "tools", "system": None, "reasoning": None, "id": None}
WEATHER = {"name": "get_weather", "description": "Weather of a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}


def glaive_row(city: str, tools) -> dict:
    return {"conversations": [
        {"from": "human", "value": f"Weather in {city}?"},
        {"from": "function_call", "value": json.dumps({"name": "get_weather", "arguments": {"city": city}})},
        {"from": "observation", "value": '{"temp": 21}'},
        {"from": "gpt", "value": "21 degrees."},
    ], "tools": tools}


def normalize(rows):
    kept, rejects = normalize_rows(rows, list(range(1, len(rows) + 1)), source="t.jsonl", schema=SHAREGPT)
    assert rejects == []
    return kept


@pytest.mark.parametrize("tools", [json.dumps([WEATHER]), [WEATHER], WEATHER, json.dumps(WEATHER),
                                   [{"type": "function", "function": WEATHER}], [{"function": WEATHER}]])
def test_every_tool_style_gives_the_same_wrapped_tools(tools):
    (conv,) = normalize([glaive_row("Paris", tools)])
    assert json.loads(conv["tools"]) == [{"type": "function", "function": WEATHER}]


def test_a_tool_without_name_or_function_is_a_counted_reject():
    rows = [glaive_row("Paris", [{"description": "nameless"}])]
    kept, rejects = normalize_rows(rows, [1], source="t.jsonl", schema=SHAREGPT)
    assert kept == [] and rejects[0].reason == "wrong_type" and "tool 0" in rejects[0].detail


def test_calls_without_ids_get_deterministic_nine_character_ids_shared_with_their_result():
    first = normalize([glaive_row("Paris", None), glaive_row("Rome", None)])
    again = normalize([glaive_row("Paris", None), glaive_row("Rome", None)])
    ids = [c["messages"][1]["tool_calls"][0]["id"] for c in first]
    assert ids == [c["messages"][1]["tool_calls"][0]["id"] for c in again]  # same record, same id
    assert ids[0] != ids[1] and all(len(i) == 9 and i.isalnum() for i in ids)
    assert [c["messages"][2]["tool_call_id"] for c in first] == ids


def test_ids_given_by_the_data_are_kept():
    row = {"conversations": [
        {"from": "human", "value": "Weather?"},
        {"from": "gpt", "value": None, "tool_calls": [{"id": "call_1", "type": "function",
                                                       "function": {"name": "w", "arguments": "{}"}}]},
        {"from": "observation", "value": "sunny"},
        {"from": "gpt", "value": "Sunny."},
    ], "tools": None}
    (conv,) = normalize([row])
    assert conv["messages"][1]["tool_calls"][0]["id"] == "call_1" and conv["messages"][2]["tool_call_id"] == "call_1"


def test_glaive_tool_calls_render_with_the_mistral_template(shared_data, tmp_path):
    """Real data: the Glaive tool-call demo under Mistral-7B-Instruct-v0.3's template. Before ids were given,
    191 of its 300 records were rejected with 'Tool call IDs should be alphanumeric strings with length 9!'."""
    from tokenmill.sft.run import run_sft

    tok = tmp_path / "mistral"
    tok.mkdir()
    shutil.copy(shared_data / "tokenizers" / "mistral-7b-instruct-v0.3_tokenizer.json", tok / "tokenizer.json")
    shutil.copy(shared_data / "chat_templates" / "mistral-7b-instruct-v0.3_tokenizer_config.json",
                tok / "tokenizer_config.json")
    src = shared_data / "sft" / "llamafactory_glaive_toolcall_en_demo.json"
    manifest = run_sft([str(src)], out=tmp_path / "out", tokenizer=str(tok), workers=1, verify=4, progress=False)
    rejected = manifest["counts"]["rejected"]
    assert "template_error" not in rejected, rejected
    assert manifest["report"]["parity"]["checked"] >= 1
