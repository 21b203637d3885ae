"""The synthetic-data client against a local OpenAI-compatible server: requests/s and generated tokens/s
at concurrency 1, 8 and 32, beside a naive sequential loop with the ``openai`` client, on the same
requests; the overhead tokenmill adds per request.

The server is ``transformers serve`` over the tiny local model of the tests (``tests/synth/tinyserver.py``),
so the numbers measure the client and the protocol, not a model. Pass ``--server URL --model NAME`` to
measure a real server (vLLM, SGLang, ...) instead.

    python benchmarks/synth_client.py [--requests 64] [--server URL --model NAME]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests" / "synth"))

from tokenmill.synth.client import Client, Generation  # noqa: E402


def requests(n: int) -> list:
    return [([{"role": "user", "content": f"Rewrite document {i}: the river runs past the mill."}], 0) for i in range(n)]


def naive(server: str, model: str, reqs: list, max_tokens: int) -> tuple[float, int]:
    from openai import OpenAI

    client = OpenAI(base_url=f"{server}/v1", api_key="none")
    t0, tokens = time.perf_counter(), 0
    for messages, _ in reqs:
        r = client.chat.completions.create(model=model, messages=messages, max_tokens=max_tokens, temperature=0.7, seed=0)
        tokens += r.usage.completion_tokens if r.usage else 0
    return time.perf_counter() - t0, tokens


def ours(server: str, model: str, reqs: list, max_tokens: int, concurrency: int) -> tuple[float, int]:
    with tempfile.TemporaryDirectory() as cache:
        c = Client(server, model, Generation(max_tokens=max_tokens), concurrency=concurrency, cache_dir=Path(cache))
        t0 = time.perf_counter()
        asyncio.run(c.complete_many(reqs))
        return time.perf_counter() - t0, c.usage.completion_tokens


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--server")
    ap.add_argument("--model")
    args = ap.parse_args()
    reqs = requests(args.requests)
    if args.server:
        run(args.server, args.model, reqs, args.max_tokens)
        return
    import tinyserver

    with tempfile.TemporaryDirectory() as tmp:
        model = tinyserver.build_model(Path(tmp) / "model")
        with tinyserver.serve(model) as (url, _):
            run(url, str(model), reqs, args.max_tokens)


def run(server: str, model: str, reqs: list, max_tokens: int) -> None:
    ours(server, model, reqs[:4], max_tokens, 4)  # warm the server
    rows = [("naive sequential loop (openai client)", *naive(server, model, reqs, max_tokens))]
    for c in (1, 8, 32):
        rows.append((f"tokenmill client, concurrency {c}", *ours(server, model, reqs, max_tokens, c)))
    base = rows[0][1]
    print(f"{len(reqs)} requests, max_tokens {max_tokens}, server {server}\n")
    print("| client | seconds | requests/s | generated tokens/s | vs naive |")
    print("|---|---:|---:|---:|---:|")
    for name, secs, tokens in rows:
        print(f"| {name} | {secs:.2f} | {len(reqs) / secs:.1f} | {tokens / secs:,.0f} | {base / secs:.2f}x |")
    seq = rows[1][1]
    print(f"\nper-request overhead of the tokenmill client at concurrency 1 vs the naive loop: "
          f"{(seq - base) / len(reqs) * 1000:+.1f} ms")
    print(json.dumps({n: round(s, 3) for n, s, _ in rows}))


if __name__ == "__main__":
    main()
