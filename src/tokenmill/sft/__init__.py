"""The SFT track: conversations in, the model's own chat template rendered once, exact loss masks out.

normalize   raw records (prompt/response, Alpaca, ShareGPT, OpenAI messages, tools, reasoning) -> Conversation
validate    strict checks with a stable reason per rejected record
template    the model's Jinja chat template in a sandbox compatible with transformers' apply_chat_template
render      one render, one tokenization, trained spans from character offsets
truncate    over-long examples lose their oldest whole turns, never the final answer
parity      ids checked against transformers' apply_chat_template
"""

import importlib

# each public name and the submodule that defines it, imported on first use (PEP 562): importing a
# submodule (``tokenmill.sft.select`` for the CLI's parser) does not load the template engine and the renderer
_HOME = {
    "normalize_batch": "normalize", "normalize_rows": "normalize", "to_arrow": "normalize",
    "check_parity": "parity",
    "MaskPolicy": "render", "Rendered": "render", "hf_messages": "render", "render_conversation": "render",
    "CHATML": "template", "ChatTemplate": "template", "load_template": "template", "render_template": "template",
    "fit_conversation": "truncate",
    "validate_conversation": "validate",
}

__all__ = [
    "CHATML", "ChatTemplate", "MaskPolicy", "Rendered", "check_parity", "fit_conversation", "hf_messages",
    "load_template", "normalize_batch", "normalize_rows", "render_conversation", "render_template", "to_arrow",
    "validate_conversation",
]


def __getattr__(name: str):
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_HOME])
