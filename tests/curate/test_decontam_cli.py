"""``tokenmill decontaminate``: planted eval items removed and counted per benchmark, a clean set kept,
the usual outputs and exit codes; the real-data tier plants items of the shared eval sets into web text."""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

import pyarrow.parquet as pq

from tokenmill.cli import main

WORDS = ("river mountain village engine garden planet signal harbor winter copper lantern meadow "
         "thunder orchard marble canyon violet ember falcon glacier").split()
FILLER = ("the of and to in is was for on that with as by at from his her which this be are or had").split()


def _sentence(rng: random.Random, n: int, words=WORDS) -> str:
    return " ".join(rng.choice(words) for _ in range(n)).capitalize() + "."


def write_evals(d: Path) -> dict:
    """GSM8K-style JSONL, MATH-style JSON and an MMLU-style directory of header-less CSVs."""
    rng = random.Random(7)
    d.mkdir(parents=True)
    gsm = [{"question": _sentence(rng, 25), "answer": "#### 4"} for _ in range(12)]
    (d / "gsm8k_test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in gsm))
    math = [{"problem": _sentence(rng, 18), "solution": "\\boxed{2}"} for _ in range(6)]
    (d / "math500_test.json").write_text(json.dumps(math))
    (d / "mmlu").mkdir()
    rows = [[_sentence(rng, 14), "alpha", "beta", "gamma", "delta", "A"] for _ in range(8)]
    for name, part in (("anatomy_test.csv", rows[:4]), ("virology_test.csv", rows[4:])):
        with open(d / "mmlu" / name, "w", newline="") as fh:
            csv.writer(fh).writerows(part)
    return {"gsm8k_test": [r["question"] for r in gsm[:5]], "math500_test": [r["problem"] for r in math[:3]],
            "mmlu": [r[0] for r in rows[:1] + rows[5:7]],
            "paths": [str(d / "gsm8k_test.jsonl"), str(d / "math500_test.json"), str(d / "mmlu")]}


def write_corpus(path: Path, planted: dict, *, clean: int = 40) -> list[tuple[str | None, str]]:
    """Clean documents (other words) and documents quoting one planted item each, case and spacing changed."""
    rng = random.Random(3)
    docs: list[tuple[str | None, str]] = [(None, " ".join(_sentence(rng, 20, FILLER + WORDS[:3]) for _ in range(3)))
                                          for _ in range(clean)]
    for bench, items in planted.items():
        if bench != "paths":
            docs += [(bench, f"As seen in class:  {item.upper()}  Then {_sentence(rng, 8, FILLER)}") for item in items]
    rng.shuffle(docs)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"text": t}) + "\n" for _, t in docs))
    return docs


def test_planted_items_removed_and_counted_per_benchmark(tmp_path, capsys):
    evals = write_evals(tmp_path / "eval")
    docs = write_corpus(tmp_path / "in" / "web.jsonl", evals)
    out = tmp_path / "out"
    assert main(["decontaminate", str(tmp_path / "in"), "--eval", *evals["paths"], "--out", str(out),
                 "--workers", "1", "--no-progress"]) == 0
    printed = capsys.readouterr().out
    report = json.loads((out / "decontamination.json").read_text())
    by_name = {b["name"]: b for b in report["benchmarks"]}
    assert {n: b["documents_removed"] for n, b in by_name.items()} == {"gsm8k_test": 5, "math500_test": 3, "mmlu": 3}
    assert {n: b["items"] for n, b in by_name.items()} == {"gsm8k_test": 12, "math500_test": 6, "mmlu": 8}
    assert [Path(f).name for f in by_name["mmlu"]["files"]] == ["anatomy_test.csv", "virology_test.csv"]
    assert report["documents"] == len(docs) and report["removed"] == 11 and report["kept"] == len(docs) - 11
    kept = pq.read_table(out / "documents").column("text").to_pylist()
    assert sorted(kept) == sorted(t for b, t in docs if b is None)  # every clean document kept, nothing else
    ledger = pq.read_table(out / "ledger")
    reasons = {r for r in ledger.column("reason").to_pylist() if r}
    assert reasons == {"decontaminate_v2:gsm8k_test", "decontaminate_v2:math500_test", "decontaminate_v2:mmlu"}
    assert "gsm8k_test" in printed and "11 of 51 documents removed" in printed
    # each removal shows what matched: the shared n-gram (as the document wrote it) and the eval item
    items = {f"{b} #{i}": q for b in ("gsm8k_test", "math500_test") for i, q in enumerate(evals[b])}
    for b in report["benchmarks"]:
        assert b["examples"], b["name"]
        for ex in b["examples"]:
            assert ex["ngram"].lower() in items.get(ex["item"], ex["item_text"]).lower() + " "
            assert ex["item"].startswith(b["name"] + " #") and ex["item_text"] and ex["document"]
    first = report["benchmarks"][0]["examples"][0]
    assert f'"{first["ngram"]}"' in printed and first["item"] in printed, printed
    assert (out / "report.html").is_file() and (out / "manifest.json").is_file()
    # the same command again resumes the finished run; --overwrite starts over
    assert main(["decontaminate", str(tmp_path / "in"), "--eval", *evals["paths"], "--out", str(out),
                 "--workers", "1", "--no-progress", "--overwrite"]) == 0
    assert json.loads((out / "decontamination.json").read_text()) == report


def test_a_clean_set_removes_nothing(tmp_path, capsys):
    write_evals(tmp_path / "eval")
    docs = write_corpus(tmp_path / "in" / "web.jsonl", {}, clean=30)
    out = tmp_path / "out"
    assert main(["decontaminate", str(tmp_path / "in"), "--eval", str(tmp_path / "eval"), "--ngram", "8",
                 "--out", str(out), "--no-progress"]) == 0
    report = json.loads((out / "decontamination.json").read_text())
    assert report["removed"] == 0 and report["kept"] == len(docs) and report["ngram"] == 8
    assert [b["name"] for b in report["benchmarks"]] == ["eval"]  # a directory is one benchmark


def test_usage_and_data_errors_exit_2_and_1(tmp_path, capsys):
    evals = write_evals(tmp_path / "eval")
    write_corpus(tmp_path / "in" / "web.jsonl", {}, clean=3)
    src, out = str(tmp_path / "in"), str(tmp_path / "out")
    assert main(["decontaminate", src, "--out", out]) == 2  # no --eval
    assert "--eval" in capsys.readouterr().err
    assert main(["decontaminate", "--eval", evals["paths"][0], src, "--out", out]) == 2  # the input swallowed
    assert "put the inputs first" in capsys.readouterr().err
    assert main(["decontaminate", "--eval", evals["paths"][0], "--out", out, "--", src]) == 0
    capsys.readouterr()
    assert main(["decontaminate", src, "--eval", str(tmp_path / "nope.jsonl"), "--out", str(tmp_path / "o2")]) == 1
    assert "nope.jsonl" in capsys.readouterr().err
    (tmp_path / "odd.jsonl").write_text('{"body": "some text here"}\n')
    assert main(["decontaminate", src, "--eval", str(tmp_path / "odd.jsonl"), "--out", str(tmp_path / "o3")]) == 1
    assert "fields" in capsys.readouterr().err
    assert main(["decontaminate", src, "--eval", str(tmp_path / "odd.jsonl"), "--fields", "body", "--out",
                 str(tmp_path / "o4"), "--no-progress"]) == 0


def test_real_eval_sets_planted_into_real_web_text(shared_data, tmp_path, capsys):
    ev = shared_data / "eval"
    gsm = [json.loads(line)["question"] for line in (ev / "gsm8k_test.jsonl").read_text().splitlines()[:10]]
    he = [json.loads(line)["prompt"] for line in (ev / "HumanEval.jsonl").read_text().splitlines()[:5]]
    c4 = (shared_data / "pretrain" / "llamafactory_c4_demo.jsonl").read_text().splitlines()
    web = [json.loads(line)["text"] for line in c4[:60]]
    planted = [f"{web[i]}\n\n{q}\n\n{web[i + 30]}" for i, q in enumerate(gsm + he)]
    src = tmp_path / "in" / "web.jsonl"
    src.parent.mkdir()
    src.write_text("".join(json.dumps({"text": t}) + "\n" for t in web[:30] + planted))
    out = tmp_path / "out"
    assert main(["decontaminate", str(src), "--eval", *map(str, sorted(ev.iterdir())), "--out", str(out),
                 "--no-progress"]) == 0
    report = json.loads((out / "decontamination.json").read_text())
    removed = {b["name"]: b["documents_removed"] for b in report["benchmarks"]}
    assert removed["gsm8k_test"] == 10 and removed["HumanEval"] == 5 and report["removed"] == 15
    assert {b["name"] for b in report["benchmarks"]} >= {"gsm8k_test", "HumanEval", "math500_test", "mmlu_test"}
