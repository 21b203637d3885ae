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
from tokenmill.base.inputs import (  # noqa: F401 (re-exported)
    COMPRESSION_SUFFIXES,
    EXTENSIONS,
    HF_DATASET_MARKERS,
    split_name,
)
from tokenmill.errors import InputError

GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
PARQUET_MAGIC = b"PAR1"
ARROW_FILE_MAGIC = b"ARROW1"
ARROW_STREAM_MAGIC = b"\xff\xff\xff\xff"
HEAD_BYTES = 1 << 16

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

    with fsspec.open(path, "rb") as fh:  # fsspec is untyped: its __enter__ reads as returning a list
        yield _buffered(fh)  # pyright: ignore[reportArgumentType]


def _buffered(fh: IO[bytes]) -> IO[bytes]:
    """``fh`` with the whole ``io`` reading interface: fsspec's own buffered files (s3fs, http) take no size in
    ``readline()``, which the JSONL reader bounds each line with; a standard buffered reader over them does."""
    if isinstance(fh, io.BufferedIOBase) or not hasattr(fh, "readinto"):
        return fh
    return io.BufferedReader(fh, buffer_size=1 << 20)  # pyright: ignore[reportArgumentType]


Stream = IO[bytes] | io.BufferedIOBase  # a file, or a decompressing reader over one (gzip.GzipFile)


def decompressed(raw: IO[bytes], compression: str) -> Stream:
    """A buffered binary stream over ``raw`` that undoes ``compression`` ("", "gzip" or "zstd")."""
    if compression == "gzip":
        return gzip.GzipFile(fileobj=raw, mode="rb")
    if compression == "zstd":
        problem = _zstd_problem(raw)
        reader = zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)
        if problem:  # zstandard's reader ends quietly at a cut frame: fail where the data ends instead
            reader = _FailAtEnd(reader, problem)
        return io.BufferedReader(reader, buffer_size=1 << 20)
    return raw


def _zstd_problem(raw: IO[bytes]) -> str:
    """Why the zstd frames of ``raw`` are incomplete ("" when every frame is whole); ``raw`` is rewound.

    Walks the frame and block headers only (3 bytes read per block of up to 128 KiB), never the data.
    """
    start = raw.tell()
    try:
        return zstd_frames_problem(raw)
    finally:
        raw.seek(start)


def zstd_frames_problem(raw: IO[bytes]) -> str:
    pos = raw.tell()
    while True:
        raw.seek(pos)
        magic = raw.read(4)
        if not magic:
            return ""
        if len(magic) < 4:
            return f"incomplete zstd frame header at byte {pos:,}: the file is truncated"
        value = int.from_bytes(magic, "little")
        if 0x184D2A50 <= value <= 0x184D2A5F:  # skippable frame
            size = raw.read(4)
            end = pos + 8 + int.from_bytes(size, "little") if len(size) == 4 else -1
            if end < 0 or _past_end(raw, end):
                return f"incomplete zstd skippable frame at byte {pos:,}: the file is truncated"
            pos = end
            continue
        if magic != ZSTD_MAGIC:
            return f"bytes at offset {pos:,} are not a zstd frame: the file is damaged or has trailing data"
        pos = _zstd_frame_end(raw, pos)
        if pos < 0:
            return "the last zstd frame is incomplete: the file is truncated (or a download was cut short)"


def _zstd_frame_end(raw: IO[bytes], pos: int) -> int:
    """Offset just past the frame starting at ``pos``, or -1 when the file ends inside it."""
    descriptor = raw.read(1)
    if not descriptor:
        return -1
    fhd = descriptor[0]
    single = (fhd >> 5) & 1
    fcs = (fhd >> 6) & 3
    sizes = (1 if single else 0, 2, 4, 8)
    pos += 5 + (0 if single else 1) + (0, 1, 2, 4)[fhd & 3] + sizes[fcs]
    while True:
        raw.seek(pos)
        header = raw.read(3)
        if len(header) < 3:
            return -1
        value = int.from_bytes(header, "little")
        kind, size = (value >> 1) & 3, value >> 3
        pos += 3 + (1 if kind == 1 else size)
        if value & 1:
            break
    pos += 4 if (fhd >> 2) & 1 else 0
    return -1 if _past_end(raw, pos) else pos


def _past_end(raw: IO[bytes], pos: int) -> bool:
    """True when the file ends before byte ``pos`` (exclusive end)."""
    if pos <= 0:
        return False
    raw.seek(pos - 1)
    return not raw.read(1)


class _FailAtEnd(io.RawIOBase):
    """A raw stream that raises ``ZstdError(problem)`` where ``inner`` ends, instead of a quiet EOF."""

    def __init__(self, inner, problem: str):
        self.inner, self.problem = inner, problem

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self.inner.read(len(buffer))
        if not data:
            raise zstandard.ZstdError(self.problem)
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self.inner.close()
        super().close()


@contextmanager
def open_stream(path: str, compression: str) -> Iterator[Stream]:
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
    chunks: list[bytes] = []
    with open_stream(path, compression) as fh:
        try:
            while (got := sum(map(len, chunks))) < n and (chunk := fh.read(min(n - got, 4096))):
                chunks.append(chunk)
        except READ_ERRORS as exc:
            if not chunks and not compression:  # a damaged stream is the reader's to report, as "unreadable"
                raise InputError(f"cannot read {path!r}: {exc}; is the file truncated or wrongly named?") from exc
    return b"".join(chunks)


def compression_of(head: bytes) -> str:
    if head.startswith(GZIP_MAGIC):
        return "gzip"
    if head.startswith(ZSTD_MAGIC):
        return "zstd"
    return ""


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
