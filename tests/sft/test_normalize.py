"""Each input schema into canonical conversations; ids, reasoning, tools, content parts, weights, refusals."""

from __future__ import annotations

import json
import pickle

import pyarrow as pa
import pytest

from tokenmill.errors import ConfigError, RoutingError
from tokenmill.io.base import RawBatch
from tokenmill.records import CONVERSATION
from tokenmill.route.spec import parse_schema
from tokenmill.sft.normalize import normalize_batch, normalize_rows, to_arrow
from tokenmill.sft.schemas_common import split_think


def conv(style: str, **columns) -> dict:
    base = {"record": "Conversation", "style": style, "tools": None, "reasoning": None, "id": None, "system": None}
    return {**base, **columns}


def run(rows, schema, **kw):
    return normalize_rows(rows, list(range(1, len(rows) + 1)), source="data/x.jsonl", schema=schema, **kw)


def turns(c: dict) -> list[tuple]:
    return [(m["role"], m["content"]) for m in c["messages"]]


@pytest.mark.parametrize(
    "style, prompt, response",
    [
        ("prompt_response", "prompt", "completion"),
        ("question_answer", "question", "answer"),
        ("problem_solution", "problem", "solution"),
    ],
)
def test_prompt_response_styles(style, prompt, response):
    kept, rejects = run([{prompt: "2+2?", response: "4"}], conv(style, prompt=prompt, response=response))
    assert rejects == []
    assert turns(kept[0]) == [("user", "2+2?"), ("assistant", "4")]
    assert kept[0]["id"] == "data/x.jsonl:1" and kept[0]["source"] == "data/x.jsonl" and kept[0]["meta"] is None


def test_alpaca_with_input_history_and_system():
    row = {
        "instruction": "Translate.",
        "input": "bonjour",
        "output": "hello",
        "sys": "Be brief.",
        "history": [["hi", "hey"], ["how are you?", "fine"]],
        "category": "mt",
    }
    schema = conv("alpaca", instruction="instruction", input="input", output="output", history="history", system="sys")
    kept, rejects = run([row, {**row, "input": ""}], schema)
    assert rejects == []
    assert turns(kept[0]) == [
        ("system", "Be brief."),
        ("user", "hi"),
        ("assistant", "hey"),
        ("user", "how are you?"),
        ("assistant", "fine"),
        ("user", "Translate.\nbonjour"),
        ("assistant", "hello"),
    ]
    assert turns(kept[1])[-2] == ("user", "Translate.")
    assert json.loads(kept[0]["meta"]) == {"category": "mt"}


def test_sharegpt_roles_and_own_id():
    rows = [
        {
            "id": "conv-7",
            "conversations": [
                {"from": "system", "value": "S"},
                {"from": "human", "value": "a"},
                {"from": "gpt", "value": "b"},
                {"from": "user", "value": "c"},
                {"from": "chatgpt", "value": "d"},
            ],
        },
        {"id": None, "conversations": [{"from": "human", "value": "a"}, {"from": "bard", "value": "b"}]},
    ]
    kept, rejects = run(rows, conv("sharegpt", messages="conversations", role_key="from", content_key="value", id="id"))
    assert rejects == []
    assert turns(kept[0]) == [("system", "S"), ("user", "a"), ("assistant", "b"), ("user", "c"), ("assistant", "d")]
    assert [c["id"] for c in kept] == ["conv-7", "data/x.jsonl:2"]


def test_sharegpt_function_call_and_observation_with_tools():
    tools = [{"name": "get_weather", "description": "w", "parameters": {"type": "object"}}]
    row = {
        "conversations": [
            {"from": "human", "value": "Weather in Paris?"},
            {"from": "gpt", "value": "Let me check."},
            {"from": "function_call", "value": '{"name": "get_weather", "arguments": {"city": "Paris"}}'},
            {"from": "observation", "value": '{"temp": 21}'},
            {"from": "gpt", "value": "21 degrees."},
        ],
        "tools": json.dumps(tools),
    }
    kept, rejects = run(
        [row], conv("sharegpt", messages="conversations", role_key="from", content_key="value", tools="tools")
    )
    assert rejects == []
    msgs = kept[0]["messages"]
    assert [m["role"] for m in msgs] == ["user", "assistant", "tool", "assistant"]
    assert msgs[1]["content"] == "Let me check."
    call_id = msgs[1]["tool_calls"][0]["id"]  # none in the data: a deterministic 9-character one
    assert msgs[1]["tool_calls"] == [{"id": call_id, "name": "get_weather", "arguments": '{"city": "Paris"}'}]
    assert len(call_id) == 9 and call_id.isalnum()
    assert msgs[2] == {**msgs[2], "content": '{"temp": 21}', "name": "get_weather", "tool_call_id": call_id}
    assert json.loads(kept[0]["tools"]) == [{"type": "function", "function": t} for t in tools]


def test_openai_messages_tool_calls_parts_weights_and_reasoning():
    row = {
        "messages": [
            {"role": "developer", "content": [{"type": "text", "text": "Be "}, {"type": "text", "text": "kind."}]},
            {"role": "user", "content": "Weather?", "loss_weight": 0.0},
            {
                "role": "assistant",
                "content": None,
                "reasoning_content": "need a tool",
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "w", "arguments": '{"q":"x"}'}},
                    {"id": "c2", "type": "function", "function": {"name": "t", "arguments": {"tz": "UTC"}}},
                ],
                "train": False,
            },
            {"role": "tool", "tool_call_id": "c2", "content": "noon"},
            {"role": "tool", "tool_call_id": "c1", "name": "w", "content": "sunny"},
            {"role": "assistant", "content": "Sunny at noon.", "weight": 2},
        ],
        "tools": {"type": "function", "function": {"name": "w"}},
    }
    kept, rejects = run([row], conv("messages", messages="messages", tools="tools"))
    assert rejects == []
    msgs = kept[0]["messages"]
    assert msgs[0]["role"] == "system" and msgs[0]["content"] == "Be kind."
    assert [m["weight"] for m in msgs] == [None, 0.0, 0.0, None, None, 2.0]
    assert msgs[2]["reasoning"] == "need a tool"
    assert msgs[2]["tool_calls"][1] == {"id": "c2", "name": "t", "arguments": '{"tz": "UTC"}'}
    assert msgs[2]["tool_calls"][0]["arguments"] == '{"q":"x"}'  # a JSON string is kept byte for byte
    assert [(m["name"], m["tool_call_id"]) for m in msgs[3:5]] == [("t", "c2"), ("w", "c1")]
    assert json.loads(kept[0]["tools"]) == [row["tools"]]


def test_llamafactory_value_parts_and_loss_weight():
    row = {
        "messages": [
            {"role": "user", "content": [{"type": "text", "value": "hi"}], "loss_weight": 0.0},
            {"role": "assistant", "content": [{"type": "text", "value": "hello"}], "loss_weight": 1.0},
        ]
    }
    kept, _ = run([row], conv("messages", messages="messages", weight_key="loss_weight"))
    assert [(m["content"], m["weight"]) for m in kept[0]["messages"]] == [("hi", 0.0), ("hello", 1.0)]


@pytest.mark.parametrize(
    "text, reasoning, answer",
    [
        ("<think>\nstep 1\nstep 2\n</think>\n\nThe answer is 4.", "step 1\nstep 2", "The answer is 4."),
        ("<think></think>4", "", "4"),
        ("<think>\n\n</think>\n\n4", "", "4"),
        ("no thinking here", None, "no thinking here"),
        ("<think>never closed", None, "<think>never closed"),
        ("4 <think>late</think>", None, "4 <think>late</think>"),
    ],
)
def test_split_think(text, reasoning, answer):
    assert split_think(text) == (reasoning, answer)


def test_inline_think_only_on_assistant_and_reasoning_column_wins():
    rows = [
        {"q": "<think>not mine</think>hi", "a": "<think></think>hello"},
        {"q": "hi", "a": "<think>inline</think>hello", "trace": "from the column"},
    ]
    kept, _ = run(rows, conv("prompt_response", prompt="q", response="a", reasoning="trace"))
    first, second = (c["messages"] for c in kept)
    assert first[0] == {**first[0], "content": "<think>not mine</think>hi", "reasoning": None}
    assert first[1]["reasoning"] == "" and first[1]["content"] == "hello"
    assert second[1]["reasoning"] == "from the column" and second[1]["content"] == "hello"


def test_reasoning_column_goes_to_last_assistant():
    row = {
        "conversations": [
            {"from": "human", "value": "a"},
            {"from": "gpt", "value": "b"},
            {"from": "human", "value": "c"},
            {"from": "gpt", "value": "d"},
        ],
        "thinking": "why d",
    }
    kept, _ = run([row], conv("sharegpt", messages="conversations", reasoning="thinking"))
    assert [m["reasoning"] for m in kept[0]["messages"]] == [None, None, None, "why d"]


def test_preference_refusal_names_the_columns():
    schema = {"record": None, "style": "preference", "chosen": "better", "rejected": "worse", "prompt": "conversations"}
    with pytest.raises(RoutingError) as err:
        run([{"better": "x", "worse": "y"}], schema)
    message = str(err.value)
    assert "'better'" in message and "'worse'" in message and "SFT track takes conversations" in message
    assert '"response": "better"' in message


def test_chosen_side_through_an_explicit_mapping():
    row = {
        "conversations": [{"from": "human", "value": "q"}],
        "chosen": {"from": "gpt", "value": "good"},
        "rejected": {"from": "gpt", "value": "bad"},
    }
    kept, _ = run([row], conv("sharegpt", messages="conversations", response="chosen", meta=[]))
    assert turns(kept[0]) == [("user", "q"), ("assistant", "good")] and kept[0]["meta"] is None


def test_other_refusals_and_bad_mappings():
    with pytest.raises(RoutingError, match="pretrain"):
        parse_schema({"record": "Document", "text": "text"})
    with pytest.raises(RoutingError, match="already rendered"):
        parse_schema({"record": "Conversation", "style": "rendered_text", "text": "t", "markers": ["chatml"]})
    with pytest.raises(ConfigError) as err:
        parse_schema({"record": "Conversation", "style": "alpaca", "instruction": 3})
    assert len(err.value.problems) == 2  # instruction is not a column name, output is missing
    with pytest.raises(ConfigError, match="unknown conversation style"):
        parse_schema({"record": "Conversation", "style": "dialogue"})
    with pytest.raises(ConfigError, match="unknown conversation style"):  # a list (unhashable): was a TypeError
        parse_schema({"record": "Conversation", "style": ["messages"]})


def test_user_mapping_with_any_column_names():
    schema = {
        "record": "Conversation",
        "style": "messages",
        "messages": "dialog",
        "role_key": "speaker",
        "content_key": "utterance",
    }
    row = {"dialog": [{"speaker": "user", "utterance": "x"}, {"speaker": "assistant", "utterance": "y"}], "lang": "en"}
    kept, _ = run([row], schema)
    assert turns(kept[0]) == [("user", "x"), ("assistant", "y")] and json.loads(kept[0]["meta"]) == {"lang": "en"}


def test_to_arrow_round_trip_and_batch_entry_point():
    rows = [{"prompt": "a", "response": "b", "id": 17}, {"prompt": "c", "response": 5}]
    table = pa.RecordBatch.from_pylist(rows[:1])
    batch = RawBatch(source="t.parquet", locs=[4], table=table)
    schema = conv("prompt_response", prompt="prompt", response="response", id="id")
    out, rejects = normalize_batch(batch, schema=schema)
    assert out.schema == CONVERSATION and rejects == []
    assert out.to_pylist()[0]["id"] == "17"
    kept, rejects = run(rows, schema)
    assert to_arrow(kept).to_pylist() == kept
    assert to_arrow([]).num_rows == 0
    assert [(r.loc, r.reason, r.raw) for r in rejects] == [(2, "wrong_type", rows[1])]


def test_steps_pickle():
    schema = conv("prompt_response", prompt="p", response="r")
    again = pickle.loads(pickle.dumps(parse_schema(schema)))
    assert again == parse_schema(schema)


def test_tools_column_shapes():
    schema = conv("prompt_response", prompt="p", response="r", tools="t")
    spec = {"name": "f", "parameters": {}}
    rows = [{"p": "q", "r": "a", "t": t} for t in ([spec], json.dumps(spec), "", "[]", None, "{bad", 7)]
    kept, rejects = run(rows, schema)
    assert [c["tools"] for c in kept] == [json.dumps([{"type": "function", "function": spec}])] * 2 + [None] * 3
    assert [(r.loc, r.reason) for r in rejects] == [(6, "wrong_type"), (7, "wrong_type")]
    assert "not valid JSON" in rejects[0].detail
