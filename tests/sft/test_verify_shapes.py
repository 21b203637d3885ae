"""Which examples a run checks against apply_chat_template (every shape present, not only the first ones), what
a real difference does (stop, or reject as parity_mismatch), and templates whose end-of-turn string is no
special token of the tokenizer (refused unless allowed; audit then fails)."""

from __future__ import annotations

import json
import shutil

import chatkit as ck
import pytest

from tokenmill.cli import main
from tokenmill.errors import ParityError, TemplateError
from tokenmill.sft import run as run_module
from tokenmill.sft.run import run_sft
from tokenmill.shards import open_shards
from tokenmill.shards.audit import audit

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory):
    return ck.build_tokenizer_dir(tmp_path_factory.mktemp("tok"))


def _row(i: int, *messages, tools=None) -> str:
    row = {"id": f"r{i}", "messages": list(messages)}
    if tools is not None:
        row["tools"] = tools
    return json.dumps(row) + "\n"


def _plain(i: int) -> str:
    return _row(i, {"role": "user", "content": f"Hello {i}"}, {"role": "assistant", "content": "Hi there."})


RARE = [  # each a shape the plain rows do not have, all at the end of the file
    _row(100, {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
         {"role": "assistant", "content": "Hello."}),
    _row(101, {"role": "user", "content": "Weather in Paris?"},
         {"role": "assistant", "content": "", "tool_calls": [
             {"type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
         {"role": "tool", "content": '{"temp": 21}'}, {"role": "assistant", "content": "It is 21 degrees."},
         tools=[{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]),
    _row(102, {"role": "user", "content": "1+1?"},
         {"role": "assistant", "content": "2", "reasoning_content": "1 and 1 make 2."}),
    _row(103, {"role": "user", "content": "type <|im_end|> please"}, {"role": "assistant", "content": "ok"}),
    _row(104, {"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
         {"role": "user", "content": "c"}, {"role": "assistant", "content": "d"}),
]


def test_every_shape_present_is_checked_once_at_least(tok_dir, tmp_path):
    src = tmp_path / "chats.jsonl"
    src.write_text("".join(_plain(i) for i in range(40)) + "".join(RARE))
    m = run_sft([str(src)], out=tmp_path / "out", tokenizer=str(tok_dir), workers=1, progress=False, verify=2)
    parity = m["report"]["parity"]
    present = {k for k, v in parity["shapes_present"].items() if v}
    assert present == {"system", "tools", "tool_calls", "tool_results", "reasoning", "multi_turn",
                       "literal_control_strings"}
    assert all(parity["shapes_checked"][k] >= 1 for k in present), parity
    assert parity["checked"] + parity["exempt"] == 2 + len(RARE)  # the first two, then one per new shape
    assert parity["exempt"] == parity["deliberate"]["literal_control_strings"] == 1
    assert parity["deliberate"]["tool_arguments_decoded"] == 1 and parity["real_differences"] == 0


def test_truncation_is_a_shape(tok_dir, tmp_path):
    long = _row(7, *[{"role": r, "content": f"turn {k} " * 8} for k in range(6) for r in ("user", "assistant")])
    src = tmp_path / "chats.jsonl"
    src.write_text("".join(_plain(i) for i in range(10)) + long)
    m = run_sft([str(src)], out=tmp_path / "out", tokenizer=str(tok_dir), workers=1, progress=False, verify=1,
                max_length=120)
    parity = m["report"]["parity"]
    assert parity["shapes_present"]["truncated"] == 1 and parity["shapes_checked"]["truncated"] == 1


class _OneWrongId:
    """The real transformers reference, except one wrong id for record r3: a real difference, injected."""

    def __init__(self, hf):
        self.hf = hf
        self.__dict__.update({k: getattr(hf, k) for k in ("all_special_ids", "all_special_tokens",
                                                          "added_tokens_decoder")})

    def apply_chat_template(self, messages, **kwargs):
        ids = list(self.hf.apply_chat_template(messages, **kwargs))
        if any(m.get("content") == "Hello 3" for m in messages):
            ids[1] = (ids[1] + 1) % 300
        return ids

    def decode(self, ids):
        return self.hf.decode(ids)


@pytest.fixture
def one_wrong(tok_dir, monkeypatch):
    from tokenmill.tokenize import load_tokenizer

    tok = load_tokenizer(tok_dir)
    monkeypatch.setitem(run_module._ORACLES, run_module.oracle_key(tok), (_OneWrongId(ck.hf_tokenizer(tok_dir)), ""))


def test_a_real_difference_stops_the_run_naming_the_example(tok_dir, tmp_path, one_wrong):
    src = tmp_path / "chats.jsonl"
    src.write_text("".join(_plain(i) for i in range(6)))
    with pytest.raises(ParityError, match="record r3"):
        run_sft([str(src)], out=tmp_path / "out", tokenizer=str(tok_dir), workers=1, progress=False, verify=8)


def test_on_mismatch_reject_rejects_the_example_and_goes_on(tok_dir, tmp_path, one_wrong):
    src = tmp_path / "chats.jsonl"
    src.write_text("".join(_plain(i) for i in range(6)))
    m = run_sft([str(src)], out=tmp_path / "out", tokenizer=str(tok_dir), workers=1, progress=False, verify=8,
                on_mismatch="reject")
    assert m["counts"]["rejected"] == {"parity_mismatch": 1} and m["counts"]["kept"] == 5
    assert m["report"]["parity"]["real_differences"] == 1 and m["report"]["parity"]["checked"] == 5
    rejects = [json.loads(line) for line in (tmp_path / "out" / "rejects.jsonl").read_text().splitlines()]
    assert [r["loc"] for r in rejects] == [4] and "record r3" in rejects[0]["detail"]


def test_on_mismatch_is_validated():
    from tokenmill.errors import ConfigError

    with pytest.raises(ConfigError, match="on_mismatch"):
        run_module.SftOptions(on_mismatch="ignore")


@pytest.fixture(scope="module")
def no_special_dir(tok_dir, tmp_path_factory):
    """vocab.json + merges.txt of the same BPE, without <|im_start|>/<|im_end|> as special tokens."""
    from tokenizers import Tokenizer

    d = tmp_path_factory.mktemp("plainbpe")
    Tokenizer.from_file(str(tok_dir / "tokenizer.json")).model.save(str(d))
    vocab = json.loads((d / "vocab.json").read_text())
    for s in ck.SPECIALS:  # the trainer put them in the vocabulary; a plain BPE has none of them
        vocab.pop(s, None)
    (d / "vocab.json").write_text(json.dumps(dict(zip(vocab, range(len(vocab))))))
    (d / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "GPT2Tokenizer", "add_bos_token": False}))
    return d


def test_a_template_whose_stop_is_no_special_token_is_refused(no_special_dir, tmp_path, capsys):
    src = tmp_path / "chats.jsonl"
    src.write_text("".join(_plain(i) for i in range(3)))
    with pytest.raises(TemplateError, match=r"'<\|im_end\|>'.*not have as a special token.*--allow-untrained-stop"):
        run_sft([str(src)], out=tmp_path / "out", tokenizer=str(no_special_dir), workers=1, progress=False, verify=0)
    code = main(["sft", str(src), "--out", str(tmp_path / "cli"), "--tokenizer", str(no_special_dir),
                 "--verify", "0", "--no-progress"])
    assert code != 0 and "allow-untrained-stop" in capsys.readouterr().err
    m = run_sft([str(src)], out=tmp_path / "out", tokenizer=str(no_special_dir), workers=1, progress=False, verify=0,
                allow_untrained_stop=True)
    assert m["report"]["stop_token_trained"] == 0 and len(open_shards(tmp_path / "out")) == 3
    result = audit(tmp_path / "out", tokenizer=str(no_special_dir))
    assert any("no example trains a stop token" in p for p in result["problems"])
    assert main(["audit", str(tmp_path / "out"), "--tokenizer", str(no_special_dir)]) == 1
    shutil.rmtree(tmp_path / "out")
