"""Preference pairs: slots per pair and per-step time, packed prefix-shared rows against TRL-style padded pairs.

    python benchmarks/pref_pack.py [--resample 3000] [--batch 8] [--seq-len 2048] [--steps 6] [--no-write]

1. Data: ``llamafactory_dpo_en_demo.json`` (300 pairs, up to 13 turns) tokenized as TRL 1.x's DPOTrainer does:
   the prompt rendered with the generation prompt, prompt+chosen and prompt+rejected rendered whole, each
   completion the ids after the prompt (Mistral-7B-Instruct v0.3 tokenizer and chat template, from
   ``shared/data``). Pairs whose prompt+chosen+rejected exceed ``--seq-len`` are dropped (counted); the rest
   are resampled with replacement to ``--resample`` pairs (seed 0).
2. Slots: the pairs in batches of ``--batch``, collated by ``PaddedPairCollator`` (TRL's layout: 2 rows per
   pair, padded to the longest row of the batch) and by ``PackedPairCollator`` (prompt, chosen, rejected once
   per pair, rows of ``--seq-len``): token slots per pair, and the real tokens each layout computes.
3. Time per step: ``--steps`` batches through forward + backward of the DPO loss on a small random Llama
   (hidden 256, 4 layers, SDPA, fp32, CPU). Its vocabulary is 4,096 entries and ids are folded into it, so
   the LM head does not swamp a CPU; slots and tokens above are counted on the real ids. The DPO loss of
   every timed batch is computed on both paths against a second random model and compared.

Prints the tables and rewrites the "Preference pairs: packed prefix-shared rows vs padded" section of
BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
import transformers

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine, update_section  # noqa: E402
from tokenmill.loader.pairs import PackedPairCollator, PaddedPairCollator, dpo_loss, packed_logps, padded_logps

DATA = Path("/work/shared/data")
PAIRS_FILE = DATA / "sft" / "llamafactory_dpo_en_demo.json"
ROLES = {"human": "user", "gpt": "assistant", "system": "system", "observation": "user"}
FOLD = 4096
HEADING = "Preference pairs: packed prefix-shared rows vs padded"


def load_tokenizer():
    config = json.loads((DATA / "chat_templates" / "mistral-7b-instruct-v0.3_tokenizer_config.json").read_text())
    tok = transformers.PreTrainedTokenizerFast(
        tokenizer_file=str(DATA / "tokenizers" / "mistral-7b-instruct-v0.3_tokenizer.json"),
        bos_token=config["bos_token"], eos_token=config["eos_token"])
    tok.chat_template = config["chat_template"]
    return tok


def render(tok, messages, **kw) -> list[int]:
    return list(tok.apply_chat_template(messages, tokenize=True, **kw)["input_ids"])


def tokenize_pairs(tok, records) -> tuple[list[dict], int]:
    """TRL-equivalent pair dicts; (pairs, records whose prompt is not a prefix of prompt+completion)."""
    pairs, mismatched = [], 0
    for i, rec in enumerate(records):
        prompt = [{"role": ROLES[m["from"]], "content": m["value"]} for m in rec["conversations"]]
        prompt_ids = render(tok, prompt, add_generation_prompt=True)
        pair = {"pair_id": i, "prompt_ids": np.array(prompt_ids, np.int32)}
        for side in ("chosen", "rejected"):
            full = render(tok, prompt + [{"role": "assistant", "content": rec[side]["value"]}])
            mismatched += full[:len(prompt_ids)] != prompt_ids
            ids = np.array(full[len(prompt_ids):], np.int32)
            pair[f"{side}_ids"], pair[f"{side}_mask"] = ids, np.ones(ids.size, np.uint8)
        pairs.append(pair)
    return pairs, mismatched


def length(p: dict) -> int:
    return p["prompt_ids"].size + p["chosen_ids"].size + p["rejected_ids"].size


def resample(pairs: list[dict], n: int, seq_len: int) -> tuple[list[dict], int]:
    fitting = [p for p in pairs if 0 < p["chosen_ids"].size and 0 < p["rejected_ids"].size and length(p) <= seq_len]
    picks = np.random.default_rng(0).integers(0, len(fitting), n)
    return [{**fitting[int(j)], "pair_id": k} for k, j in enumerate(picks)], len(pairs) - len(fitting)


def count_slots(pairs, batch: int, seq_len: int) -> dict:
    padded, packed = PaddedPairCollator(pad_id=0), PackedPairCollator(pad_id=0, seq_len=seq_len, mask="bool")
    padded_slots = padded_real = rows = 0
    for start in range(0, len(pairs), batch):
        b = padded(pairs[start:start + batch])
        padded_slots += b["input_ids"].numel()
        padded_real += int(b["attention_mask"].sum())
        rows += packed(pairs[start:start + batch])["input_ids"].shape[0]
    n = len(pairs)
    return {"padded_slots": padded_slots / n, "padded_real": padded_real / n, "packed_slots": packed.slots / n,
            "packed_real": packed.tokens / n, "rows_per_batch": rows / -(-n // batch)}


def tiny_llama(seed: int):
    torch.manual_seed(seed)
    config = transformers.LlamaConfig(vocab_size=FOLD, hidden_size=256, intermediate_size=688, num_hidden_layers=4,
                                      num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=8192,
                                      attn_implementation="sdpa", use_cache=False)
    return transformers.LlamaForCausalLM(config)


def fold(p: dict) -> dict:
    return {**p, **{k: np.asarray(p[k]) % FOLD for k in ("prompt_ids", "chosen_ids", "rejected_ids")}}


def step(policy, reference, logps, batch, inputs) -> tuple[float, float]:
    """(seconds for forward + backward of the DPO loss, the loss)."""
    with torch.no_grad():
        ref = logps(reference(**inputs).logits, batch)
    start = time.perf_counter()
    chosen, rejected = logps(policy(**inputs).logits, batch)
    loss = dpo_loss(chosen, rejected, *ref)
    loss.backward()
    seconds = time.perf_counter() - start
    policy.zero_grad()
    return seconds, loss.item()


def time_paths(pairs, batch: int, seq_len: int, steps: int) -> dict:
    policy, reference = tiny_llama(0), tiny_llama(1)
    padded, packed = PaddedPairCollator(pad_id=0), PackedPairCollator(pad_id=0, seq_len=seq_len, mask="additive")
    out = {"padded_s": 0.0, "packed_s": 0.0, "loss_diff": 0.0, "pairs": 0}
    for k in range(steps):
        chunk = [fold(p) for p in pairs[k * batch:(k + 1) * batch]]
        pb, kb = padded(chunk), packed(chunk)
        t_pad, loss_pad = step(policy, reference, padded_logps, pb,
                               {"input_ids": pb["input_ids"], "attention_mask": pb["attention_mask"]})
        t_pack, loss_pack = step(policy, reference, packed_logps, kb,
                                 {k: kb[k] for k in ("input_ids", "position_ids", "attention_mask")})
        out["padded_s"] += t_pad
        out["packed_s"] += t_pack
        out["loss_diff"] = max(out["loss_diff"], abs(loss_pad - loss_pack))
        out["pairs"] += len(chunk)
    return out


def report(args, slots, timing, dropped, mismatched, n_source) -> str:
    per_step = lambda s: s / args.steps  # noqa: E731
    return f"""Measured by `benchmarks/pref_pack.py` on {machine()}, torch {torch.__version__}.
{n_source} pairs of `llamafactory_dpo_en_demo.json` tokenized as TRL's DPOTrainer does (Mistral-7B-Instruct v0.3
template; the prompt alone is not a prefix of prompt+completion in {mismatched} of {2 * n_source} renders),
{dropped} longer than {args.seq_len} tokens dropped, resampled to {args.resample} pairs; batches of {args.batch}
pairs; packed rows of {args.seq_len} tokens.

| per pair | TRL-style padded (2 rows, pad to longest) | packed, prompt once |
|---|---:|---:|
| token slots | {slots['padded_slots']:,.0f} | {slots['packed_slots']:,.0f} |
| real tokens computed | {slots['padded_real']:,.0f} | {slots['packed_real']:,.0f} |
| slots saved | | {1 - slots['packed_slots'] / slots['padded_slots']:.1%} |

Rows per batch, packed: {slots['rows_per_batch']:.2f} (padded: {2 * args.batch}).

Forward + backward of the DPO loss, small random Llama (hidden 256, 4 layers, SDPA, fp32, CPU, ids folded into
{FOLD:,} entries), {args.steps} batches of {args.batch} pairs:

| | padded | packed |
|---|---:|---:|
| seconds per step | {per_step(timing['padded_s']):.2f} | {per_step(timing['packed_s']):.2f} |
| pairs per second | {timing['pairs'] / timing['padded_s']:.3f} | {timing['pairs'] / timing['packed_s']:.3f} |

Speed-up {timing['padded_s'] / timing['packed_s']:.2f}x; the DPO loss of the two paths differs by at most
{timing['loss_diff']:.1e} over these batches. The packed rows carry a dense `seq_len^2` additive mask here;
a GPU run would use FlexAttention's BlockMask (`mask="flex"`) instead.
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--resample", type=int, default=3000)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq-len", type=int, default=2048)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    records = json.loads(PAIRS_FILE.read_text())
    pairs, mismatched = tokenize_pairs(load_tokenizer(), records)
    sample, dropped = resample(pairs, args.resample, args.seq_len)
    slots = count_slots(sample, args.batch, args.seq_len)
    timing = time_paths(sample, args.batch, args.seq_len, args.steps)
    text = report(args, slots, timing, dropped, mismatched, len(records))
    print(text)
    if not args.no_write:
        update_section(HEADING, text)


if __name__ == "__main__":
    main()
