"""Format detection and opening files, local or fsspec, compressed or not.

A format comes from the file name first and is checked against the first bytes: gzip and zstd are
recognised by their magic numbers whatever the name says, a ``.json`` file is a JSON array when its first
non-space byte is ``[`` and JSON Lines when its first line is a complete object, and a file with an
unknown extension is sniffed (Parquet, Arrow IPC, WARC, JSON) before giving up.
"""

from __future__ import annotations

import gzip
import io
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO

import orjson
import zstandard

from tokenmill._extras import require
from tokenmill.errors import InputError

GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
PARQUET_MAGIC = b"PAR1"
ARROW_FILE_MAGIC = b"ARROW1"
ARROW_STREAM_MAGIC = b"\xff\xff\xff\xff"
HEAD_BYTES = 1 << 16

COMPRESSION_SUFFIXES = {".gz": "gzip", ".gzip": "gzip", ".zst": "zstd", ".zstd": "zstd"}
EXTENSIONS = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".jsonlines": "jsonl",
    ".json": "json",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".arrow": "arrow",
    ".feather": "arrow",
    ".ipc": "arrow",
    ".txt": "text",
    ".text": "text",
    ".md": "text",
    ".warc": "warc",
    ".wet": "wet",
}
HF_DATASET_MARKERS = ("state.json", "dataset_info.json")
# what reading a damaged or truncated file raises: it becomes an "unreadable" reject, never a traceback
READ_ERRORS: tuple[type[BaseException], ...] = (OSError, EOFError, ValueError, zstandard.ZstdError)


def is_url(path: str) -> bool:
    return "://" in path


def local_path(path: str) -> str | None:
    """The local file system path of ``path``, or None when it lives behind another fsspec protocol."""
    if path.startswith("file://"):
        return path[len("file://") :]
    return None if is_url(path) else path


def filesystem(path: str):
    """The fsspec file system and the protocol-less path of ``path``."""
    import fsspec

    protocol = path.split("://", 1)[0] if is_url(path) else "file"
    if protocol in ("s3", "s3a"):
        require("s3fs", "s3", f"read {path}")
    try:
        return fsspec.core.url_to_fs(path)
    except (ImportError, ValueError) as exc:
        raise InputError(f"cannot open {path!r}: {exc}") from exc


@contextmanager
def open_raw(path: str) -> Iterator[IO[bytes]]:
    """Open ``path`` (local path or fsspec URL) for binary reading, without decompression."""
    local = local_path(path)
    if local is not None:
        with open(local, "rb") as fh:
            yield fh
        return
    import fsspec

    with fsspec.open(path, "rb") as fh:
        yield fh


def decompressed(raw: IO[bytes], compression: str) -> IO[bytes]:
    """A buffered binary stream over ``raw`` that undoes ``compression`` ("", "gzip" or "zstd")."""
    if compression == "gzip":
        return gzip.GzipFile(fileobj=raw, mode="rb")
    if compression == "zstd":
        reader = zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)
        return io.BufferedReader(reader, buffer_size=1 << 20)
    return raw


@contextmanager
def open_stream(path: str, compression: str) -> Iterator[IO[bytes]]:
    """Open ``path`` for binary reading of its decompressed bytes."""
    with open_raw(path) as raw:
        stream = decompressed(raw, compression)
        try:
            yield stream
        finally:
            if stream is not raw:
                stream.close()


def read_head(path: str, compression: str = "", n: int = HEAD_BYTES) -> bytes:
    """The first ``n`` decompressed bytes of ``path`` (fewer for a short or damaged file)."""
    with open_stream(path, compression) as fh:
        try:
            return fh.read(n)
        except READ_ERRORS as exc:
            raise InputError(f"cannot read {path!r}: {exc}; is the file truncated or wrongly named?") from exc


def compression_of(head: bytes) -> str:
    if head.startswith(GZIP_MAGIC):
        return "gzip"
    if head.startswith(ZSTD_MAGIC):
        return "zstd"
    return ""


def split_name(path: str) -> tuple[str, str]:
    """(format from the extension or "", compression suffix's kind or "") of a file name."""
    name = path.rstrip("/").rsplit("/", 1)[-1].lower()
    stem, dot, ext = name.rpartition(".")
    compression = COMPRESSION_SUFFIXES.get(f".{ext}", "") if dot else ""
    if compression:
        stem, dot, ext = stem.rpartition(".")
    return (EXTENSIONS.get(f".{ext}", "") if dot else ""), compression


def sniff_json(head: bytes) -> str:
    """ "json" for a JSON array (or single document), "jsonl" for one object per line, "" for neither."""
    body = head.removeprefix(b"\xef\xbb\xbf").lstrip()
    if body.startswith(b"["):
        return "json"
    if not body.startswith(b"{"):
        return ""
    first_line = body.split(b"\n", 1)[0]
    try:
        orjson.loads(first_line)
    except orjson.JSONDecodeError:
        complete = b"\n" in body or len(head) < HEAD_BYTES
        return "json" if complete else "jsonl"
    return "jsonl"


def sniff_content(head: bytes) -> str:
    """The format told by the first decompressed bytes alone, or ""."""
    if head.startswith(PARQUET_MAGIC):
        return "parquet"
    if head.startswith((ARROW_FILE_MAGIC, ARROW_STREAM_MAGIC)):
        return "arrow"
    if head.startswith(b"WARC/"):
        return "wet" if b"WARC-Type: conversion" in head else "warc"
    return sniff_json(head)


def looks_like_text(head: bytes) -> bool:
    if b"\x00" in head:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start >= len(head) - 3  # a character cut by the end of the head
    return True


def is_hf_dataset(fs, path: str) -> bool:
    """True for a directory written by ``datasets.Dataset.save_to_disk``."""
    return all(fs.isfile(f"{path.rstrip('/')}/{m}") for m in HF_DATASET_MARKERS)


def detect_format(path: str, *, text_mode: str = "auto") -> tuple[str, str]:
    """(format, compression) of one file or ``datasets`` directory; raises InputError when unknown.

    ``text_mode`` other than "auto" lets a file with no known extension be read as text when its first
    bytes are UTF-8 text.
    """
    fs, fs_path = filesystem(path)
    if fs.isdir(fs_path):
        if is_hf_dataset(fs, fs_path):
            return "hf_dataset", ""
        raise InputError(f"{path!r} is a directory; give it to expand_inputs() to list the files inside")
    by_name, _ = split_name(path)
    compression = compression_of(read_head(path, "", 4))
    if by_name in ("parquet", "arrow"):
        return _checked_columnar(path, by_name, compression), ""
    if by_name in ("jsonl", "text", "warc", "wet"):
        return by_name, compression
    head = read_head(path, compression)
    if not head.strip():
        return by_name or "jsonl", compression
    fmt = sniff_json(head) if by_name == "json" else sniff_content(head)
    if not fmt and by_name != "json" and text_mode != "auto" and looks_like_text(head):
        fmt = "text"
    if not fmt:
        known = ", ".join(sorted(EXTENSIONS))
        raise InputError(
            f"unknown format for {path!r}: the name and the first bytes match no reader "
            f"(known extensions: {known}, optionally .gz/.zst); rename the file or remove it from the inputs"
        )
    return fmt, compression


def _checked_columnar(path: str, fmt: str, compression: str) -> str:
    head = read_head(path, "", 8)
    if compression:
        raise InputError(f"{path!r} is {compression}-compressed; {fmt} files must not be wrapped in a compressor")
    ok = head.startswith(PARQUET_MAGIC) if fmt == "parquet" else sniff_content(head) == "arrow"
    if not ok:
        raise InputError(f"{path!r} is named like a {fmt} file but does not start like one; is it truncated?")
    return fmt
