"""15.11: transcripts in other conventions and languages, preference shapes, classification data, data that
changes kind after its head, and prose quoting a chat: each routed to its track."""

from __future__ import annotations

import json

import pytest

from tokenmill.route import inspect

PROSE = ("The council met on Tuesday to discuss the budget for the coming year, and members argued at length "
         "about the cost of repairing the old bridge over the river. ")

CONVENTIONS = {
    "qa": ("Q: {q}", "A: {a}"),
    "question_answer": ("Question: {q}", "Answer: {a}"),
    "input_output": ("Input: {q}", "Output: {a}"),
    "vicuna": ("USER: {q}", "ASSISTANT: {a}</s>"),
    "customer_agent": ("Customer: {q}", "Agent: {a}"),
    "xml": ("<user>{q}</user>", "<assistant>{a}</assistant>"),
    "korean": ("사용자: {q}", "어시스턴트: {a}"),
    "chinese": ("用户：{q}", "助手：{a}"),
    "japanese": ("ユーザー：{q}", "アシスタント：{a}"),
    "spanish": ("Usuario: {q}", "Asistente: {a}"),
    "russian": ("Пользователь: {q}", "Ассистент: {a}"),
    "french": ("Utilisateur : {q}", "Assistant : {a}"),
}


def _write(path, rows):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def _route(path):
    return inspect([path])[0]


@pytest.mark.parametrize("name", sorted(CONVENTIONS))
def test_transcripts_in_each_convention_are_sft(tmp_path, name):
    user, assistant = CONVENTIONS[name]
    sep = " " if name == "vicuna" else "\n"  # Vicuna's turns follow each other on one line
    rows = [{"text": sep.join([user.format(q=f"how do I cook rice number {i}?"),
                                assistant.format(a=f"rinse it, then simmer it for {i + 10} minutes."),
                                user.format(q="and then?"), assistant.format(a="let it rest.")])}
            for i in range(40)]
    route = _route(_write(tmp_path / "chats.jsonl", rows))
    assert route.kind == "sft", (name, route.evidence)


def test_a_news_article_quoting_a_two_line_chat_stays_pretrain(tmp_path):
    rows = [{"text": PROSE * 6 + "\nUser: are you alive?\nBot: I am a program.\n" + PROSE * 6} for _ in range(40)]
    assert _route(_write(tmp_path / "news.jsonl", rows)).kind == "pretrain"


def test_chats_after_the_first_200_records_are_seen(tmp_path):
    docs = [{"text": PROSE * 3} for _ in range(200)]
    chats = [{"text": f"<|im_start|>user\nquestion {i}?<|im_end|>\n<|im_start|>assistant\nanswer {i}.<|im_end|>"}
             for i in range(5000)]
    route = _route(_write(tmp_path / "mixed.jsonl", docs + chats))
    assert route.kind == "sft", route.evidence


def test_kto_rows_are_preference_data(tmp_path):
    rows = [{"prompt": f"Say something kind {i}?", "completion": "You are great." if i % 2 else "Go away.",
             "label": bool(i % 2)} for i in range(40)]
    route = _route(_write(tmp_path / "kto.jsonl", rows))
    assert route.kind == "preference" and "KTO" in " ".join(route.warnings)


def test_pairwise_response_j_k_is_preference_data(tmp_path):
    rows = [{"qid": i, "question": f"How do I sort a list {i}?", "response_j": "Use sorted(xs).",
             "response_k": "Write a bubble sort."} for i in range(40)]
    assert _route(_write(tmp_path / "pairs.jsonl", rows)).kind == "preference"


def test_text_label_classification_data_is_not_pretrain(tmp_path):
    rows = [{"text": f"this movie was {'great' if i % 2 else 'awful'} number {i}", "label": i % 2}
            for i in range(40)]
    route = _route(_write(tmp_path / "sentiment.jsonl", rows))
    assert route.kind == "unknown" and "classification" in " ".join(route.warnings)
    rows = [{"text": PROSE * 8, "label": i % 2} for i in range(40)]  # quality-labelled web pages stay documents
    assert _route(_write(tmp_path / "quality.jsonl", rows)).kind == "pretrain"
