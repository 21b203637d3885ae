"""What a conversation needs that a chat template never reads: tools, tool calls, tool results.

A template that knows no tools (Qwen2-instruct's reads only ``content``) fails on a record with tool calls with
a bare jinja error (``'dict object' has no attribute 'content'``). The template's source tells why: it never
names ``tools``, ``tool_calls`` or the ``tool`` role. That is said in the record's reject detail and, once, in
the run's summary with the count (``report["template_lacks"]``).

Worse is the record the same template renders without an error: a tool list offered and no call made renders
as the bare conversation, so the model would learn to mention functions it never saw. Such a record is
rejected as ``tools_not_rendered`` (:data:`TOOLS_NOT_RENDERED`), or, with ``keep_unrendered_tools``, kept
without its tools and counted (``report["tools_not_rendered_kept"]``).

Cost: three regular-expression searches of the template's source, once per template (cached); per record, a
look at its ``tools`` key and one pass over its messages.
"""

from __future__ import annotations

import re
from functools import lru_cache

from tokenmill.errors import TemplateError

TOOLS_NOT_RENDERED = "tools_not_rendered"
_NAMES_TOOLS = re.compile(r"\btools\b")
_NAMES_CALLS = re.compile(r"\btool_calls\b")
_NAMES_ROLE = re.compile(r"""['"]tool['"]|['"]ipython['"]""")
TOOL_TEMPLATES = ("Qwen2.5-Instruct's or Hermes-3's `tool_use` template, or the built-in `chatml` "
                  "(--chat-template chatml)")


@lru_cache(maxsize=16)
def _names(source: str) -> tuple[bool, bool, bool]:
    """Whether ``source`` names the tool list, tool calls and the tool role."""
    return (bool(_NAMES_TOOLS.search(source)), bool(_NAMES_CALLS.search(source)), bool(_NAMES_ROLE.search(source)))


def missing_tool_support(source: str, conv: dict) -> str:
    """The tool features ``conv`` uses that ``source`` never names ("`tools`, `tool_calls`"), or ""."""
    tools, calls, role = _names(source)
    if tools and calls and role:
        return ""
    messages = conv.get("messages") or []
    missing = []
    if conv.get("tools") and not tools:
        missing.append("`tools`")
    if not calls and any(m.get("tool_calls") for m in messages):
        missing.append("`tool_calls`")
    if not role and any(m.get("role") == "tool" for m in messages):
        missing.append("the `tool` role")
    return ", ".join(missing)


def lacks_sentence(lack: str) -> str:
    return f"this chat template does not render {lack}; use one that does, e.g. {TOOL_TEMPLATES}"


def tools_not_rendered(source: str, conv: dict) -> TemplateError | None:
    """The reject of a conversation the template rendered without the tool features it uses, or None."""
    lack = missing_tool_support(source, conv)
    if not lack:
        return None
    return TemplateError(f"record {conv.get('id', '?')}: {lacks_sentence(lack)} (it renders this conversation "
                         "without them, so the model would learn to mention functions it never saw; "
                         "--keep-unrendered-tools keeps such records)", reason=TOOLS_NOT_RENDERED)
