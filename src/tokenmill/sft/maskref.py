"""An independent reference for the loss mask: what ``apply_chat_template`` itself says each assistant turn adds.

Nothing here reads tokenmill's spans or calibration. For assistant message ``i`` the reference renders, with the
reference tokenizer's ``apply_chat_template`` (text, not ids):

- ``before`` = the messages before ``i``, and ``prompt`` = the same with ``add_generation_prompt=True``;
- ``upto`` = the messages through ``i``.

When ``upto`` and ``before`` are prefixes of the whole conversation's render, the turn occupies ``[len(before),
len(upto))`` of it. Its header is what the generation prompt adds (the part of ``prompt`` that the whole render
shares, cut back to a whitespace or a control token when the turn writes only part of it), so the output starts
where the shared part ends: everything the model must emit after the generation prompt is trained. (When the
message before renders differently once it is no longer last, as Hermes-3's last tool result does, the turn starts
at the generation prompt's header, the first one after where ``before`` and the whole render part.) The output
ends after the turn's last control token when only whitespace follows it (the end-of-turn marker the model must
emit), else at the turn's end, trailing whitespace cut. An empty ``<think></think>`` block the template writes at the output's
start is not trained (tokenmill's default, ``supervise_empty_think=False``). A token is trained when its
characters overlap that span; tokens in the turn's region must be trained exactly so.

A turn whose render depends on what follows it (``upto`` not a prefix of the whole render, as when a template
drops earlier turns' reasoning) has no reference and is not compared; nor has a turn of a template that writes
no generation prompt (nothing then says which of its text is header).

Cost: three text renders per assistant turn and one tokenization with offsets, for checked examples only.
"""

from __future__ import annotations

import os
import re
from typing import Any

import numpy as np

_EMPTY_THINK = re.compile(r"\s*<think>\s*</think>\s*")  # GLM writes "\n<think></think>\n"


def _render(hf_tokenizer: Any, messages: list[dict], tools, template_source: str, prompt: bool) -> str:
    return hf_tokenizer.apply_chat_template(messages, tools=tools, chat_template=template_source, tokenize=False,
                                            add_generation_prompt=prompt)


def reference_turns(hf_tokenizer: Any, messages: list[dict], tools, template_source: str, controls: list[str]
                    ) -> list[tuple[int, int, int, int]]:
    """(region start, region end, trained start, trained end) in the whole render, per checkable assistant turn."""
    whole = _render(hf_tokenizer, messages, tools, template_source, False)
    pattern = re.compile("|".join(re.escape(c) for c in controls)) if controls else None
    out = []
    for i, m in enumerate(messages):
        if m.get("role") != "assistant":
            continue
        try:
            before = _render(hf_tokenizer, messages[:i], tools, template_source, False) if i else ""
            prompt = _render(hf_tokenizer, messages[:i], tools, template_source, True) if i else ""
            upto = _render(hf_tokenizer, messages[: i + 1], tools, template_source, False)
        except Exception:  # noqa: BLE001 - a template may refuse a prefix (e.g. one that must end with a user)
            continue
        start = _output_start(whole, before, prompt, upto, controls)
        if start is not None:
            out.append((start[0], len(upto), *_trained(whole, start[1], len(upto), pattern)))
    return out


def _output_start(whole: str, before: str, prompt: str, upto: str, controls: list[str]
                  ) -> tuple[int, int] | None:
    """(turn start, output start) in ``whole``, or None when the turn has no reference."""
    if not whole.startswith(upto) or prompt == before:
        return None
    if whole.startswith(before) and prompt.startswith(before):
        header = _shared(prompt[len(before):], whole[len(before):len(upto)], controls)
        return len(before), len(before) + header
    if whole.startswith(before):
        return len(before), max(len(before), min(len(os.path.commonprefix([prompt, whole])), len(upto)))
    # the message before renders differently once it is not the last one (e.g. a closing newline it then gets):
    # the turn starts with the generation prompt's header, after where the two renders part
    lo, header = len(os.path.commonprefix([before, whole])), prompt[len(before):] if prompt.startswith(before) else ""
    pos = whole.find(header, lo, len(upto)) if header else -1
    return None if pos < 0 else (pos, pos + len(header))


def _shared(header: str, turn: str, controls: list[str]) -> int:
    """The part of the generation prompt's ``header`` the turn writes: all of it, or the common prefix cut back
    to its last whitespace or control token (a half-matched tag is not header)."""
    common = os.path.commonprefix([header, turn])
    if common == header:
        return len(common)
    cut = max((common.rfind(c) + len(c) for c in controls if c in common), default=0)
    space = max((i + 1 for i, ch in enumerate(common) if ch.isspace()), default=0)
    return max(cut, space)


def _trained(whole: str, start: int, end: int, pattern: re.Pattern | None) -> tuple[int, int]:
    found = list(pattern.finditer(whole, start, end)) if pattern else []
    stop = start + len(whole[start:end].rstrip())
    if found and found[-1].end() >= stop:  # the turn ends with a control token (none: GLM, whose turn ends at
        stop = found[-1].end()             # the next role token; a </think> inside it is no end mark)
    empty = _EMPTY_THINK.match(whole, start, stop)
    return (empty.end() if empty else start), stop


def mask_differences(hf_tokenizer: Any, rendered: Any, template_source: str, controls: list[str]) -> list[str]:
    """Where ``rendered.mask`` (trained on every assistant turn) differs from the reference, one line per differing
    turn; empty when it agrees."""
    turns = reference_turns(hf_tokenizer, rendered.messages, rendered.tools, template_source, controls)
    if not turns:
        return []
    enc = hf_tokenizer(rendered.text, add_special_tokens=False, return_offsets_mapping=True)
    offsets = np.asarray(enc["offset_mapping"], dtype=np.int64).reshape(-1, 2)
    if [int(i) for i in enc["input_ids"]] != [int(i) for i in rendered.ids]:
        return []  # ids differ: the id check reports that
    starts, ends = offsets[:, 0], offsets[:, 1]
    out = []
    for lo, hi, a, b in turns:
        region = (ends > lo) & (starts < hi)
        want = region & (ends > a) & (starts < b)
        got = region & rendered.mask.astype(bool)
        if not np.array_equal(want, got):
            diff = np.flatnonzero(want != got)
            out.append(f"token {int(diff[0])} ({rendered.text[starts[diff[0]]:ends[diff[0]]]!r}) is "
                       f"{'trained' if got[diff[0]] else 'not trained'}, the reference says "
                       f"{'trained' if want[diff[0]] else 'not trained'} ({len(diff)} token(s) differ in this turn)")
    return out
