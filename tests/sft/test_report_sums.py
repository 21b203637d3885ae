"""The SFT report: one summable dataclass, read by field; its dict (the manifest's ``report``) is the one the
recursive dict sums it replaced wrote, with the same keys in the same order (the tallies: in one fixed order)."""

import json
import random

from tokenmill.sft.report import SftReport, summarize


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


def _merged(a, b):
    """The dict sum the report replaced: numbers add, lists element-wise, dicts recursively (keys of ``a``,
    then ``b``'s new ones)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return {k: _merged(a[k], b[k]) if k in a and k in b else a.get(k, b.get(k)) for k in {**a, **b}}
    if isinstance(a, list) and isinstance(b, list):
        longer, shorter = (a, b) if len(a) >= len(b) else (b, a)
        return [x + (shorter[i] if i < len(shorter) else 0) for i, x in enumerate(longer)]
    return a + b


def _units(rng: random.Random) -> list[SftReport]:
    units = []
    for n in (0, 40, 1, 90, 7):
        unit = SftReport()
        for _ in range(n):
            unit.add_example(_stats(rng))
        unit.parity["checked"] = n % 3
        units.append(unit)
    units[2].task_mix.update(qa=3, chat=1)
    units[3].unsafe["control_token_in_text"] = 2
    return units


def test_units_added_equal_the_dict_sums_they_replaced_with_the_same_key_order():
    units = _units(random.Random(7))
    old = {}
    for unit in units:
        old = _merged(old, unit.to_dict()) if old else unit.to_dict()
    total = sum(units, SftReport(parity={}))
    assert json.dumps(total.to_dict()) == json.dumps(old)
    assert total.examples == 138 and total.unsafe == {"control_token_in_text": 2} and total.parity["checked"] == 3


def test_the_tallies_come_in_one_order_whichever_unit_met_them_first():
    units = _units(random.Random(7))
    units[2].unsafe, units[3].unsafe = units[3].unsafe, {}
    assert list(sum(units, SftReport(parity={})).to_dict())[-2:] == ["task_mix", "unsafe"]


def test_one_report_of_every_example_equals_the_sum_of_reports_of_a_split():
    rng = random.Random(3)
    stats = [_stats(rng) for _ in range(200)]
    whole, first, second = SftReport(), SftReport(), SftReport()
    for i, s in enumerate(stats):
        whole.add_example(s)
        (first if i < 77 else second).add_example(s)
    assert json.dumps((first + second).to_dict()) == json.dumps(whole.to_dict())
    assert (first + second).examples == 200 == whole.examples


def test_adding_changes_neither_side_and_a_unit_round_trips_through_its_dict():
    rng = random.Random(5)
    a, b = SftReport(), SftReport()
    a.add_example(_stats(rng))
    b.add_example(_stats(rng))
    before = json.dumps([a.to_dict(), b.to_dict()])
    _ = a + b
    assert json.dumps([a.to_dict(), b.to_dict()]) == before
    assert SftReport.from_dict(json.loads(json.dumps(a.to_dict()))) == a


def test_a_run_without_examples_reports_only_its_parity_and_tallies():
    unit = SftReport()
    unit.template_lacks["tool_calls"] = 1
    assert list(unit.to_dict()) == ["parity", "template_lacks"]
    assert summarize([]) == {}
    assert "supervised_share" not in summarize([unit]) and summarize([unit])["template_lacks"] == {"tool_calls": 1}
