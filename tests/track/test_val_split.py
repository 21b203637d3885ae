"""The validation split (``--val-fraction`` / ``--val-count``, ``tokenmill.split``): whole records, chosen by a
seeded hash of their content, the same whatever the workers, the unit size or a kill and resume."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import numpy as np
import pytest
import trackkit as tk
from test_track_resume import kill_after_commits

import statekit
from tokenmill.cli import main
from tokenmill.errors import ConfigError
from tokenmill.pretrain import run_pretrain
from tokenmill.sft.run import run_sft
from tokenmill.shards import open_shards, verify_shards


def content_key(text: str, seed: int = 0) -> int:
    """The documented key, computed here on its own: blake2b-64 of the UTF-8 text, keyed by the seed."""
    key = b"tokenmill-val:text:" + str(seed).encode()
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8, key=key).digest(), "little")


def ids(directory: Path) -> list[str]:
    shards = open_shards(directory)
    return [shards[i]["id"] for i in range(len(shards))]


def pretrain(src: Path, out: Path, *, workers: int = 1, unit_bytes: int = 4096, **split) -> dict:
    return run_pretrain([str(src)], out=out, tokenizer="default", workers=workers, unit_bytes=unit_bytes,
                        progress=False, **split)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[Path, list[str]]:
    path = tmp_path_factory.mktemp("val") / "docs.jsonl"
    texts = tk.write_docs(path, 600, seed=11, broken_every=53)
    return path, texts


def test_fraction_picks_exactly_the_documents_whose_key_is_below_the_fraction(corpus, tmp_path):
    src, texts = corpus
    manifest = pretrain(src, tmp_path / "out", val_fraction=0.1)
    expected = {f"doc-{i}" for i, t in enumerate(texts) if content_key(t) < int(0.1 * 2**64)}
    val, train = ids(tmp_path / "out" / "val"), ids(tmp_path / "out")
    assert set(val) == expected
    assert not set(val) & set(train) and set(val) | set(train) == {f"doc-{i}" for i in range(len(texts))}
    assert abs(len(val) - 0.1 * len(texts)) <= 3 * math.sqrt(len(texts) * 0.1 * 0.9)  # binomial, 3 sigma
    split = manifest["split"]
    assert split["val"]["documents"] == len(val) and split["train"]["documents"] == len(train)
    assert split["val"]["tokens"] + split["train"]["tokens"] == manifest["counts"]["tokens"]
    assert split["val"]["tokens"] == open_shards(tmp_path / "out" / "val").n_tokens
    assert verify_shards(tmp_path / "out") == [] and verify_shards(tmp_path / "out" / "val") == []


def test_count_picks_exactly_n_documents_with_the_smallest_keys(corpus, tmp_path):
    src, texts = corpus
    manifest = pretrain(src, tmp_path / "out", val_count=37, val_seed=5)
    ranked = sorted(range(len(texts)), key=lambda i: content_key(texts[i], 5))
    val = ids(tmp_path / "out" / "val")
    assert len(val) == 37 and set(val) == {f"doc-{i}" for i in ranked[:37]}
    assert len(ids(tmp_path / "out")) == len(texts) - 37
    assert manifest["split"]["val"]["documents"] == 37 and manifest["split"]["val_seed"] == 5
    # the same seed orders both ways alike: a fraction set of about the same size is a prefix of one order
    fraction = pretrain(src, tmp_path / "fraction", val_fraction=0.1, val_seed=5)["split"]["val"]["documents"]
    assert set(ids(tmp_path / "fraction" / "val")) == {f"doc-{i}" for i in ranked[:fraction]}


@pytest.mark.parametrize("split", [{"val_fraction": 0.15}, {"val_count": 25}])
def test_the_split_does_not_depend_on_workers_or_unit_size(corpus, tmp_path, split):
    src, _ = corpus
    pretrain(src, tmp_path / "w1", workers=1, **split)
    pretrain(src, tmp_path / "w2", workers=2, **split)
    tk.assert_same_output(tmp_path / "w1", tmp_path / "w2")  # one worker or two: the same bytes
    pretrain(src, tmp_path / "big", workers=1, unit_bytes=64 << 10, **split)
    assert len(statekit.committed(tmp_path / "big", "shards_v1")) < len(statekit.committed(tmp_path / "w1", "shards_v1"))
    for part in ("val", "."):
        a, b = open_shards(tmp_path / "w1" / part), open_shards(tmp_path / "big" / part)
        assert ids(tmp_path / "w1" / part) == ids(tmp_path / "big" / part)
        assert all(np.array_equal(a.doc_tokens(i), b.doc_tokens(i)) for i in range(len(a)))


def test_a_count_larger_than_the_corpus_is_refused(corpus, tmp_path):
    src, texts = corpus
    with pytest.raises(ConfigError, match="keeps only"):
        pretrain(src, tmp_path / "out", val_count=len(texts))


@pytest.mark.parametrize("bad", [{"val_fraction": 0.0}, {"val_fraction": 1.0}, {"val_count": 0},
                                 {"val_fraction": 0.1, "val_count": 3}, {"val_seed": -1}])
def test_the_api_refuses_bad_split_options_before_any_work(tmp_path, bad):
    with pytest.raises(ConfigError):
        pretrain(tmp_path / "missing.jsonl", tmp_path / "out", **bad)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("flags", [["--val-fraction", "0.1", "--val-count", "3"], ["--val-fraction", "1.5"],
                                   ["--val-fraction", "0"], ["--val-count", "0"], ["--val-count", "-4"],
                                   ["--val-seed", "-1"], ["--val-count", "two"]])
@pytest.mark.parametrize("track", ["pretrain", "sft"])
def test_bad_split_flags_are_usage_errors(tmp_path, capsys, flags, track):
    src = tmp_path / "docs.jsonl"
    tk.write_docs(src, 5)
    try:
        code = main([track, str(src), "--out", str(tmp_path / "out"), "--tokenizer", "default", *flags])
    except SystemExit as exc:  # argparse's own usage errors (a value that is not a number)
        code = exc.code
    assert code == 2
    assert "usage" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_the_command_line_replaces_the_pipeline_files_other_split(corpus, tmp_path, capsys):
    src, _ = corpus
    config = tmp_path / "pipeline.yaml"
    config.write_text("val_fraction: 0.5\nval_seed: 2\n")
    out = tmp_path / "out"
    args = ["pretrain", str(src), "--out", str(out), "--tokenizer", "default", "--config", str(config), "--no-progress"]
    assert main([*args, "--val-count", "12"]) == 0
    printed = capsys.readouterr().out
    assert "split: train 588 documents" in printed and "val 12 documents" in printed and "(count 12, seed 2)" in printed
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["split"]["val_count"] == 12 and manifest["split"]["val_fraction"] is None


def test_sft_splits_whole_conversations_the_same_with_one_or_two_workers(tmp_path):
    src = tmp_path / "chats.jsonl"
    rows = tk.write_chats(src, 160, broken_every=29)
    outs = []
    for workers in (1, 2):
        outs.append(tmp_path / f"w{workers}")
        manifest = run_sft([str(src)], out=outs[-1], tokenizer="default", workers=workers, verify=0,
                           unit_bytes=4096, progress=False, val_count=16)
    tk.assert_same_output(*outs)
    val, train = open_shards(outs[0] / "val"), open_shards(outs[0])
    assert val.has_mask and len(val) == 16 and len(train) == len(rows) - 16
    assert not set(ids(outs[0] / "val")) & set(ids(outs[0]))
    assert manifest["split"]["val"]["tokens"] == val.n_tokens
    assert manifest["split"]["train"]["tokens"] == train.n_tokens
    assert manifest["report"]["examples"] == len(rows)  # the SFT report covers both sides


def test_the_same_conversation_lands_on_the_same_side_whatever_its_dataset_style(tmp_path):
    openai, sharegpt = tmp_path / "openai.jsonl", tmp_path / "sharegpt.jsonl"
    rows = tk.write_chats(openai, 80)
    with open(sharegpt, "w") as f:
        for i, row in enumerate(rows):
            turns = [{"from": {"user": "human", "assistant": "gpt"}.get(m["role"], m["role"]), "value": m["content"]}
                     for m in row["messages"]]
            f.write(json.dumps({"id": f"sg-{i}", "conversations": turns}) + "\n")
    sides = []
    for src in (openai, sharegpt):
        out = tmp_path / src.stem
        run_sft([str(src)], out=out, tokenizer="default", workers=1, verify=0, progress=False, val_fraction=0.3)
        sides.append(sorted(int(i.split("-")[1]) for i in ids(out / "val")))
    assert sides[0] == sides[1] and 0 < len(sides[0]) < len(rows)


def test_audit_and_stats_cover_the_validation_shards(corpus, tmp_path, capsys):
    src, _ = corpus
    out = tmp_path / "out"
    manifest = pretrain(src, out, val_fraction=0.2)
    assert main(["stats", str(out), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["documents"] == manifest["split"]["train"]["documents"]
    assert stats["val"]["documents"] == manifest["split"]["val"]["documents"] > 0
    assert main(["audit", str(out), "--n", "0"]) == 0
    assert "validation split" in capsys.readouterr().out
    assert main(["audit", str(out / "val"), "--n", "1"]) == 0
    capsys.readouterr()
    damaged = next((out / "val").glob("*.ids"))
    damaged.write_bytes(bytes(b ^ 0xFF for b in damaged.read_bytes()))
    assert main(["audit", str(out), "--n", "0"]) == 1
    assert "val/:" in capsys.readouterr().out


def test_the_loader_reads_the_validation_shards(corpus, tmp_path):
    torch = pytest.importorskip("torch")
    from tokenmill.loader import PackedCollator, PackedDataset

    src, _ = corpus
    out = tmp_path / "out"
    manifest = pretrain(src, out, val_count=30)
    dataset = PackedDataset(str(out / "val"), seq_len=512, shuffle=False, tokenizer="default")
    assert sum(int(dataset[i]["seq_lens"].sum()) for i in range(len(dataset))) == manifest["split"]["val"]["tokens"]
    loader = torch.utils.data.DataLoader(dataset, batch_size=2, collate_fn=PackedCollator(pad_id=dataset.pad_id))
    assert sum(batch["input_ids"].shape[0] for batch in loader) == len(dataset)


def test_overwrite_clears_the_validation_shards(corpus, tmp_path):
    src, _ = corpus
    out = tmp_path / "out"
    pretrain(src, out, val_fraction=0.2)
    assert list((out / "val").glob("shard-*"))
    with pytest.raises(ConfigError, match="other inputs or settings"):
        pretrain(src, out)  # no split: another run's settings, refused unless overwrite
    run_pretrain([str(src)], out=out, tokenizer="default", workers=1, unit_bytes=4096, progress=False, overwrite=True)
    assert not (out / "val").exists()


def test_kill_in_either_stage_of_a_count_split_and_resume_gives_the_same_bytes(corpus, tmp_path):
    src, _ = corpus
    args = ["pretrain", str(src), "--tokenizer", "default", "--workers", "2", "--unit-bytes", "2KB", "--no-progress",
            "--val-count", "40"]
    reference = tmp_path / "reference"
    assert main([*args, "--out", str(reference)]) == 0
    out = tmp_path / "out"
    for stage in ("val_rank_v1", "shards_v1"):  # killed while ranking, then killed again while writing shards
        units = len(statekit.committed(reference, stage))
        committed = kill_after_commits([*args, "--out", str(out)], out / "_state" / stage / "done", at_least=units // 3)
        assert committed < units and not (out / "manifest.json").exists()
    done = tk.cli(*args, "--out", str(out))
    assert done.returncode == 0, done.stderr
    tk.assert_same_output(reference, out)


def test_an_empty_validation_split_is_counted_and_audits_clean(corpus, tmp_path, capsys):
    src, texts = corpus
    out = tmp_path / "out"
    manifest = pretrain(src, out, val_fraction=1e-9)
    assert manifest["split"]["val"] == {"documents": 0, "tokens": 0, "shards": 0, "directory": "val"}
    assert json.loads((out / "val" / "manifest.json").read_text())["shards"] == []
    assert len(ids(out)) == len(texts)
    assert main(["audit", str(out), "--n", "0"]) == 0
    assert main(["stats", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out.split("OK: no problems found\n")[-1])["val"]["documents"] == 0


def test_the_dry_run_names_the_split(corpus, tmp_path, capsys):
    src, _ = corpus
    args = ["pretrain", str(src), "--out", str(tmp_path / "out"), "--tokenizer", "default", "--dry-run"]
    assert main([*args, "--val-count", "9", "--val-seed", "3"]) == 0
    assert "validation split: exactly 9 records (a ranking pass, then the shards), seed 3" in capsys.readouterr().out
    assert not (tmp_path / "out").exists()


def test_a_fraction_split_resumed_after_losing_units_gives_the_same_bytes(corpus, tmp_path):
    src, _ = corpus
    reference, resumed = tmp_path / "reference", tmp_path / "resumed"
    pretrain(src, reference, val_fraction=0.25)
    pretrain(src, resumed, val_fraction=0.25)
    (resumed / "manifest.json").unlink()
    markers = sorted(statekit.reopen(resumed, "shards_v1").iterdir())  # as if killed before the stage's index
    for marker in markers[len(markers) // 2:]:  # what a run killed half-way leaves: no files, no marker
        index = marker.stem.split("-")[-1]
        for f in [*resumed.glob(f"shard-{index}*"), *(resumed / "val").glob(f"shard-{index}*")]:
            f.unlink()
        marker.unlink()
    assert len(list((resumed / "val").glob("*.ids"))) < len(list((reference / "val").glob("*.ids")))
    pretrain(src, resumed, val_fraction=0.25)
    tk.assert_same_output(reference, resumed)


@pytest.mark.parametrize("split", [{}, {"val_fraction": 0.3}])
def test_every_output_a_unit_marker_names_exists_under_its_final_name(tmp_path, split):
    """A unit's result lists its files after its shard writers closed: final names, never ``.tmp`` ones."""
    src = tmp_path / "chats.jsonl"
    tk.write_chats(src, 40, seed=5)
    runs = [(tmp_path / "docs-out", lambda out: pretrain(tk_docs(tmp_path), out, **split)),
            (tmp_path / "sft-out", lambda out: run_sft([str(src)], out=out, tokenizer="default", workers=1, verify=0,
                                                       unit_bytes=2048, progress=False, **split))]
    for out, run in runs:
        run(out)
        markers = list(statekit.results(out, "shards_v1").values())
        named = [rel for m in markers for rel in m["outputs"]]
        assert len(markers) > 1 and any(rel.endswith(".ids") for rel in named)
        assert not [rel for rel in named if rel.endswith(".tmp") or not (out / rel).is_file()]


def tk_docs(tmp_path: Path) -> Path:
    path = tmp_path / "docs.jsonl"
    if not path.exists():
        tk.write_docs(path, 120, seed=3)
    return path
