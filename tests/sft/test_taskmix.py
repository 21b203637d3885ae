"""The SFT task-mix labels: academic/templated tasks vs natural user requests, with score and cues."""

from __future__ import annotations

import pytest

from tokenmill.sft.taskmix import (
    ACADEMIC,
    PHRASES,
    USER,
    anchors,
    check_mix,
    label_prompts,
    parse_mix,
    prompt_cues,
    quotas,
)


def one(text: str) -> tuple[str, float, list[str]]:
    got = label_prompts([text], ["s"])
    return got.labels[0], float(got.scores[0]), got.cues[0]


def test_an_options_list_with_an_answer_slot_is_academic():
    label, score, cues = one("What is the capital of France?\n(A) Berlin (B) Paris (C) Rome (D) Madrid\nAnswer:")
    assert label == ACADEMIC and score >= 0.9 and {"options", "answer_slot"} <= set(cues)


def test_a_boxed_answer_format_is_academic():
    assert one("Solve 3x + 5 = 11. Put your final answer within \\boxed{}.")[0] == ACADEMIC


def test_a_natural_request_is_user_with_no_cues():
    label, score, cues = one("Can you help me write a birthday message for my sister who loves hiking?")
    assert label == USER and score == 0.0 and cues == []


def test_non_english_structure_and_phrases_are_read():
    german = "Welche der folgenden Städte liegt an der Elbe?\nA. München\nB. Dresden\nC. Köln"
    chinese = "以下哪个是质数？\nＡ．4\nＢ．9\nＣ．7\n答案："
    japanese = "次の問題に答えなさい。日本の首都はどこですか。"
    polish = "Pytanie: Ile to jest 2+2?\nA) 3\nB) 4\nC) 5\nOdpowiedź:"  # no Polish phrases: the shape decides
    for text, cue in [(german, "phrase:de"), (chinese, "phrase:zh"), (japanese, "phrase:ja"), (polish, "options")]:
        label, _, cues = one(text)
        assert label == ACADEMIC and cue in cues, (text, cues)
    assert one("Kannst du mir bitte ein Rezept für Apfelkuchen geben?")[0] == USER
    assert one("我想去日本旅行，你能给我一些建议吗？")[0] == USER


def test_a_template_many_prompts_of_a_source_share_is_a_cue_but_a_chat_wrapper_is_not():
    nouns = ["river", "mountain", "city", "forest", "desert", "island", "valley", "lake"]
    templated = [f"Read the passage and decide what it is mainly about. Passage: the {n} was quiet." for n in nouns]
    wrapped = [f"Below is an instruction that describes a task. Write a response.\n\n### Instruction:\nTell me about "
               f"the {n} you like\n\n### Response:" for n in nouns]
    got = label_prompts(templated + wrapped, ["flan"] * 8 + ["alpaca"] * 8)
    assert all("template" in c for c in got.cues[:8])
    assert not any("template" in c or "answer_slot" in c for c in got.cues[8:])
    assert set(got.labels[8:]) == {USER}


def test_a_word_problem_is_academic_but_a_personal_question_with_numbers_is_not():
    assert "word_problem" in prompt_cues("Tom has 3 apples and buys 5 more. How many apples does he have now?")
    assert "word_problem" not in prompt_cues("I have 3 kids aged 5 and 7, which film should we watch?")


def test_cues_name_the_language_of_the_phrase():
    assert prompt_cues("Répondez à la question suivante : quelle est la couleur du ciel ?") == ["phrase:fr"]


@pytest.mark.parametrize("value, problem", [
    ("academic=0.3,user=0.6", "sum to 1"), ("academic=0.3,chat=0.7", "unknown label 'chat'"),
    ("academic=-0.3,user=1.3", "negative"), ("academic", "LABEL=SHARE"), ("academic=x,user=0.7", "not a number"),
    ("academic=0.3,academic=0.7", "twice"),
])
def test_bad_mix_values_say_what_to_change(value, problem):
    with pytest.raises(ValueError, match=problem) as exc:
        parse_mix(value)
    assert "\n" not in str(exc.value) and "academic=0.3,user=0.7" in str(exc.value)


def test_a_mix_may_name_one_label_and_quotas_fill_n():
    assert parse_mix("academic=1") == {"academic": 1.0}
    assert check_mix({"academic": 0.25, "user": 0.75}) == {"academic": 0.25, "user": 0.75}
    assert quotas(10, {"academic": 1 / 3, "user": 2 / 3}) == {"academic": 3, "user": 7}
    assert sum(quotas(7, {"academic": 0.5, "user": 0.5}).values()) == 7


def test_anchors_are_text_every_match_of_an_alternative_holds():
    assert anchors(r"choose the (?:correct|best)|let'?s think|d[oa]s seguintes|wähle(?:n sie)? die x") == [
        "choose the ", "s think", "s seguintes", " die x"]


def test_the_anchor_gate_finds_what_the_phrases_alone_find():
    import re

    samples = ["Which of the following is true?", "Let's think step by step.", "Express your answer in cm.",
               "Beantworten Sie die folgende Frage.", "Lesquelles des suivantes sont vraies ?",
               "Elija la respuesta correcta.", "Qual das seguintes é verdadeira?", "Quale dei seguenti è vero?",
               "Какой из следующих вариантов верен?", "下列哪个选项正确？", "次のうち正しいものはどれですか。",
               "Tell me about your weekend", "Options: yes, no", "Vrai ou faux : le ciel est vert."]
    for text in samples:
        plain = [f"phrase:{lang}" for lang, p in PHRASES.items() if re.search(p, text.lower())]
        assert [c for c in prompt_cues(text) if c.startswith("phrase:")] == plain, text
    assert sum(bool(prompt_cues(t)) for t in samples) == len(samples) - 1


def test_an_answer_slot_is_a_short_label_not_a_sentence_ending_in_a_colon():
    assert "answer_slot" in prompt_cues("Is the review positive?\nThe food was cold.\nFinal answer:")
    assert "answer_slot" in prompt_cues("这句话的情感是什么？\n我很开心。\n答案：")
    assert "answer_slot" not in prompt_cues("My script crashes, please help me fix it.\nHere is my code:")
