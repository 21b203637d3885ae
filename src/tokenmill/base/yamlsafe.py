"""The YAML reader of every file a user hands tokenmill (recipes, pipeline files).

``yaml.safe_load`` is safe against code, not against mistakes or size: a key given twice keeps the last
value without a word, and a few lines of aliases (``&a [*b, *b, ...]`` nested nine deep, "billion
laughs") stand for hundreds of millions of nodes, which the first ``repr`` or walk of the value then
tries to build (25-60 s, then ``MemoryError``). So this reader

- refuses a key given twice in one mapping (every such key at once, with both lines);
- counts the nodes of the document as aliases expand it, before anything is built (each distinct node
  is sized once: the count costs the size of the text, not of the expansion), and refuses a document of
  more than ``MAX_NODES``;
- refuses nesting deeper than the parser can follow (``RecursionError`` inside PyYAML), and text that is
  not UTF-8, naming the byte offset.

Every refusal is a ``ConfigError`` naming the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tokenmill.errors import ConfigError

MAX_NODES = 100_000  # a recipe has ~100 nodes, a pipeline file with a long word list a few thousand
MERGE_TAG = "tag:yaml.org,2002:merge"


class _Loader(yaml.SafeLoader):
    """``SafeLoader`` that notes each key given twice in one mapping instead of keeping the last."""

    def __init__(self, stream):
        super().__init__(stream)
        self.duplicates: list[tuple[Any, int, int]] = []  # (key, first line, repeated line)

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == MERGE_TAG:
                    continue
                key = self.construct_object(key_node, deep=True)
                line = key_node.start_mark.line + 1
                try:
                    if key in seen:
                        self.duplicates.append((key, seen[key], line))
                    seen.setdefault(key, line)
                except TypeError:  # an unhashable key: PyYAML's own error follows
                    pass
        return super().construct_mapping(node, deep=deep)


def read_text(path: str | Path, *, what: str) -> str:
    """The UTF-8 text of file ``path`` (a ``what``: "recipe", "pipeline file"); ``ConfigError`` otherwise."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read the {what} ({exc.strerror})") from exc
    return decode(data, where=str(p), what=what)


def decode(data: bytes, *, where: str, what: str, error: type[Exception] = ConfigError) -> str:
    """``data`` as UTF-8; an ``error`` (a chat template's is a ``TemplateError``) naming the first byte
    that is not, and its offset."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = data[exc.start:exc.end]
        raise error(f"{where}: the {what} is not UTF-8 text (byte offset {exc.start}: {bad!r}); "
                    f"save it as UTF-8") from None


def load_yaml(text: str, *, where: str) -> Any:
    """The one YAML document in ``text`` (``None`` when empty); ``where`` names the file in errors."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        size = _expanded_size(node, {}, [])
        if size > MAX_NODES:
            raise ConfigError(f"{where}: the YAML expands to more than {MAX_NODES:,} nodes once its aliases "
                              "(*name) are expanded; write the values out instead of repeating aliases")
        doc = loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{where}: not valid YAML ({exc})") from None
    except RecursionError:
        raise ConfigError(f"{where}: the YAML is nested too deep to read; flatten it") from None
    finally:
        loader.dispose()
    if loader.duplicates:
        raise ConfigError([f"{where}: line {again}: key {key!r} is given twice (first on line {first}); YAML "
                           "would keep only the last: remove one" for key, first, again in loader.duplicates])
    return doc


def load_yaml_file(path: str | Path, *, what: str) -> Any:
    """:func:`load_yaml` of the UTF-8 text of ``path``."""
    return load_yaml(read_text(path, what=what), where=str(path))


def _expanded_size(node: yaml.Node, sizes: dict[int, int], stack: list[int]) -> int:
    """Nodes of ``node`` with every alias expanded, each distinct node sized once (``sizes``), capped just
    above ``MAX_NODES`` so the numbers stay small; a node inside itself (a recursive alias) counts as large."""
    key = id(node)
    if key in sizes:
        return sizes[key]
    if key in stack:
        return MAX_NODES + 1
    stack.append(key)
    total = 1
    if isinstance(node, yaml.SequenceNode):
        children = node.value
    elif isinstance(node, yaml.MappingNode):
        children = [n for pair in node.value for n in pair]
    else:
        children = []
    for child in children:
        total = min(MAX_NODES + 1, total + _expanded_size(child, sizes, stack))
    stack.pop()
    sizes[key] = total
    return total
