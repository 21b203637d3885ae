"""Documents that hold a few question/answer lines are documents: a StackExchange dump as RedPajama ships it
(``text`` = ``"Q: … A: …"`` beside ``meta``/``stats``), an FAQ page, a news interview. A rendered Q/A chat
still routes to SFT; where the evidence is split the route says so (confidence below 1, a warning). A ``label``
column beside long documents is named in a warning."""

from __future__ import annotations

import json

from tokenmill.route import inspect

QUESTIONS = [
    ("How do I reverse a list in Python without copying it?",
     "I have a list `xs` of a few million items and `xs[::-1]` doubles my memory use.", "python"),
    ("Wie kann ich in Bash prüfen, ob eine Datei existiert?",
     "Ich schreibe ein Skript, das abbrechen soll, wenn die Konfigurationsdatei fehlt.", "bash"),
    ("¿Cómo ordeno un diccionario por sus valores en Python?",
     "Tengo un diccionario con contadores y quiero mostrar primero los más frecuentes.", "python"),
    ("Как объединить две ветки git без коммита слияния?",
     "Я хочу, чтобы история оставалась линейной после переноса изменений.", "bash"),
    ("JavaScriptで配列の重複を削除するにはどうすればよいですか？",
     "数値の配列があり、順序を保ったまま重複だけを取り除きたいです。", "js"),
]
CODE = {
    "python": "    xs.reverse()\n    for i, x in enumerate(xs):\n        print(i, x)\n",
    "bash": "    if [ -f \"$CONFIG\" ]; then\n        echo \"found\"\n    else\n        exit 1\n    fi\n",
    "js": "```js\nconst unique = [...new Set(values)];\nconsole.log(unique.length);\n```\n",
}
ANSWER = ("The short answer is that the standard library already does this in place, so nothing is copied. "
          "What follows explains why the slice allocates, when that matters, and what the alternatives cost. "
          "The in-place form walks the sequence from both ends and swaps pairs, so it needs constant memory. ")


def _write(path, rows):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def _stackexchange(i: int) -> dict:
    title, body, lang = QUESTIONS[i % len(QUESTIONS)]
    text = (f"Q:\n\n{title}\n\n{body} I tried the obvious approach first (attempt {i}).\n\n"
            f"A:\n\n{ANSWER * 3}\n\n{CODE[lang]}\n{ANSWER * 2}\n")
    return {"text": text,
            "meta": {"language": "en", "url": f"https://stackoverflow.com/questions/{1000 + i}",
                     "timestamp": "2023-03-29T14:11:00", "source": "stackexchange", "question_score": str(i % 7)},
            "stats": {"num_words": len(text.split()), "num_chars": len(text)}}


def test_a_redpajama_stackexchange_dump_is_pretrain(tmp_path):
    (route,) = inspect([_write(tmp_path / "stackexchange.jsonl", [_stackexchange(i) for i in range(60)])])
    assert route.kind == "pretrain", (route.confidence, route.warnings)
    assert route.confidence < 1.0
    assert any("question/answer" in w for w in route.warnings), route.warnings


FAQ_LEAD = ("Frequently asked questions about the Riverside Public Library\n\nLast updated March 2024. "
            "If your question is not answered here, call the front desk during opening hours.\n\n")
FAQ = [("Q: How many books can I borrow at once?", "A: Up to twenty items on an adult card, five on a child's card."),
       ("Q: Can I renew a loan online?", "A: Yes, twice, unless another reader has reserved the item."),
       ("Q: Do you charge late fees?", "A: No. Overdue items are blocked from renewal until they are returned."),
       ("Q: Is there parking?", "A: The lot behind the building is free for the first two hours.")]


def test_an_faq_page_is_pretrain(tmp_path):
    rows = [{"text": FAQ_LEAD + "\n".join(q + "\n" + a for q, a in FAQ[: 2 + i % 3])
             + f"\n\nRiverside Public Library, 12 Mill Street. Page {i}."} for i in range(40)]
    (route,) = inspect([_write(tmp_path / "faq.jsonl", rows)])
    assert route.kind == "pretrain", (route.confidence, route.evidence, route.warnings)


def test_a_news_interview_is_pretrain(tmp_path):
    lead = ("The mayor sat down with our reporter on Thursday, a week before the vote on the new transit plan. "
            "The interview has been edited for length and clarity.\n\n")
    turns = ["Question: Why now?", "Answer: Because the buses are full and the roads are not getting wider.",
             "Question: What does it cost?", "Answer: About forty million over ten years, most of it from the state.",
             "Question: And if the vote fails?", "Answer: Then we come back next year with a smaller plan."]
    rows = [{"text": lead + "\n".join(turns[: 4 + 2 * (i % 2)]) + f"\n\nThe vote is on the {i + 1}th."}
            for i in range(40)]
    (route,) = inspect([_write(tmp_path / "interview.jsonl", rows)])
    assert route.kind == "pretrain", (route.confidence, route.evidence, route.warnings)


def test_a_rendered_qa_chat_is_still_sft(tmp_path):
    rows = [{"text": f"Q: How long do I boil egg number {i}?\nA: About {i % 5 + 6} minutes.\n"
                     "Q: And then?\nA: Cool it in cold water."} for i in range(40)]
    (route,) = inspect([_write(tmp_path / "qa.jsonl", rows)])
    assert route.kind == "sft", route.evidence


def test_a_label_column_beside_documents_is_named(tmp_path):
    prose = ("The council met on Tuesday to discuss the budget for the coming year, and members argued at "
             "length about the cost of repairing the old bridge over the river. ") * 8
    rows = [{"text": prose, "label": i % 2} for i in range(40)]
    (route,) = inspect([_write(tmp_path / "quality.jsonl", rows)])
    assert route.kind == "pretrain"
    assert any("'label'" in w and "label column" in w for w in route.warnings), route.warnings


def test_the_run_summary_and_manifest_name_the_label_column(tmp_path, capsys):
    from tokenmill.cli import main

    prose = "The council met on Tuesday to discuss the budget for the coming year and the old bridge. " * 8
    src = _write(tmp_path / "quality.jsonl", [{"text": prose + str(i), "label": i % 2} for i in range(20)])
    assert main(["pretrain", src, "--tokenizer", "default", "--out", str(tmp_path / "out"), "--workers", "1"]) == 0
    out = capsys.readouterr().out
    assert "warning: " in out and "a label column 'label'" in out
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert any("a label column 'label'" in w for w in manifest["inputs"][0]["warnings"])
