"""Real-data tier: every real chat template in shared_data, with a real tokenizer, on real conversations:
ids equal transformers' apply_chat_template ids and trained tokens decode to the assistant outputs + stops."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import chatkit as ck
import pytest

from tokenmill.sft.maskref import mask_differences, reference_turns
from tokenmill.sft.render import render_conversation
from tokenmill.sft.template import load_template
from tokenmill.tokenize import load_tokenizer

pytestmark = pytest.mark.realdata
transformers = pytest.importorskip("transformers")

TEMPLATES = {  # config file -> (tokenizer, end-of-turn marker, whether the template takes a system message)
    "ortx_qwen2.5_tokenizer_config.json": ("qwen2", "<|im_end|>", True),
    "qwen2-1.5b-instruct-finetune_tokenizer_config.json": ("qwen2", "<|im_end|>", True),
    "meta-llama-3-8b-instruct_tokenizer_config.json": ("qwen2", "<|eot_id|>", True),
    "deepseek-r1-distill-qwen-32b_tokenizer_config.json": ("qwen2", "<｜end▁of▁sentence｜>", True),
    "ortx_gemma_tokenizer_config.json": ("qwen2", "<end_of_turn>", False),
    "mistral-7b-instruct-v0.3_tokenizer_config.json": ("mistral", "</s>", True),
}


def _name(value):
    return value.get("content") if isinstance(value, dict) else value


@pytest.fixture(scope="module")
def qwen2_json(shared_data, tmp_path_factory) -> str:
    """The Qwen2 tokenizer (vocab.json + merges.txt) as tokenizer.json text, built once."""
    base = tmp_path_factory.mktemp("qwen2")
    shutil.copy(shared_data / "tokenizers" / "qwen2_vocab.json", base / "vocab.json")
    shutil.copy(shared_data / "tokenizers" / "qwen2_merges.txt", base / "merges.txt")
    (base / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "Qwen2Tokenizer"}))
    return transformers.AutoTokenizer.from_pretrained(str(base)).backend_tokenizer.to_str()


def _tokenizer_dir(shared: Path, config_name: str, kind: str, out: Path, qwen2_json: str) -> Path:
    """A real tokenizer with the template's special tokens added when it lacks them (as in added_tokens_decoder)."""
    from tokenizers import AddedToken, Tokenizer

    config = json.loads((shared / "chat_templates" / config_name).read_text(encoding="utf-8"))
    out.mkdir()
    if kind == "mistral":
        tok = Tokenizer.from_file(str(shared / "tokenizers" / "mistral-7b-instruct-v0.3_tokenizer.json"))
    else:
        tok = Tokenizer.from_str(qwen2_json)
    wanted = [v["content"] for v in (config.get("added_tokens_decoder") or {}).values() if v.get("special")]
    wanted += [_name(config.get(k)) for k in ("bos_token", "eos_token", "pad_token", "unk_token")]
    missing = [t for t in dict.fromkeys(wanted) if t and tok.token_to_id(t) is None]
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in missing])
    tok.save(str(out / "tokenizer.json"))
    keep = {k: _name(config.get(k)) for k in ("bos_token", "eos_token") if _name(config.get(k))}
    (out / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "PreTrainedTokenizerFast", "add_bos_token": False, "chat_template": config["chat_template"],
         **keep}))
    return out


def _conversations(shared: Path, n: int = 25) -> list[dict]:
    rng = random.Random(0)
    sharegpt = json.loads((shared / "sft" / "fastchat_dummy_conversation_sharegpt.json").read_text())
    alpaca = json.loads((shared / "sft" / "llamafactory_alpaca_en_demo.json").read_text())
    roles = {"human": "user", "gpt": "assistant", "system": "system"}
    out = []
    for rec in rng.sample(sharegpt, n):
        turns = [(roles[t["from"]], t["value"]) for t in rec["conversations"]]
        out.append(ck.conv(("system", "You are a helpful assistant."), *turns, cid=rec["id"]))
    for i, rec in enumerate(rng.sample(alpaca, n)):
        prompt = rec["instruction"] + ("\n\n" + rec["input"] if rec["input"] else "")
        out.append(ck.conv(("user", prompt), ("assistant", rec["output"]), cid=f"alpaca:{i}"))
    return out


@pytest.fixture(scope="module")
def conversations(shared_data):
    return _conversations(shared_data)


@pytest.mark.parametrize("config_name", sorted(TEMPLATES))
def test_real_templates_match_apply_chat_template(shared_data, conversations, qwen2_json, tmp_path, config_name):
    kind, stop, takes_system = TEMPLATES[config_name]
    d = _tokenizer_dir(shared_data, config_name, kind, tmp_path / "tok", qwen2_json)
    tok, hf = load_tokenizer(d), ck.hf_tokenizer(d)
    template = load_template(shared_data / "chat_templates" / config_name)
    checked = masked = 0
    for c in conversations:
        if not takes_system:
            c = {**c, "messages": [m for m in c["messages"] if m["role"] != "system"]}
        r = render_conversation(c, tokenizer=tok, template=template)
        assert r.ids.tolist() == ck.oracle_ids(hf, r, template.source), c["id"]
        runs = [hf.decode(run) for run in ck.trained_runs(r.ids, r.mask)]
        outputs = [m["content"] for m in c["messages"] if m["role"] == "assistant"]
        assert len(runs) == len(outputs), c["id"]
        for run, output in zip(runs, outputs):
            assert run.strip() in (output + stop, output.strip() + stop), (c["id"], run, output)
        assert r.stats["stop_token_trained"] and r.stats["trained_tokens"] < r.stats["tokens"]
        assert mask_differences(hf, r, template.source, _controls(hf)) == [], c["id"]
        checked += 1
        masked += len(reference_turns(hf, r.messages, r.tools, template.source, _controls(hf)))
    assert checked == len(conversations)
    print(f"{config_name}: masks equal the reference on {masked} assistant turns")


def _controls(hf):
    return sorted({str(t) for t in hf.added_tokens_decoder.values() if t.special}, key=len, reverse=True)


HERMES3 = Path(__file__).parent / "fixtures" / "hermes3_tool_use.jinja"


def test_real_tool_templates_masks_match_the_reference(shared_data, qwen2_json, tmp_path):
    """Real tool-call conversations (glaive) through every real template that renders tools, and Hermes-3's
    tool-use template: masks equal the reference from apply_chat_template's own renders on every turn."""
    name = "ortx_qwen2.5_tokenizer_config.json"
    d = _tokenizer_dir(shared_data, name, "qwen2", tmp_path / "tok", qwen2_json)
    tok, hf = load_tokenizer(d), ck.hf_tokenizer(d)
    for template in (load_template(HERMES3), load_template(shared_data / "chat_templates" / name), load_template()):
        turns = 0
        for c in _glaive(shared_data):
            if not json.loads(c["tools"]):
                continue  # Hermes-3's tool-use template iterates `tools`: it renders no conversation without
            r = render_conversation(c, tokenizer=tok, template=template)
            assert r.ids.tolist() == ck.oracle_ids(hf, r, template.source), c["id"]
            assert mask_differences(hf, r, template.source, _controls(hf)) == [], (template.origin, c["id"])
            turns += len(reference_turns(hf, r.messages, r.tools, template.source, _controls(hf)))
        assert turns >= 10, template.origin
        print(f"{template.origin}: masks equal the reference on {turns} tool-conversation turns")


def _glaive(shared: Path, n: int = 15) -> list[dict]:
    records = json.loads((shared / "sft" / "llamafactory_glaive_toolcall_en_demo.json").read_text())
    out = []
    for i, rec in enumerate(random.Random(1).sample(records, n)):
        messages = []
        for turn in rec["conversations"]:
            role, value = turn["from"], turn["value"]
            if role == "function_call":
                call = json.loads(value)
                messages.append({"role": "assistant", "content": None, "tool_calls": [
                    {"id": f"call{i:05d}", "name": call["name"], "arguments": json.dumps(call["arguments"])}]})
            else:
                messages.append({"role": {"human": "user", "gpt": "assistant", "observation": "tool"}[role],
                                 "content": value})
        out.append(ck.conv(*messages, cid=f"glaive:{i}", tools=json.dumps(
            [{"type": "function", "function": t} for t in json.loads(rec["tools"])])))
    return out


def _reasoning(shared: Path) -> list[dict]:
    records = json.loads((shared / "sft" / "reasoning_deepseek_r1_openrouter_outputs.json").read_text())
    return [ck.conv(("user", r["problem"]), {"role": "assistant", "content": r["message_content"],
                                              "reasoning": r["message_thinking"]}, cid=f"r1:{i}")
            for i, r in enumerate(records)]


def test_real_tool_calls_and_reasoning(shared_data, qwen2_json, tmp_path):
    name = "ortx_qwen2.5_tokenizer_config.json"
    d = _tokenizer_dir(shared_data, name, "qwen2", tmp_path / "tok", qwen2_json)
    tok, hf = load_tokenizer(d), ck.hf_tokenizer(d)
    for template in (load_template(shared_data / "chat_templates" / name), load_template()):
        for c in _glaive(shared_data):
            r = render_conversation(c, tokenizer=tok, template=template)
            assert r.ids.tolist() == ck.oracle_ids(hf, r, template.source), c["id"]
            runs = [hf.decode(run) for run in ck.trained_runs(r.ids, r.mask)]
            assistants = [m for m in c["messages"] if m["role"] == "assistant"]
            assert len(runs) == len(assistants) and all(run.endswith("<|im_end|>") for run in runs)
            for run, m in zip(runs, assistants):
                expected = m["content"] or m["tool_calls"][0]["name"]
                assert expected in run and "<tool_response>" not in run, (c["id"], run)
        for c in _reasoning(shared_data):
            r = render_conversation(c, tokenizer=tok, template=template)
            assert r.ids.tolist() == ck.oracle_ids(hf, r, template.source), c["id"]
            (run,) = [hf.decode(run) for run in ck.trained_runs(r.ids, r.mask)]
            m = c["messages"][1]
            assert run == f"<think>\n{m['reasoning']}\n</think>\n\n{m['content']}<|im_end|>"
            assert r.stats["reasoning_trained_tokens"] > 0


def test_real_reasoning_dropped_by_deepseek_template_is_counted(shared_data, qwen2_json, tmp_path):
    name = "deepseek-r1-distill-qwen-32b_tokenizer_config.json"
    d = _tokenizer_dir(shared_data, name, "qwen2", tmp_path / "tok", qwen2_json)
    tok, hf = load_tokenizer(d), ck.hf_tokenizer(d)
    template = load_template(shared_data / "chat_templates" / name)
    for c in _reasoning(shared_data):
        r = render_conversation(c, tokenizer=tok, template=template)
        assert r.ids.tolist() == ck.oracle_ids(hf, r, template.source)
        (run,) = [hf.decode(run) for run in ck.trained_runs(r.ids, r.mask)]
        assert run == c["messages"][1]["content"].strip() + "<｜end▁of▁sentence｜>" or run.endswith(
            c["messages"][1]["content"] + "<｜end▁of▁sentence｜>")
        assert r.stats["reasoning_inlined"] == 1 and r.stats["reasoning_dropped_by_template"] == 1
