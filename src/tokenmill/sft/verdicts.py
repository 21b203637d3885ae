"""Cached parity verdicts of the SFT track: which example shapes already matched ``apply_chat_template``.

Checking examples against ``transformers`` costs each worker its reference (the ``transformers`` import and
a tokenizer build: about 2.3 s of CPU for a 150k-token vocabulary) before its first check, which at 10,000
conversations and 2 workers is a third of a run. Like the pretraining track's parity verdict
(:mod:`tokenmill.tokenize.parity`), the outcome is cached under ``$TOKENMILL_CACHE/parity-sft/``, one small
file per *shape* (see :mod:`tokenmill.sft.parity`), keyed by everything that decides the written ids: the
tokenizer's fingerprint, the chat template's digest, the rendering options, a digest of tokenmill's own
rendering and tokenizing code, and the transformers, gigatoken and Jinja versions. A shape with at least one
cached passing example when a run starts is trusted (as the pretraining verdict is trusted once computed):
its examples are not checked again, and a worker none of whose examples needs a check never builds the
reference. A new shape, or any change of tokenizer, template, options, code or versions, is checked as
before; a first run checks exactly what it checked before verdicts were cached.

Only units without a real difference write verdicts, so a run that found one never vouches for its shapes.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from tokenmill.tokenize.sources import cache_dir

if TYPE_CHECKING:
    from tokenmill.sft.options import SftOptions
    from tokenmill.sft.template import ChatTemplate
    from tokenmill.tokenize.tokenizer import Tokenizer

CHECK_VERSION = 1  # bump when the check or the shapes change, so older verdicts are not trusted
NOT_KEYED = ("verify", "on_mismatch", "on_unsafe", "chat_template", "seq_len")  # what changes the checks, the
# report (seq_len) or is keyed by its digest (the template), not the ids written


def run_key(tokenizer: Tokenizer, template: ChatTemplate, options: SftOptions, *, reference: str | None = "transformers") -> str:
    """What decides the ids of every example of a run (not its shape), and which reference vouched for them
    (a verdict of the plain reference does not vouch for a run that has transformers): see the module
    docstring."""
    rendering = {k: v for k, v in sorted(vars(options).items()) if k not in NOT_KEYED}
    # the fingerprint decides the ids of a text; the special tokens the template writes ({{ bos_token }}) come from
    # the tokenizer's config, which two tokenizers with one vocabulary may set apart
    parts = [str(CHECK_VERSION), tokenizer.fingerprint, str(tokenizer.bos_token), str(tokenizer.eos_token),
             template.digest, json.dumps(rendering, default=str),
             _code_digest(), *(_version(p) for p in ("transformers", "gigatoken", "jinja2"))]
    if reference != "transformers":
        parts.append(str(reference))
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def _code_digest() -> str:
    """sha256 of the code that renders, tokenizes and masks (this package and tokenmill.tokenize): an edited
    renderer is checked again, whatever the version number says."""
    here = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for path in sorted([*here.glob("*.py"), *here.glob("*.jinja"), *(here.parent / "tokenize").glob("*.py")]):
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def _version(package: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return "none"


def _dir(key: str) -> Path:
    return cache_dir() / "parity-sft" / key


def _path(key: str, shape: frozenset[str]) -> Path:
    return _dir(key) / (hashlib.sha256(",".join(sorted(shape)).encode()).hexdigest()[:32] + ".json")


def _read(path: Path) -> dict:
    try:
        verdict = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return {}
    return verdict if isinstance(verdict, dict) else {}


def trusted(key: str) -> frozenset[frozenset[str]]:
    """The shapes with at least one cached passing example under ``key``, read once, when a run starts: what
    the run's own units record is trusted from the next run on, so which examples a run checks never depends
    on the order its units finish in."""
    try:
        paths = list(_dir(key).glob("*.json"))
    except OSError:
        return frozenset()
    shapes = set()
    for path in paths:
        verdict = _read(path)
        if int(verdict.get("passed") or 0) > 0 and isinstance(verdict.get("shape"), list):
            shapes.add(frozenset(str(flag) for flag in verdict["shape"]))
    return frozenset(shapes)


def record(key: str, counts: Iterable[tuple[frozenset[str], int]]) -> None:
    """Add the passing examples of each shape to its cached verdict (a read-only cache only costs checks)."""
    for shape, n in counts:
        if n <= 0:
            continue
        path = _path(key, shape)
        total = int(_read(path).get("passed") or 0) + n
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps({"passed": total, "shape": sorted(shape)}))
            os.replace(tmp, path)
        except OSError:
            return
