"""What a conversation needs that a chat template never reads: tools, tool calls, tool results.

A template that knows no tools (Qwen2-instruct's reads only ``content``) fails on a record with tool calls with
a bare jinja error (``'dict object' has no attribute 'content'``). The template's source tells why: it never
names ``tools``, ``tool_calls`` or the ``tool`` role. That is said in the record's reject detail and, once, in
the run's summary with the count (``report["template_lacks"]``).
"""

from __future__ import annotations

import re

_NAMES_TOOLS = re.compile(r"\btools\b")
_NAMES_CALLS = re.compile(r"\btool_calls\b")
_NAMES_ROLE = re.compile(r"""['"]tool['"]|['"]ipython['"]""")
TOOL_TEMPLATES = ("Qwen2.5-Instruct's or Hermes-3's `tool_use` template, or the built-in `chatml` "
                  "(--chat-template chatml)")


def missing_tool_support(source: str, conv: dict) -> str:
    """The tool features ``conv`` uses that ``source`` never names ("`tools`, `tool_calls`"), or ""."""
    messages = conv.get("messages") or []
    missing = []
    if conv.get("tools") and not _NAMES_TOOLS.search(source):
        missing.append("`tools`")
    if any(m.get("tool_calls") for m in messages) and not _NAMES_CALLS.search(source):
        missing.append("`tool_calls`")
    if any(m.get("role") == "tool" for m in messages) and not _NAMES_ROLE.search(source):
        missing.append("the `tool` role")
    return ", ".join(missing)


def lacks_sentence(lack: str) -> str:
    return f"this chat template does not render {lack}; use one that does, e.g. {TOOL_TEMPLATES}"
