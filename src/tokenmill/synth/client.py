"""A client for OpenAI-compatible chat servers (vLLM, SGLang, llama.cpp, ``transformers serve``, hosted
APIs), fit for corpus scale.

* **Bounded concurrency**: at most ``concurrency`` requests in flight (one ``asyncio`` semaphore).
* **Retries**: 429, 5xx, timeouts and dropped connections are retried with exponential backoff and
  jitter (``retries`` times, from ``backoff`` seconds, doubling, capped at 30 s); other 4xx are not.
* **A clear error, never a hang**: :meth:`Client.check` asks ``/v1/models`` first and raises
  :class:`~tokenmill.errors.ServerError` when the server cannot be reached or does not list the model;
  a server that stops answering mid-run raises the same error once its retries are spent.
* **A disk cache shared across runs**: every response is stored under ``cache_dir`` by the hash of
  (model, messages, generation parameters, sample index) — not the server's address, so the same
  request to a restarted server or from another output directory costs nothing.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokenmill._extras import require
from tokenmill.errors import ConfigError, ServerError

RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


def default_cache_dir() -> Path:
    """``$TOKENMILL_CACHE/synth``, else ``$XDG_CACHE_HOME/tokenmill/synth``, else ``~/.cache/tokenmill/synth``."""
    if os.environ.get("TOKENMILL_CACHE"):
        return Path(os.environ["TOKENMILL_CACHE"]) / "synth"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tokenmill" / "synth"


@dataclass(frozen=True)
class Generation:
    """Generation parameters sent with every request (and part of the cache key)."""

    max_tokens: int = 1024
    temperature: float = 0.7
    top_p: float = 1.0
    seed: int | None = 0

    def body(self) -> dict[str, Any]:
        out: dict[str, Any] = {"max_tokens": self.max_tokens, "temperature": self.temperature, "top_p": self.top_p}
        if self.seed is not None:
            out["seed"] = self.seed
        return out


@dataclass
class Reply:
    """One completion: its text, its reasoning (``reasoning_content`` when the server sends one), why it
    stopped, the tokens it cost, and whether it came from the cache."""

    content: str
    reasoning: str | None
    finish_reason: str | None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached: bool = False


def settings_problems(*, retries: Any, timeout: Any, concurrency: Any, cache_dir: Path | None) -> list[str]:
    """What is wrong with a client's numbers and cache directory (empty when nothing is), named as the flags."""
    problems = []
    if not isinstance(retries, int) or retries < 0:
        problems.append(f"--retries: expected a whole number >= 0, got {retries!r}")
    if not isinstance(timeout, (int, float)) or not timeout > 0:
        problems.append(f"--timeout: expected a number of seconds > 0, got {timeout!r}")
    if not isinstance(concurrency, int) or concurrency < 1:
        problems.append(f"--concurrency: expected a whole number >= 1, got {concurrency!r}")
    if cache_dir is not None:
        problems += _cache_dir_problems(Path(cache_dir))
    return problems


def _cache_dir_problems(path: Path) -> list[str]:
    """The cache directory, or its nearest existing ancestor, must be a directory."""
    for p in (path, *path.parents):
        if p.exists():
            return [] if p.is_dir() else [f"--cache-dir {str(path)!r}: {str(p)!r} is not a directory; give a directory "
                                          "(it is created when missing)"]
    return []


@dataclass
class Usage:
    requests: int = 0
    cached: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0

    def add(self, reply: Reply) -> None:
        self.requests += 1
        self.cached += reply.cached
        if not reply.cached:
            self.prompt_tokens += reply.prompt_tokens
            self.completion_tokens += reply.completion_tokens

    def to_dict(self) -> dict[str, Any]:
        return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in self.__dict__.items()}


class MalformedReply(Exception):
    """The server answered 200 with a body that is not a chat completion."""


@dataclass
class Client:
    server: str
    model: str
    generation: Generation = field(default_factory=Generation)
    concurrency: int = 8
    retries: int = 5
    backoff: float = 0.5
    timeout: float = 300.0
    cache_dir: Path | None = None
    api_key: str | None = None
    usage: Usage = field(default_factory=Usage)

    def __post_init__(self) -> None:
        self.server = self.server.rstrip("/")
        if self.server.endswith("/v1"):
            self.server = self.server[: -len("/v1")]
        self.cache_dir = Path(self.cache_dir) if self.cache_dir else default_cache_dir()
        problems = settings_problems(retries=self.retries, timeout=self.timeout, concurrency=self.concurrency,
                                     cache_dir=self.cache_dir)
        if problems:
            raise ConfigError(problems)
        self.api_key = self.api_key or os.environ.get("OPENAI_API_KEY")

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def check(self) -> None:
        """Fail fast, with a message, when the server is unreachable or does not serve ``model``."""
        httpx = require("httpx", "synth", "talk to an inference server")
        url = f"{self.server}/v1/models"
        try:
            resp = httpx.get(url, headers=self._headers(), timeout=min(self.timeout, 30.0))
        except httpx.HTTPError as exc:
            raise ServerError(f"cannot reach the inference server at {self.server} ({type(exc).__name__}: {exc}); "
                              "start it first (e.g. `vllm serve MODEL` or `transformers serve MODEL`), or fix --server") from exc
        if resp.status_code != 200:
            raise ServerError(f"{url} answered HTTP {resp.status_code}: {resp.text[:200]}")
        try:
            ids = [m["id"] for m in resp.json().get("data", [])]
        except (ValueError, TypeError, KeyError) as exc:
            raise ServerError(f"{url} did not answer with a model list: {resp.text[:200]}") from exc
        if ids and self.model not in ids:
            raise ServerError(f"the server at {self.server} does not serve model {self.model!r}; it serves: "
                              f"{', '.join(ids)} (pass one of them to --model)")

    def key(self, messages: list[dict], sample: int = 0) -> str:
        doc = {"model": self.model, "messages": messages, "params": self.generation.body(), "sample": sample}
        return hashlib.sha256(json.dumps(doc, sort_keys=True, ensure_ascii=False).encode()).hexdigest()

    def _cache_path(self, key: str) -> Path:
        return (self.cache_dir or default_cache_dir()) / key[:2] / f"{key}.json"  # set in __post_init__

    def cached(self, key: str) -> Reply | None:
        try:
            d = json.loads(self._cache_path(key).read_text())
        except (OSError, ValueError):
            return None
        return Reply(d["content"], d.get("reasoning"), d.get("finish_reason"), d.get("prompt_tokens", 0),
                     d.get("completion_tokens", 0), cached=True)

    def _store(self, key: str, reply: Reply) -> None:
        path = self._cache_path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({k: v for k, v in reply.__dict__.items() if k != "cached"}))
        os.replace(tmp, path)

    async def complete_many(self, requests: list[tuple[list[dict], int]]) -> list[Reply | Exception]:
        """Replies in request order; a request that failed for good gives its exception (never raised),
        except an unreachable server, which raises :class:`ServerError` for the whole batch."""
        httpx = require("httpx", "synth", "talk to an inference server")
        sem = asyncio.Semaphore(max(1, self.concurrency))
        limits = httpx.Limits(max_connections=max(1, self.concurrency))
        async with httpx.AsyncClient(timeout=self.timeout, limits=limits, headers=self._headers()) as http:
            async def one(messages: list[dict], sample: int) -> Reply | Exception:
                key = self.key(messages, sample)
                hit = self.cached(key)
                if hit is not None:
                    self.usage.add(hit)
                    return hit
                async with sem:
                    try:
                        reply = await self._post(http, messages, sample)
                    except MalformedReply as exc:
                        return exc
                self._store(key, reply)
                self.usage.add(reply)
                return reply

            return list(await asyncio.gather(*(one(m, s) for m, s in requests)))

    async def _post(self, http: Any, messages: list[dict], sample: int) -> Reply:
        import httpx

        body = {"model": self.model, "messages": messages, **self.generation.body()}
        if sample and "seed" in body:
            body["seed"] = body["seed"] + sample
        delay = self.backoff
        for attempt in range(self.retries + 1):
            try:
                resp = await http.post(f"{self.server}/v1/chat/completions", json=body)
            except (httpx.TimeoutException, httpx.TransportError) as exc:
                if attempt == self.retries:
                    raise ServerError(f"the inference server at {self.server} stopped answering ({type(exc).__name__}) "
                                      f"after {self.retries + 1} attempts; finished units are kept: run the same "
                                      "command again to resume") from exc
            else:
                if resp.status_code == 200:
                    return parse_reply(resp)
                if resp.status_code not in RETRY_STATUS or attempt == self.retries:
                    if resp.status_code in RETRY_STATUS:
                        raise ServerError(f"{self.server} answered HTTP {resp.status_code} {self.retries + 1} times: "
                                          f"{resp.text[:200]}")
                    raise MalformedReply(f"HTTP {resp.status_code}: {resp.text[:200]}")
            self.usage.retries += 1
            await asyncio.sleep(min(30.0, delay) * (0.5 + random.random()))
            delay *= 2
        raise AssertionError("unreachable")  # the loop returns or raises


def parse_reply(resp: Any) -> Reply:
    try:
        d = resp.json()
        choice = d["choices"][0]
        msg = choice.get("message") or {}
        content = msg.get("content")
        if content is not None and not isinstance(content, str):
            raise TypeError("content is not a string")
        usage = d.get("usage") or {}
        reasoning = msg.get("reasoning_content") or msg.get("reasoning")
        return Reply(content or "", reasoning if isinstance(reasoning, str) else None, choice.get("finish_reason"),
                     int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0))
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
        raise MalformedReply(f"not a chat completion ({exc}): {resp.text[:200]}") from exc
