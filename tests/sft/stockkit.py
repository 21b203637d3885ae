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
_MISTRAL = ["<s>", "</s>", "[INST]", "[/INST]", "[TOOL_CALLS]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]",
            "[TOOL_RESULTS]", "[/TOOL_RESULTS]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "[IMG]", "[ARGS]", "[CALL_ID]",
            "[TOOL_CONTENT]"]
_KIMI = ["[BOS]", "[EOS]", "<|im_user|>", "<|im_assistant|>", "<|im_system|>", "<|im_middle|>", "<|im_end|>",
         "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>",
         "<|tool_call_argument_begin|>", "<|tool_call_end|>", "<|media_start|>", "<|media_content|>", "<|media_end|>",
         "<|media_pad|>"]
_COHERE = ["<BOS_TOKEN>", "<EOS_TOKEN>", "<|START_OF_TURN_TOKEN|>", "<|END_OF_TURN_TOKEN|>", "<|USER_TOKEN|>",
           "<|CHATBOT_TOKEN|>", "<|SYSTEM_TOKEN|>"]
_VISION = ["<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"]
_GRANITE4 = ["<|end_of_text|>", "<|start_of_role|>", "<|end_of_role|>"]

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
    "Apertus-8B-Instruct.jinja": (["<s>", "</s>", "<|system_start|>", "<|system_end|>", "<|developer_start|>",
                                   "<|developer_end|>", "<|user_start|>", "<|user_end|>", "<|assistant_start|>",
                                   "<|assistant_end|>", "<|inner_prefix|>", "<|inner_suffix|>", "<|tools_prefix|>",
                                   "<|tools_suffix|>"], "<s>", "<|assistant_end|>"),
    "Bielik-11B-v3.0-Instruct.jinja": (["<s>", "</s>", "<|im_start|>", "<|im_end|>", "<|function_list|>",
                                        "<|function_output|>"], "<s>", "<|im_end|>"),
    "CohereForAI-c4ai-command-r-plus-tool_use.jinja": (_COHERE, "<BOS_TOKEN>", "<|END_OF_TURN_TOKEN|>"),
    "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja": ([*_COHERE, "<|START_THINKING|>", "<|END_THINKING|>",
                                                            "<|START_ACTION|>", "<|END_ACTION|>", "<|START_RESPONSE|>",
                                                            "<|END_RESPONSE|>", "<|START_TOOL_RESULT|>",
                                                            "<|END_TOOL_RESULT|>"], "<BOS_TOKEN>",
                                                           "<|END_OF_TURN_TOKEN|>"),
    "GLM-4.7-Flash.jinja": (["<|endoftext|>", "[gMASK]", "<sop>", "<|system|>", "<|user|>", "<|assistant|>",
                             "<|observation|>"], None, "<|endoftext|>"),
    "GigaChat3-10B-A1.8B.jinja": (["<s>", "</s>", "<|message_sep|>", "<|role_sep|>"], "<s>", "</s>"),
    "moonshotai-Kimi-K2.jinja": (_KIMI, "[BOS]", "[EOS]"),
    "Kimi-K2-Thinking.jinja": (_KIMI, "[BOS]", "[EOS]"),
    "LFM2-8B-A1B.jinja": (["<|startoftext|>", "<|im_start|>", "<|im_end|>", "<|tool_list_start|>", "<|tool_list_end|>",
                           "<|tool_response_start|>", "<|tool_response_end|>", "<|tool_call_start|>",
                           "<|tool_call_end|>"], "<|startoftext|>", "<|im_end|>"),
    "LFM2.5-Instruct.jinja": (["<|startoftext|>", "<|im_start|>", "<|im_end|>"], "<|startoftext|>", "<|im_end|>"),
    "MiMo-VL.jinja": ([*_QWEN, *_VISION], None, "<|im_end|>"),
    "Mistral-Small-3.2-24B-Instruct-2506.jinja": (_MISTRAL, "<s>", "</s>"),
    "unsloth-mistral-Devstral-Small-2507.jinja": (_MISTRAL, "<s>", "</s>"),
    "mistralai-Ministral-3-14B-Reasoning-2512.jinja": ([*_MISTRAL, "[THINK]", "[/THINK]"], "<s>", "</s>"),
    "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja": (["<s>", "</s>", "<|im_start|>", "<|im_end|>"], "<s>", "<|im_end|>"),
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja": ([*_LLAMA3, "<|im_start|>", "<|im_end|>"],
                                                          "<|begin_of_text|>", "<|im_end|>"),
    "Qwen3-Coder.jinja": (_QWEN, None, "<|im_end|>"),
    "Qwen3.5-4B.jinja": ([*_QWEN, *_VISION], None, "<|im_end|>"),
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja": (_DEEPSEEK, "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    "google-gemma-4-31B-it.jinja": (["<bos>", "<eos>", "<|turn>", "<turn|>", "<|think|>", "<|channel>", "<channel|>",
                                     "<|tool>", "<tool|>", "<|tool_call>", "<tool_call|>", "<|tool_response>",
                                     "<tool_response|>", "<|image|>", "<|audio|>", "<|video|>"], "<bos>", "<eos>"),
    "ibm-granite-granite-4.0.jinja": (_GRANITE4, "<|end_of_text|>", "<|end_of_text|>"),
    "meetkai-functionary-medium-v3.1.jinja": (_LLAMA3, "<|begin_of_text|>", "<|eot_id|>"),
    "meta-llama-Llama-3.2-3B-Instruct.jinja": (_LLAMA3, "<|begin_of_text|>", "<|eot_id|>"),
    "meta-llama-Llama-3.3-70B-Instruct.jinja": (_LLAMA3, "<|begin_of_text|>", "<|eot_id|>"),
    "stepfun-ai-Step-3.5-Flash.jinja": (["<｜begin▁of▁sentence｜>", "<|im_start|>", "<|im_end|>"],
                                        "<｜begin▁of▁sentence｜>", "<|im_end|>"),
    "deepseek-ai-DeepSeek-V3.2.jinja": (_DEEPSEEK, "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    "unsloth-Apriel-1.5.jinja": (["<s>", "</s>", "<|system|>", "<|user|>", "<|assistant|>", "<|end|>", "<|content|>",
                                  "<|tool_result|>"], "<s>", "</s>"),
    "upstage-Solar-Open-100B.jinja": (["<|startoftext|>", "<|endoftext|>", "<|begin|>", "<|end|>", "<|content|>",
                                       "<|think|>", "<|calls|>", "<|flush|>", "<|tool_calls|>", "<|tool_call:begin|>",
                                       "<|tool_call:end|>", "<|tool_call:name|>", "<|tool_call:args|>",
                                       "<|tool_response|>", "<|tool_response:begin|>", "<|tool_response:end|>",
                                       "<|tool_response:id|>", "<|tool_response:name|>", "<|tool_response:result|>",
                                       "<|tools:begin|>", "<|tools:end|>", "<|tool:begin|>", "<|tool:end|>"],
                                      "<|startoftext|>", "<|end|>"),
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
