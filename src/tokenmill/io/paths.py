"""Resolve what the user named (files, directories, globs, fsspec URLs) into a sorted list of InputFile.

``rel`` is the path below the input root: the directory itself for a directory, the part before the first
wildcard for a glob, the base name for a single file. Walks skip hidden names and names starting with
``_`` (tokenmill's own outputs, ``_SUCCESS`` markers). A directory written by ``datasets`` ``save_to_disk``
is one input of format ``hf_dataset``, never walked into.
"""

from __future__ import annotations

import posixpath

from tokenmill.errors import ConfigError, InputError
from tokenmill.io.base import TEXT_MODES, InputFile
from tokenmill.io.formats import detect_format, filesystem, is_hf_dataset, is_url

GLOB_CHARS = ("*", "?", "[")
SKIPPED_FILES = ("dataset_dict.json",)  # the index of a saved DatasetDict; its splits are read instead


def expand_inputs(paths: list[str] | str, *, text_mode: str = "auto") -> list[InputFile]:
    """Every input file named by ``paths``, in the given order, each input's files sorted by ``rel``."""
    check_text_mode(text_mode)
    if isinstance(paths, str):
        paths = [paths]
    if not paths:
        raise InputError("no input paths given; name at least one file, directory, glob or URL")
    files: list[InputFile] = []
    seen: set[str] = set()
    for given in paths:
        for f in _expand_one(str(given), text_mode):
            if f.path not in seen:
                seen.add(f.path)
                files.append(f)
    return files


def check_text_mode(text_mode: str) -> None:
    if text_mode not in TEXT_MODES:
        raise ConfigError(f"text_mode {text_mode!r} is not one of {', '.join(TEXT_MODES)}")


def _expand_one(given: str, text_mode: str) -> list[InputFile]:
    fs, path = filesystem(given)
    if any(c in path for c in GLOB_CHARS):
        found = _expand_glob(fs, path, given)
    elif not fs.exists(path):
        raise InputError(f"input {given!r} does not exist; check the path (and quote globs in a shell)")
    elif fs.isdir(path) and not is_hf_dataset(fs, path):
        found = [(p, posixpath.relpath(p, path)) for p in _walk(fs, path)]
        if not found:
            raise InputError(f"directory {given!r} holds no input files (hidden and _-prefixed names are skipped)")
    else:
        found = [(path, posixpath.basename(path.rstrip("/")))]
    found.sort(key=lambda pr: pr[1])
    return [_input_file(fs, p, rel, given, text_mode) for p, rel in found]


def _expand_glob(fs, pattern: str, given: str) -> list[tuple[str, str]]:
    root = _glob_root(pattern)
    found: dict[str, str] = {}
    for match in sorted(fs.glob(pattern)):
        rel = posixpath.relpath(match, root)
        if rel == "." or _hidden(rel):
            continue
        if fs.isdir(match) and not is_hf_dataset(fs, match):
            for p in _walk(fs, match):
                found.setdefault(p, posixpath.relpath(p, root))
        else:
            found.setdefault(match, rel)
    if not found:
        raise InputError(f"glob {given!r} matches no input files; check the pattern and quote it in a shell")
    return list(found.items())


def _glob_root(pattern: str) -> str:
    """The directory part of ``pattern`` before its first wildcard component."""
    parts = pattern.split("/")
    for i, part in enumerate(parts):
        if any(c in part for c in GLOB_CHARS):
            return "/".join(parts[:i]) or "/"
    return posixpath.dirname(pattern)


def _hidden(rel: str) -> bool:
    return any(part.startswith((".", "_")) for part in rel.split("/"))


def _walk(fs, directory: str) -> list[str]:
    """Files (and saved-dataset directories) below ``directory``, skipping hidden and _-prefixed names."""
    out: list[str] = []
    for entry in sorted(fs.ls(directory, detail=True), key=lambda e: e["name"]):
        name = entry["name"].rstrip("/")
        base = posixpath.basename(name)
        if base.startswith((".", "_")) or base in SKIPPED_FILES or name == directory.rstrip("/"):
            continue
        if entry["type"] == "directory" or fs.isdir(name):
            out.extend([name] if is_hf_dataset(fs, name) else _walk(fs, name))
        else:
            out.append(name)
    return out


def _input_file(fs, path: str, rel: str, given: str, text_mode: str) -> InputFile:
    full = fs.unstrip_protocol(path) if is_url(given) else path
    fmt, compression = detect_format(full, text_mode=text_mode)
    size = 0 if fmt == "hf_dataset" else int(fs.size(path) or 0)
    return InputFile(path=full, rel=rel, format=fmt, size=size, compression=compression)
