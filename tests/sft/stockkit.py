"""Test support for the stock chat templates of tests/sft/templates (sources and licences in its SOURCES.md):
each template paired with a tiny tokenizer holding its model's control tokens, conversations of the shapes the
templates render, and the check of one render against transformers (ids) and the prefix-render reference
(masks, :mod:`tokenmill.sft.maskref`)."""

from __future__ import annotations

from pathlib import Path

import chatkit as ck

TEMPLATES = Path(__file__).parent / "templates"
_QWEN = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
_LLAMA3 = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",
           "<|eom_id|>", "<|python_tag|>"]
_DEEPSEEK = ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>",
             "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>",
             "<｜tool▁outputs▁begin｜>", "<｜tool▁outputs▁end｜>", "<｜tool▁output▁begin｜>",
             "<｜tool▁output▁end｜>", "<｜tool▁sep｜>"]

# file -> (special tokens of the model's tokenizer the template writes, bos, eos), as in the model's
# tokenizer_config.json (added tokens with "special": true)
STOCK = {
    "openai-gpt-oss-120b.jinja": (["<|startoftext|>", "<|endoftext|>", "<|start|>", "<|end|>", "<|message|>",
                                   "<|channel|>", "<|constrain|>", "<|return|>", "<|call|>"],
                                  "<|startoftext|>", "<|return|>"),
    "meetkai-functionary-medium-v3.2.jinja": (_LLAMA3, "<|begin_of_text|>", "<|eot_id|>"),
    "ByteDance-Seed-OSS.jinja": (["<seed:bos>", "<seed:eos>", "<seed:pad>", "<seed:think>", "</seed:think>",
                                  "<seed:cot_budget_reflect>", "</seed:cot_budget_reflect>", "<seed:tool_call>",
                                  "</seed:tool_call>"], "<seed:bos>", "<seed:eos>"),
    "Qwen-QwQ-32B.jinja": (_QWEN, None, "<|im_end|>"),
    "NVIDIA-Nemotron-Nano-v2.jinja": (["<SPECIAL_10>", "<SPECIAL_11>", "<SPECIAL_12>", "<s>", "</s>"],
                                      "<s>", "<SPECIAL_12>"),
    "MiniMax-M2.jinja": (["]~!b[", "]~b]", "[e~["], "]~!b[", "[e~["),
    "HuggingFaceTB-SmolLM3-3B.jinja": (_QWEN, None, "<|im_end|>"),
    "GLM-4.6.jinja": (["<|endoftext|>", "[gMASK]", "<sop>", "<|system|>", "<|user|>", "<|assistant|>",
                       "<|observation|>"], None, "<|endoftext|>"),
    "deepseek-ai-DeepSeek-V3.1.jinja": (_DEEPSEEK, "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    "ibm-granite-granite-3.3-2B-Instruct.jinja": (["<|end_of_text|>", "<|start_of_role|>", "<|end_of_role|>",
                                                   "<|tool_call|>"], "<|end_of_text|>", "<|end_of_text|>"),
    "microsoft-Phi-3.5-mini-instruct.jinja": (["<s>", "</s>", "<|endoftext|>", "<|system|>", "<|user|>",
                                               "<|assistant|>", "<|end|>"], "<s>", "<|endoftext|>"),
    "open-instruct-olmo.jinja": (_QWEN, None, "<|endoftext|>"),
    "open-instruct-simple_chat.jinja": (["<s>", "</s>"], "<s>", "</s>"),
    "openchat-openchat-3.5-0106.jinja": (["<s>", "</s>", "<|end_of_turn|>"], "<s>", "<|end_of_turn|>"),
    "Qwen-Qwen2.5-7B-Instruct.jinja": (_QWEN, None, "<|im_end|>"),
    "Qwen-Qwen3-0.6B.jinja": (_QWEN, None, "<|im_end|>"),
    "meta-llama-Llama-3.1-8B-Instruct.jinja": (_LLAMA3, "<|begin_of_text|>", "<|eot_id|>"),
    "google-gemma-2-2b-it.jinja": (["<bos>", "<eos>", "<start_of_turn>", "<end_of_turn>"], "<bos>", "<eos>"),
    "mistralai-Mistral-Nemo-Instruct-2407.jinja": (["<s>", "</s>", "[INST]", "[/INST]", "[TOOL_CALLS]",
                                                    "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]", "[TOOL_RESULTS]",
                                                    "[/TOOL_RESULTS]"], "<s>", "</s>"),
    "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja": ([*_LLAMA3, "<|im_start|>", "<|im_end|>"],
                                                            "<|begin_of_text|>", "<|im_end|>"),
    "vllm-tool_chat_template_internlm2_tool.jinja": (["<s>", "</s>", "<|im_start|>", "<|im_end|>",
                                                      "<|action_start|>", "<|action_end|>", "<|interpreter|>",
                                                      "<|plugin|>"], "<s>", "</s>"),
}


def stock_template(name: str) -> str:
    return (TEMPLATES / name).read_text(encoding="utf-8")


def stock_tokenizer_dir(name: str, path: Path) -> Path:
    """A tiny tokenizer holding ``name``'s control tokens (bos/eos as its model's), saved with its template."""
    specials, bos, eos = STOCK[name]
    return ck.build_tokenizer_dir(path, chat_template=stock_template(name), bos=bos, eos=eos, specials=specials)


def controls_of(hf) -> list[str]:
    return sorted({str(t) for t in hf.added_tokens_decoder.values() if t.special}, key=len, reverse=True)


def toks_for(name: str, path: Path):
    """(tokenizer directory, tokenmill tokenizer, transformers twin) of stock template ``name``."""
    from tokenmill.tokenize import load_tokenizer

    d = stock_tokenizer_dir(name, path)
    return d, load_tokenizer(d), ck.hf_tokenizer(d)


def check_render(conv: dict, name: str, tok, hf, **policy):
    """Render ``conv`` with stock template ``name``; assert ids equal transformers' and masks equal the reference
    on every turn it has one for; return the trained runs, decoded."""
    from tokenmill.sft.maskref import mask_differences
    from tokenmill.sft.parity import reference_clock
    from tokenmill.sft.render import MaskPolicy, render_conversation
    from tokenmill.sft.template import load_template

    template = load_template(stock_template(name))
    r = render_conversation(conv, tokenizer=tok, template=template, policy=MaskPolicy(**policy))
    with reference_clock(template):  # the reference reads the clock at the same fixed day
        assert r.ids.tolist() == ck.oracle_ids(hf, r, template.source), (name, conv["id"])
        assert mask_differences(hf, r, template.source, controls_of(hf)) == [], (name, conv["id"])
    return r, [hf.decode(run) for run in ck.trained_runs(r.ids, r.mask)]
