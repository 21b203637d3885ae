"""The router on a labelled set of files built from ../shared/data: its confusion matrix.

Builds, in a temporary directory, files whose kind is known by construction: slices of the real
pretraining, SFT and preference files as they are, and the same real records re-shaped the ways users
meet them (conversations rendered into a ``text`` column in ten conventions and languages, KTO rows,
pairwise rows, classification sets, news-like documents quoting a two-line chat, chats that begin after
the head of the file). Then routes every file with ``tokenmill.inspect`` and prints the matrix
(rows: true kind, columns: routed kind) and the misrouted files.

    PYTHONPATH=src python benchmarks/router_confusion.py [--data ../shared/data]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import tempfile
from collections import Counter
from pathlib import Path

KINDS = ("pretrain", "sft", "preference", "unknown")
CONVENTIONS = [
    ("chatml", "<|im_start|>user\n{q}<|im_end|>\n<|im_start|>assistant\n{a}<|im_end|>", "\n"),
    ("qa", "Q: {q}\nA: {a}", "\n"),
    ("question_answer", "Question: {q}\nAnswer: {a}", "\n"),
    ("input_output", "Input: {q}\nOutput: {a}", "\n"),
    ("vicuna", "USER: {q} ASSISTANT: {a}</s>", " "),
    ("customer_agent", "Customer: {q}\nAgent: {a}", "\n"),
    ("xml", "<user>{q}</user>\n<assistant>{a}</assistant>", "\n"),
    ("chinese", "用户：{q}\n助手：{a}", "\n"),
    ("korean", "사용자: {q}\n어시스턴트: {a}", "\n"),
    ("japanese", "ユーザー：{q}\nアシスタント：{a}", "\n"),
    ("spanish", "Usuario: {q}\nAsistente: {a}", "\n"),
    ("russian", "Пользователь: {q}\nАссистент: {a}", "\n"),
    ("french", "Utilisateur : {q}\nAssistant : {a}", "\n"),
]


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def _chunks(rows: list, size: int, limit: int) -> list[list]:
    return [rows[i:i + size] for i in range(0, len(rows), size)][:limit]


def _pairs(data: Path) -> list[tuple[str, str]]:
    """Real (question, answer) pairs: GSM8K and the Alpaca demo."""
    gsm = [(r["question"], r["answer"]) for r in _jsonl(data / "sft" / "gsm8k_train.jsonl")[:600]]
    alpaca = json.loads((data / "sft" / "llamafactory_alpaca_en_demo.json").read_text())
    return gsm + [((r["instruction"] + "\n" + r["input"]).strip(), r["output"]) for r in alpaca]


def build(data: Path, root: Path) -> list[tuple[Path, str, str]]:
    """(file, true kind, group) of every labelled file."""
    rng = random.Random(0)
    files: list[tuple[Path, str, str]] = []

    def add(name: str, rows: list[dict], kind: str, group: str) -> None:
        files.append((_write(root / f"{len(files):03d}-{name}.jsonl", rows), kind, group))

    c4 = _jsonl(data / "pretrain" / "llamafactory_c4_demo.jsonl")
    for k, part in enumerate(_chunks(c4, 20, 15)):
        add(f"c4-{k}", part, "pretrain", "web documents")
    dclm = _jsonl(data / "pretrain" / "dclm_quality_agreement_data.jsonl")
    for k, part in enumerate(_chunks(dclm, 40, 5)):
        add(f"dclm-{k}", part, "pretrain", "quality-labelled web documents")
    for name in ("llamafactory_wiki_demo.txt", "tinyshakespeare.txt", "gutenberg_1342_pride_and_prejudice.txt",
                 "dolma_cc_en_head-0091.jsonl", "dolma_cc_en_head-0174.jsonl", "datajuicer_demo-dataset-deduplication.jsonl"):
        target = root / f"{len(files):03d}-{name}"
        shutil.copy(data / "pretrain" / name, target)
        files.append((target, "pretrain", "real files as they are"))
    for k, part in enumerate(_chunks(c4, 10, 10)):
        quoted = [{"text": r["text"][:1500] + "\n\nUser: are you conscious?\nBot: I am a language model.\n\n"
                   + r["text"][1500:3000]} for r in part]
        add(f"news-quoting-chat-{k}", quoted, "pretrain", "documents quoting a two-line chat")

    pairs = _pairs(data)
    for k, part in enumerate(_chunks(_jsonl(data / "sft" / "gsm8k_train.jsonl"), 300, 8)):
        add(f"gsm8k-{k}", part, "sft", "question/answer pairs")
    alpaca = json.loads((data / "sft" / "llamafactory_alpaca_en_demo.json").read_text())
    for k, part in enumerate(_chunks(alpaca, 100, 6)):
        add(f"alpaca-{k}", part, "sft", "alpaca")
    for name in ("llamafactory_v1_sft_demo.jsonl", "dolly15k_subset_151_alpaca_prompt.jsonl"):
        add(name, _jsonl(data / "sft" / name), "sft", "real files as they are")
    for name in ("fastchat_dummy_conversation_sharegpt.json", "llamafactory_glaive_toolcall_en_demo.json"):
        add(name, json.loads((data / "sft" / name).read_text()), "sft", "real files as they are")
    for style, turn, sep in CONVENTIONS:
        for k in range(4):
            chosen = rng.sample(pairs, 40)
            rows = [{"text": sep.join(turn.format(q=q, a=a) for q, a in chosen[i:i + 2])} for i in range(0, 40, 2)]
            add(f"rendered-{style}-{k}", rows, "sft", "transcripts in a text column")
    for k in range(3):
        head = [{"text": r["text"]} for r in c4[k * 40:(k + 1) * 40]]
        chats = [{"text": CONVENTIONS[0][1].format(q=q, a=a)} for q, a in rng.sample(pairs, 900)]
        add(f"chats-after-head-{k}", head + chats, "sft", "chats after the head")

    dpo = json.loads((data / "sft" / "llamafactory_dpo_en_demo.json").read_text())
    for k, part in enumerate(_chunks(dpo, 50, 6)):
        add(f"dpo-{k}", part, "preference", "chosen/rejected")
    for k, part in enumerate(_chunks(dpo, 50, 4)):
        prompt = [r["conversations"][-1]["value"] for r in part]
        kto = [{"prompt": p, "completion": r[side]["value"], "label": side == "chosen"}
               for p, r in zip(prompt, part) for side in ("chosen", "rejected")]
        add(f"kto-{k}", kto, "preference", "KTO prompt/completion/label")
        pairwise = [{"qid": i, "question": p, "response_j": r["chosen"]["value"], "response_k": r["rejected"]["value"]}
                    for i, (p, r) in enumerate(zip(prompt, part))]
        add(f"pairwise-{k}", pairwise, "preference", "pairwise response_j/response_k")

    math = json.loads((data / "eval" / "math500_test.json").read_text())
    for k, part in enumerate(_chunks(math, 60, 4)):
        add(f"classify-math-{k}", [{"text": r["problem"][:300], "label": r["subject"]} for r in part], "unknown",
            "text/label classification")
    for k in range(4):
        rows = [{"text": q[:200], "label": int("####" in a and len(a) > 300)} for q, a in rng.sample(pairs, 60)]
        add(f"classify-length-{k}", rows, "unknown", "text/label classification")
    for k in range(3):
        add(f"numbers-{k}", [{"x": rng.random(), "y": rng.randint(0, 9)} for _ in range(50)], "unknown", "numeric tables")
    return files


def matrix(results: list[tuple[Path, str, str, str]]) -> str:
    counts = Counter((true, got) for _, true, _, got in results)
    lines = ["| true \\ routed | " + " | ".join(KINDS) + " | files |", "|---|" + "---:|" * (len(KINDS) + 1)]
    for true in KINDS:
        row = [counts[(true, got)] for got in KINDS]
        lines.append(f"| {true} | " + " | ".join(map(str, row)) + f" | {sum(row)} |")
    return "\n".join(lines)


def main() -> None:
    from tokenmill.route import inspect

    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default=str(Path(__file__).resolve().parents[1].parent / "shared" / "data"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="router-confusion-") as tmp:
        files = build(Path(args.data), Path(tmp))
        results = [(path, true, group, inspect([str(path)])[0].kind) for path, true, group in files]
        right = sum(true == got for _, true, _, got in results)
        print(f"{len(results)} files, {right} routed right ({100 * right / len(results):.1f} %)\n")
        print(matrix(results))
        wrong = [(p.name, group, true, got) for p, true, group, got in results if true != got]
        if wrong:
            print("\nmisrouted:")
            for name, group, true, got in wrong:
                print(f"  {name} ({group}): {true} -> {got}")


if __name__ == "__main__":
    main()
