"""sft select on data shaped like the sets users bring: GSM8K answers ending in ``#### 72`` are complete, a
selection that cannot fill ``--n`` says why, and prompts wrapped in one long template are clustered on what
differs between them, not on the template they share."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tokenmill.cli import main
from tokenmill.curate.quality.sft import SftQuality

NAMES = ["Natalia", "Weng", "Betty", "Julie", "James", "Mark", "Albert", "Ken", "Alexis", "Tina"]
THINGS = ["clips", "apples", "stamps", "marbles", "pencils", "books", "shells", "tickets", "coins", "cards"]
PLACES = ["market", "school fair", "garage sale", "library", "harbour", "bakery", "museum", "park", "zoo", "mall"]
ALPACA = ("Below is an instruction that describes a task. Write a response that appropriately completes the "
          "request.\n\n### Instruction:\n{}\n\n### Response:")


def _gsm8k(n: int) -> list[dict]:
    """GSM8K-shaped records: a word problem, worked steps with <<calc>> notes, then ``#### answer``."""
    rows = []
    for i in range(n):
        name, thing, place = NAMES[i % 10], THINGS[(3 * i) % 10], PLACES[(7 * i + i // 10) % 10]
        a, b = 12 + 7 * i, 3 + i
        rows.append({"question": f"{name} collected {a} {thing} near the {place} on day {i}, then gave away "
                                 f"{b} of them to a neighbour. How many {thing} remain with {name}?",
                     "answer": f"{name} started with {a} {thing} from the {place}.\n{name} gave away {b} of them "
                               f"to a neighbour, so {a} - {b} = <<{a}-{b}={a - b}>>{a - b} {thing} remain.\n"
                               f"#### {a - b}"})
    return rows


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def _manifest(out):
    return json.loads((out / "manifest.json").read_text())


def test_a_final_answer_line_is_not_a_cut_sentence():
    rules = SftQuality(check_language=False)
    responses = [r["answer"] for r in _gsm8k(3)] + [
        "Working it through step by step, we add the apples in each basket and find the total number of "
        "apples.\nThe answer is 42",
        "Add the two numbers, then divide by two, which gives the mean of the values that were listed.\n"
        "Final answer: 17.5",
        "The museum opened in the spring and, as the guide explained in some detail to every visitor, its first "
        "room holds the"]
    batch = pa.record_batch({"prompt": pa.array(["q"] * 6, pa.large_string()),
                             "response": pa.array(responses, pa.large_string())})
    assert list(rules.decide(rules.score(batch).scores)) == [None] * 5 + ["cut_mid_sentence"]


def test_gsm8k_shaped_answers_are_selected(tmp_path):
    src = _write(tmp_path / "gsm8k.jsonl", _gsm8k(20))
    assert main(["sft", "select", src, "--out", str(tmp_path / "sel"), "--n", "5"]) == 0
    counts = _manifest(tmp_path / "sel")["counts"]
    assert counts["kept"] == 5, counts
    assert not any("cut_mid_sentence" in k for k in counts["filtered"]), counts


def test_a_selection_short_of_n_says_why(tmp_path, capsys):
    same = [{"instruction": "Explain how tides work in the ocean please", "output": f"Tides follow the moon ({i})."}
            for i in range(17)]
    other = [{"instruction": q, "output": "A short and complete answer."}
             for q in ("Name a prime number larger than ten", "Who wrote Pride and Prejudice?",
                       "Translate 'gato' into English")]
    src = _write(tmp_path / "few.jsonl", same + other)
    assert main(["sft", "select", src, "--out", str(tmp_path / "sel"), "--n", "5"]) == 0
    m = _manifest(tmp_path / "sel")
    assert m["counts"]["kept"] == 4
    warning = m["report"]["warning"]
    assert "4 of the 5" in warning and "16" in warning and "cluster" in warning and "--per-cluster" in warning
    err = capsys.readouterr().err
    assert "4 of the 5" in err


def test_a_selection_that_fills_n_has_no_warning(tmp_path, capsys):
    src = _write(tmp_path / "gsm8k.jsonl", _gsm8k(20))
    assert main(["sft", "select", src, "--out", str(tmp_path / "sel"), "--n", "3"]) == 0
    assert "warning" not in _manifest(tmp_path / "sel")["report"]
    assert "of the 3" not in capsys.readouterr().err


QUESTIONS = [
    "Why is Citizen Kane considered the best film?", "Which US state produces the most pineapples?",
    "Name three birds that cannot fly.", "How do vaccines train the immune system?",
    "What causes the seasons on Earth?", "Suggest a name for a small bakery.", "Is coffee bad for your heart?",
    "Summarise the plot of Hamlet briefly.", "Who painted the ceiling of the Sistine Chapel?",
    "Give me a packing list for a beach holiday.", "Why do cats purr?", "Translate 'good morning' into Spanish.",
    "Classify these as fruit or vegetable: carrot, apple, leek.", "When did the Berlin Wall fall?",
    "What is a good way to learn chess openings?", "Write a haiku about autumn rain.",
    "Explain compound interest to a child.", "Which planet has the most moons?", "How are diamonds formed?",
    "List some tips for sleeping better.", "What does a sommelier do?", "Why did the Roman Empire split?",
    "Recommend a board game for four players.", "How long should an egg boil for a soft yolk?",
    "What is the difference between weather and climate?", "Describe the rules of cricket in short.",
    "Who invented the telephone?", "Should I rent or buy a flat?", "What makes sourdough rise?",
    "Pick the odd one out: violin, cello, trumpet, viola.", "How many bones does an adult human have?",
    "Why is the ocean salty?", "Draft a polite email declining a meeting.", "What is photosynthesis?",
    "Where do monarch butterflies migrate?", "Tell me about the history of jazz.",
    "Which languages are spoken in Switzerland?", "How do noise-cancelling headphones work?",
    "What should I feed a pet rabbit?", "Convert 30 degrees Celsius to Fahrenheit.",
]


def test_prompts_in_one_long_template_are_clustered_on_what_differs(tmp_path):
    rows = [{"instruction": ALPACA.format(q), "output": f"Because it is handy there, as {i} people say."}
            for i, q in enumerate(QUESTIONS)]
    rows += [{"instruction": ALPACA.format("Explain how tides work in the ocean please"),
              "output": f"Tides follow the pull of the moon, and the sun adds its own ({i})."} for i in range(6)]
    src = _write(tmp_path / "templated.jsonl", rows)
    assert main(["sft", "select", src, "--out", str(tmp_path / "sel"), "--n", "20"]) == 0
    m = _manifest(tmp_path / "sel")
    assert m["counts"]["kept"] == 20, m["counts"]
    ledger = pq.read_table(tmp_path / "sel" / "selection.parquet").to_pylist()
    tides = {r["cluster"] for r in ledger if r["loc"] > 40}
    assert len(tides) == 1  # the same question in the same template is still one cluster
    assert m["report"]["largest_cluster"] == 6, m["report"]


@pytest.mark.realdata
def test_real_gsm8k_answers_are_not_cut(tmp_path, shared_data):
    """GSM8K's train set: 97% of it was dropped as cut mid-sentence (its answers end in ``#### 72``)."""
    path = shared_data / "sft" / "gsm8k_train.jsonl"
    assert main(["sft", "select", str(path), "--out", str(tmp_path / "sel"), "--n", "1000"]) == 0
    m = _manifest(tmp_path / "sel")
    cut = m["counts"]["filtered"].get("sft_quality_v2:cut_mid_sentence", 0)
    assert cut < 0.01 * m["counts"]["input"], m["counts"]
    assert m["counts"]["kept"] == 1000 and "warning" not in m["report"]


@pytest.mark.realdata
def test_real_dolly_prompts_in_alpaca_templates_are_not_one_cluster(tmp_path, shared_data):
    """151 Dolly records rendered into the two Alpaca prompts (with and without an input): the template
    pulled 87 of them into one cluster."""
    path = shared_data / "sft" / "dolly15k_subset_151_alpaca_prompt.jsonl"
    assert main(["sft", "select", str(path), "--out", str(tmp_path / "sel"), "--n", "100"]) == 0
    m = _manifest(tmp_path / "sel")
    assert m["report"]["largest_cluster"] <= 3 and m["report"]["clusters"] >= 140, m["report"]
    assert m["counts"]["kept"] == 100


def test_frames_are_what_many_different_prompts_share():
    """Two templates in one source are both cut; copies of one question are not a template; a short common
    opening stays; a prompt that is all frame keeps its text."""
    from tokenmill.sft.frames import strip_frames

    other = "Below is an instruction paired with an input. Answer it as well as you can, in plain words.\n\n{}"
    texts = [ALPACA.format(q) for q in QUESTIONS[:20]] + [other.format(q) for q in QUESTIONS[20:]]
    assert strip_frames(texts) == [q + "\n\n### Response:" for q in QUESTIONS[:20]] + QUESTIONS[20:]
    copies = ["Explain how tides work in the ocean to a curious child please"] * 30 + QUESTIONS[:10]
    assert strip_frames(copies) == copies
    openings = [f"What is the {w}?" for w in ("capital of France", "boiling point of water", "speed of sound",
                                              "tallest mountain", "longest river", "largest desert")]
    assert strip_frames(openings) == openings
    assert strip_frames([]) == [] and strip_frames(QUESTIONS[:2]) == QUESTIONS[:2]
    bare = ALPACA.split("{}")[0]  # the template's head alone
    assert strip_frames([ALPACA.format(q) for q in QUESTIONS[:10]] + [bare])[-1] == bare


def test_too_few_records_for_n_is_said(tmp_path, capsys):
    src = _write(tmp_path / "three.jsonl", _gsm8k(3))
    assert main(["sft", "select", src, "--out", str(tmp_path / "sel"), "--n", "5"]) == 0
    assert "kept 3 of the 5 examples asked for (--n 5): the inputs hold only 3 records" in capsys.readouterr().err
