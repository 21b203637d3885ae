"""The SFT report's sums: a unit's report added in place equals the recursive merge it replaced."""

import json
import random

from tokenmill.sft.report import add_into, example_report, merge


def _stats(rng: random.Random) -> dict:
    turns = [rng.randrange(0, 50) for _ in range(rng.randrange(0, 5))]
    stats = {
        "tokens": rng.randrange(1, 5000),
        "trained_tokens": sum(turns),
        "trained_by_role": {"assistant": sum(turns), "other": rng.randrange(0, 3)},
        "trained_by_turn": turns,
        "reasoning_trained_tokens": rng.randrange(0, 10),
        "answer_trained_tokens": rng.randrange(0, 10),
        "stop_token_trained": rng.random() < 0.9,
        "control_tokens_neutralised": rng.randrange(0, 2),
    }
    if rng.random() < 0.3:
        stats["truncated_exchanges"] = rng.randrange(1, 3)
        stats["supervised_tokens_lost"] = rng.randrange(1, 100)
    return stats


def test_added_in_place_equals_merged_with_the_same_key_order():
    rng = random.Random(7)
    reports = [example_report(_stats(rng)) for _ in range(300)]
    reports.insert(17, {"lacks": {"tools": 1}, "examples_left_out": 1})  # keys the examples do not have
    reports.insert(90, {"lacks": {"tools": 2, "reasoning": True}})
    merged = {"parity": {"checked": 3, "shapes": [1, 2]}}
    added = json.loads(json.dumps(merged))
    for r in reports:
        merged = merge(merged, r)
        assert add_into(added, r) is added
    assert json.dumps(added) == json.dumps(merged)  # same sums, same keys in the same order
    assert added["examples"] == 300 and max(len(r["trained_by_turn"]) for r in reports if "trained_by_turn" in r) \
        == len(added["trained_by_turn"])


def test_added_reports_are_not_aliased():
    first = example_report({"tokens": 3, "trained_tokens": 2, "trained_by_role": {"assistant": 2, "other": 0},
                            "trained_by_turn": [2], "reasoning_trained_tokens": 0, "answer_trained_tokens": 2,
                            "stop_token_trained": True, "control_tokens_neutralised": 0})
    total = add_into({}, first)
    add_into(total, first)
    assert first["trained_by_turn"] == [2] and first["trained_by_role"] == {"assistant": 2, "other": 0}
    assert total["trained_by_turn"] == [4] and total["stop_token_trained"] == 2
