"""A real OpenAI-compatible server for the tests: ``transformers serve`` over a tiny model built here.

The model is a Llama with one layer whose attention and MLP outputs are zeroed, so each next token depends
only on the current one (a bigram table written into the embeddings and the output head): after any
prompt it answers exactly ``ANSWER`` and then its end-of-turn token. Randomly initialised otherwise, built
and saved locally: no download.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

ANSWER = "<think>add six and seven</think>So the answer is 13"


def build_model(out: Path, answer: str = ANSWER) -> Path:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<unk>", "<|im_start|>", "<|im_end|>", "<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([answer, "hello world user assistant"] * 20, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", eos_token="<|im_end|>",
                                   pad_token="<|endoftext|>")
    fast.add_tokens(["<think>", "</think>"])  # added, not special: they stay in decoded text
    fast.chat_template = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
                          "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    fast.save_pretrained(out)
    ids = fast(answer, add_special_tokens=False)["input_ids"]
    if len(set(ids)) != len(ids):
        raise ValueError(f"answer {answer!r} repeats a token: the bigram table needs distinct tokens")
    d = len(ids) + 2
    cfg = LlamaConfig(vocab_size=len(fast), hidden_size=d if d % 2 == 0 else d + 1, intermediate_size=8,
                      num_hidden_layers=1, num_attention_heads=1, num_key_value_heads=1, max_position_embeddings=4096,
                      eos_token_id=fast.eos_token_id, pad_token_id=fast.pad_token_id, tie_word_embeddings=False)
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg)
    h = cfg.hidden_size
    with torch.no_grad():
        layer = model.model.layers[0]
        layer.self_attn.o_proj.weight.zero_()
        layer.mlp.down_proj.weight.zero_()
        emb = torch.zeros(cfg.vocab_size, h)
        emb[:, 0] = 1.0  # state 0: any token not in the answer -> first answer token
        for i, t in enumerate(ids):
            emb[t] = 0.0
            emb[t, i + 1] = 1.0  # state i+1: after answer token i
        model.model.embed_tokens.weight.copy_(emb)
        head = torch.zeros(cfg.vocab_size, h)
        for i, t in enumerate(ids):
            head[t, i] = 50.0
        head[fast.eos_token_id, len(ids)] = 50.0
        model.lm_head.weight.copy_(head)
    model.generation_config.eos_token_id = fast.eos_token_id
    model.save_pretrained(out)
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve(model_dir: Path, *, timeout: float = 240.0):
    """Start ``transformers serve`` on a free local port; yield ``(url, process)``; stop it afterwards."""
    import httpx

    port = free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    log = open(model_dir.parent / f"serve-{port}.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "transformers.cli.transformers", "serve", str(model_dir),
                             "--host", "127.0.0.1", "--port", str(port)], stdout=log, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"transformers serve exited: {(model_dir.parent / f'serve-{port}.log').read_text()[-2000:]}")
            try:
                if httpx.get(f"{url}/v1/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("transformers serve did not start in time")
            time.sleep(0.5)
        yield url, proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
