"""Resolve what the user named (files, directories, globs, fsspec URLs) into a sorted list of InputFile.

``rel`` is the path below the input root: the directory itself for a directory, the part before the first
wildcard for a glob, the base name for a single file. A path that exists is taken literally even when it
holds glob characters (a file named ``[1].jsonl``). A directory written by ``datasets`` ``save_to_disk``
is one input of format ``hf_dataset``, never walked into.

Walks skip, and ``expand_inputs_report`` lists with the reason (the manifest's ``skipped_inputs``):
hidden names and names starting with ``_`` (``_SUCCESS`` markers), directories that are tokenmill outputs
(they hold ``_state/<stage>/run.json``: a run never reads shards back as input), named pipes, sockets and devices
(reading one could block forever), dangling symbolic links and symbolic link loops, and a directory reached
a second time through a symbolic link (``sub/loop -> ..``: each directory is walked once, by its real path).
A file that exists but cannot be read is an error, never a silent skip. Non-UTF-8 file names are kept for opening the file; their
``rel`` (used in record ids and rejects) shows the undecodable bytes as ``\\xNN``.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import stat
from collections.abc import Iterator

from tokenmill.errors import ConfigError, InputError, TokenmillError
from tokenmill.io.base import TEXT_MODES, InputFile
from tokenmill.io.formats import detect_format, filesystem, is_hf_dataset, is_url

GLOB_CHARS = ("*", "?", "[")
SKIPPED_FILES = ("dataset_dict.json",)  # the index of a saved DatasetDict; its splits are read instead


def expand_inputs(paths: list[str] | str, *, text_mode: str = "auto") -> list[InputFile]:
    """Every input file named by ``paths``, in the given order, each input's files sorted by ``rel``."""
    return expand_inputs_report(paths, text_mode=text_mode)[0]


def expand_inputs_report(paths: list[str] | str, *, text_mode: str = "auto") -> tuple[list[InputFile], list[dict]]:
    """``expand_inputs`` and the entries its walks skipped: ``{"path", "reason"}`` each, in walk order."""
    check_text_mode(text_mode)
    if isinstance(paths, str):
        paths = [paths]
    if not paths:
        raise InputError("no input paths given; name at least one file, directory, glob or URL")
    files: list[InputFile] = []
    skipped: list[dict] = []
    seen: set[str] = set()
    for given in paths:
        with _remote_errors(str(given)):
            found = _expand_one(str(given), text_mode, skipped)
        for f in found:
            if f.path not in seen:
                seen.add(f.path)
                files.append(f)
    return files, skipped


@contextlib.contextmanager
def _remote_errors(given: str) -> Iterator[None]:
    """An object-storage input that cannot be listed (no credentials, no endpoint, no network) is one
    ``InputError`` naming the input and the cause, not the storage library's traceback."""
    try:
        yield
    except TokenmillError:
        raise
    except Exception as exc:
        if not is_url(given):
            raise
        raise InputError(f"input {given!r} cannot be listed or read: {type(exc).__name__}: {exc}; check the "
                         "credentials (e.g. AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE), the "
                         "endpoint (AWS_ENDPOINT_URL) and the network") from exc


def check_text_mode(text_mode: str) -> None:
    if text_mode not in TEXT_MODES:
        raise ConfigError(f"text_mode {text_mode!r} is not one of {', '.join(TEXT_MODES)}")


def _expand_one(given: str, text_mode: str, skipped: list[dict]) -> list[InputFile]:
    fs, path = filesystem(given)
    if any(c in path for c in GLOB_CHARS) and not fs.exists(path):  # an existing name is literal: "[1].jsonl"
        found = _expand_glob(fs, path, given, skipped)
    elif not fs.exists(path):
        why = " (a dangling symbolic link)" if _is_local(fs) and os.path.islink(path) else ""
        raise InputError(f"input {given!r} does not exist{why}; check the path (and quote globs in a shell)")
    elif fs.isdir(path) and not is_hf_dataset(fs, path):
        found = [(p, posixpath.relpath(p, path)) for p in _walk(fs, path, skipped)]
        if not found:
            raise InputError(f"directory {given!r} holds no input files (hidden and _-prefixed names, tokenmill "
                             "outputs and files that are not regular files are skipped)")
    else:
        reason = _not_regular(fs, path)
        if reason:
            raise InputError(f"input {given!r} is {reason}, not a regular file: tokenmill reads files, directories "
                             "and globs (reading a pipe or a device could block forever)")
        found = [(path, posixpath.basename(path.rstrip("/")))]
    found.sort(key=lambda pr: pr[1])
    return [_input_file(fs, p, rel, given, text_mode) for p, rel in found]


def _expand_glob(fs, pattern: str, given: str, skipped: list[dict]) -> list[tuple[str, str]]:
    root = _glob_root(pattern)
    found: dict[str, str] = {}
    for match in sorted(fs.glob(pattern)):
        rel = posixpath.relpath(match, root)
        if rel == ".":
            continue
        if _hidden(rel):
            skipped.append({"path": _shown(match), "reason": "hidden_or_underscore"})
            continue
        if fs.isdir(match) and not is_hf_dataset(fs, match):
            for p in _walk(fs, match, skipped):
                found.setdefault(p, posixpath.relpath(p, root))
        elif reason := _not_regular(fs, match):
            skipped.append({"path": _shown(match), "reason": reason.replace(" ", "_")})
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


def _tokenmill_output(directory: str) -> bool:
    """A directory a tokenmill run wrote (``_state/<stage>/run.json``, or the older ``_state/run.json``)."""
    import glob

    state = os.path.join(directory, "_state")
    return os.path.isfile(os.path.join(state, "run.json")) or bool(glob.glob(os.path.join(glob.escape(state), "*", "run.json")))


def _hidden(rel: str) -> bool:
    return any(part.startswith((".", "_")) for part in rel.split("/"))


def _walk(fs, directory: str, skipped: list[dict], walked: set[str] | None = None) -> list[str]:
    """Files (and saved-dataset directories) below ``directory``, depth first in name order; what is
    skipped goes to ``skipped``.

    Each local directory is walked once, by its real path: a symbolic link back to a directory being
    walked (``sub/loop -> ..``) is skipped as ``symlink_cycle``, a second way into a directory already
    walked as ``directory_already_walked`` (its files would be read twice). The walk keeps its own stack
    of open directories, so a tree nested deeper than Python's recursion limit is walked like any other;
    a child's real path is its parent's plus its name unless it is a link (``os.path.realpath`` of every
    directory costs a ``lstat`` per level: cubic in the depth, minutes at 1,500 levels)."""
    walked = set() if walked is None else walked
    local = _is_local(fs)
    out: list[str] = []
    stack = [_listing(fs, directory, os.path.realpath(directory) if local else "", walked)]
    while stack:
        step = next(stack[-1], None)
        if step is None:
            stack.pop()
            continue
        here, entry = step
        name = entry["name"].rstrip("/")
        reason = _skip_reason(fs, name, posixpath.basename(name), entry)
        real = _real_child(here, name) if local and not reason and os.path.isdir(name) else ""
        if real and real in walked:
            reason = "symlink_cycle" if here == real or here.startswith(real.rstrip("/") + "/") else "directory_already_walked"
        if reason:
            skipped.append({"path": _shown(name), "reason": reason})
        elif entry["type"] == "directory" or fs.isdir(name):
            if is_hf_dataset(fs, name):
                out.append(name)
            else:
                stack.append(_listing(fs, name, real, walked))
        else:
            out.append(name)
    return out


def _listing(fs, directory: str, real: str, walked: set[str]) -> Iterator[tuple[str, dict]]:
    """``(real path of directory, entry)`` for each entry of ``directory`` in name order; the directory
    counts as walked from the moment its listing is first read."""
    if real:
        walked.add(real)
    for entry in sorted(fs.ls(directory, detail=True), key=lambda e: e["name"]):
        name = entry["name"].rstrip("/")
        if name != directory.rstrip("/") and posixpath.basename(name) not in SKIPPED_FILES:
            yield real, entry


def _real_child(parent_real: str, name: str) -> str:
    """The real path of directory ``name`` whose parent's real path is ``parent_real``."""
    return os.path.realpath(name) if os.path.islink(name) else os.path.join(parent_real, posixpath.basename(name))


def _skip_reason(fs, name: str, base: str, entry: dict) -> str:
    if base.startswith((".", "_")):
        return "hidden_or_underscore"
    if _is_local(fs):
        try:
            mode = os.stat(name).st_mode
        except OSError as exc:
            return "symlink_loop" if exc.errno == 40 else "dangling_symlink" if os.path.islink(name) else "unreadable"
        if stat.S_ISDIR(mode):
            return "tokenmill_output" if _tokenmill_output(name) else ""
        return "" if stat.S_ISREG(mode) else _kind(mode).replace(" ", "_")
    return "" if entry.get("type") in ("file", "directory") else "not_a_regular_file"


def _not_regular(fs, path: str) -> str:
    """What a local path is when it is neither a regular file nor a directory, else ""."""
    if not _is_local(fs):
        return ""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        return "a symbolic link loop" if exc.errno == 40 else f"unreadable ({exc.strerror})"
    return "" if stat.S_ISREG(mode) or stat.S_ISDIR(mode) else _kind(mode)


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "named pipe"
    if stat.S_ISSOCK(mode):
        return "socket"
    return "device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "special file"


def _is_local(fs) -> bool:
    return "file" in (fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,))


def _shown(path: str) -> str:
    """A path as printable UTF-8: bytes of a non-UTF-8 name appear as ``\\xNN``."""
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _input_file(fs, path: str, rel: str, given: str, text_mode: str) -> InputFile:
    full = fs.unstrip_protocol(path) if is_url(given) else path
    if _is_local(fs) and not fs.isdir(path):
        _check_readable(path)
    fmt, compression = detect_format(full, text_mode=text_mode)
    size = 0 if fmt == "hf_dataset" else int(fs.size(path) or 0)
    return InputFile(path=full, rel=_shown(rel), format=fmt, size=size, compression=compression)


def _check_readable(path: str) -> None:
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        raise InputError(f"input {_shown(path)} cannot be read ({exc.strerror}); fix its permissions or leave it out "
                         "of the inputs") from exc
