"""Test support for chat-template tests: a tiny byte-level BPE trained in the test, its transformers twin (the
oracle), small templates in the styles of real model families, and a check that trained tokens decode to
exactly the assistant outputs plus their stop markers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

SPECIALS = [
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<s>", "</s>", "[INST]", "[/INST]",
    "<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",
]
CORPUS = [
    "The quick brown fox jumps over the lazy dog. Hello there, how are you today?",
    "system user assistant tool think answer question reasoning weather Paris London",
    '{"name": "get_weather", "arguments": {"city": "Paris"}} <tool_call> </tool_call>',
    "1 + 1 = 2. Let me think step by step. The answer is 42.\n\nSure! Here you go:\n- one\n- two",
]

LLAMA3 = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'"
    "+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}"
    "{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
)
MISTRAL = (
    "{%- if messages[0]['role'] == 'system' %}{%- set system_message = messages[0]['content'] %}"
    "{%- set loop_messages = messages[1:] %}{%- else %}{%- set loop_messages = messages %}{%- endif %}"
    "{{- bos_token }}{%- for message in loop_messages %}"
    "{%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{- raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{%- endif %}"
    "{%- if message['role'] == 'user' %}{%- if loop.last and system_message is defined %}"
    "{{- '[INST] ' + system_message + '\n\n' + message['content'] + '[/INST]' }}"
    "{%- else %}{{- '[INST] ' + message['content'] + '[/INST]' }}{%- endif %}"
    "{%- elif message['role'] == 'assistant' %}{{- ' ' + message['content']|trim + eos_token }}"
    "{%- endif %}{%- endfor %}"
)
GENERATION = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' }}"
    "{% if message['role'] == 'assistant' %}{% generation %}{{ message['content'] + '<|im_end|>' }}"
    "{% endgeneration %}{{ '\n' }}{% else %}{{ message['content'] + '<|im_end|>\n' }}{% endif %}{% endfor %}"
)
# Qwen3-style: reasoning_content rendered only after the last user query; earlier turns lose their reasoning.
QWEN3 = (
    "{%- set ns = namespace(last_query_index=messages|length - 1) %}"
    "{%- for message in messages[::-1] %}{%- set index = (messages|length - 1) - loop.index0 %}"
    "{%- if message.role == 'user' and ns.last_query_index == messages|length - 1 %}"
    "{%- set ns.last_query_index = index %}{%- endif %}{%- endfor %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'user' or message.role == 'system' %}"
    "{{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' }}"
    "{%- elif message.role == 'assistant' %}{%- set content = message.content %}"
    "{%- set reasoning_content = '' %}"
    "{%- if message.reasoning_content is string %}{%- set reasoning_content = message.reasoning_content %}"
    "{%- elif '</think>' in content %}"
    "{%- set reasoning_content = content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') %}"
    "{%- set content = content.split('</think>')[-1].lstrip('\n') %}{%- endif %}"
    "{%- if loop.index0 > ns.last_query_index %}"
    "{{- '<|im_start|>assistant\n<think>\n' + reasoning_content.strip('\n') + '\n</think>\n\n'"
    " + content.lstrip('\n') }}"
    "{%- else %}{{- '<|im_start|>assistant\n' + content }}{%- endif %}"
    "{{- '<|im_end|>\n' }}{%- endif %}{%- endfor %}"
)

# Gemma-style: the system text goes before the first user text, the assistant is "model", contents trimmed.
GEMMA = (
    "{{ bos_token }}{%- if messages[0]['role'] == 'system' %}"
    "{%- set first_user_prefix = messages[0]['content'] + '\n\n' %}{%- set loop_messages = messages[1:] %}"
    "{%- else %}{%- set first_user_prefix = '' %}{%- set loop_messages = messages %}{%- endif %}"
    "{%- for message in loop_messages %}{%- if message['role'] == 'assistant' %}{%- set role = 'model' %}"
    "{%- else %}{%- set role = message['role'] %}{%- endif %}"
    "{{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else '') }}"
    "{{ message['content'] | trim }}{{ '<end_of_turn>\n' }}{%- endfor %}"
)
# DeepSeek-R1-style: history reasoning cut at </think>, full-width control tokens.
R1 = (
    "{{ bos_token }}{%- for m in messages %}{%- if m['role'] == 'system' %}{{ m['content'] }}"
    "{%- elif m['role'] == 'user' %}{{ '<｜User｜>' + m['content'] }}"
    "{%- elif m['role'] == 'assistant' %}{%- set content = m['content'] %}"
    "{%- if '</think>' in content %}{%- set content = content.split('</think>')[-1] %}{%- endif %}"
    "{{ '<｜Assistant｜>' + content + '<｜end▁of▁sentence｜>' }}{%- endif %}{%- endfor %}"
)
# Llama-2-style: system inside the first [INST] block, contents stripped, `' ' + answer + ' ' + eos`.
LLAMA2 = (
    "{%- if messages[0]['role'] == 'system' %}{%- set sys = '<<SYS>>\n' + messages[0]['content'].strip()"
    " + '\n<</SYS>>\n\n' %}{%- set loop_messages = messages[1:] %}{%- else %}{%- set sys = '' %}"
    "{%- set loop_messages = messages %}{%- endif %}{%- for m in loop_messages %}"
    "{%- if m['role'] == 'user' %}{{ bos_token + '[INST] ' + (sys if loop.first else '') + m['content'].strip()"
    " + ' [/INST]' }}{%- elif m['role'] == 'assistant' %}{{ ' ' + m['content'].strip() + ' ' + eos_token }}"
    "{%- endif %}{%- endfor %}"
)
FAMILY_SPECIALS = SPECIALS + ["<bos>", "<eos>", "<start_of_turn>", "<end_of_turn>", "<｜begin▁of▁sentence｜>",
                              "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>"]


def build_tokenizer_dir(path: Path, *, chat_template: str | None = None, bos: str = "<s>", eos: str = "</s>",
                        specials: list[str] = SPECIALS) -> Path:
    """Train a tiny byte-level BPE with the chat special tokens and save it as a transformers-loadable dir."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS * 4, trainer=trainer)
    path.mkdir(parents=True, exist_ok=True)
    tok.save(str(path / "tokenizer.json"))
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": bos, "eos_token": eos,
              "add_bos_token": False}
    if chat_template is not None:
        config["chat_template"] = chat_template
    (path / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return path


def hf_tokenizer(path: Path):
    """The transformers twin of a tokenizer directory (the oracle)."""
    from transformers import PreTrainedTokenizerFast

    config = json.loads((path / "tokenizer_config.json").read_text(encoding="utf-8"))
    return PreTrainedTokenizerFast(tokenizer_file=str(path / "tokenizer.json"), bos_token=config.get("bos_token"),
                                   eos_token=config.get("eos_token"))


def oracle_ids(hf, rendered, template_source: str) -> list[int]:
    return list(hf.apply_chat_template(rendered.messages, tools=rendered.tools, chat_template=template_source,
                                       tokenize=True, return_dict=False))


def trained_runs(ids: np.ndarray, mask: np.ndarray) -> list[list[int]]:
    """Contiguous runs of trained ids."""
    runs, current = [], []
    for i, m in zip(ids.tolist(), mask.tolist()):
        if m:
            current.append(i)
        elif current:
            runs.append(current)
            current = []
    if current:
        runs.append(current)
    return runs


def conv(*turns, cid="c1", tools=None, **first):
    """A Conversation dict from (role, content) pairs or message dicts."""
    messages = []
    for t in turns:
        m = dict(t) if isinstance(t, dict) else {"role": t[0], "content": t[1]}
        messages.append({"reasoning": None, "tool_calls": None, "name": None, "weight": None, **m})
    return {"id": cid, "messages": messages, "tools": tools, "source": "test", "meta": None}
