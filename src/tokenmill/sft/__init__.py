"""The SFT track: conversations in, the model's own chat template rendered once, exact loss masks out.

normalize   raw records (prompt/response, Alpaca, ShareGPT, OpenAI messages, tools, reasoning) -> Conversation
validate    strict checks with a stable reason per rejected record
template    the model's Jinja chat template in a sandbox compatible with transformers' apply_chat_template
render      one render, one tokenization, trained spans from character offsets
truncate    over-long examples lose their oldest whole turns, never the final answer
parity      ids checked against transformers' apply_chat_template
"""

from tokenmill.sft.normalize import normalize_batch, normalize_rows, to_arrow
from tokenmill.sft.parity import check_parity
from tokenmill.sft.render import MaskPolicy, Rendered, hf_messages, render_conversation
from tokenmill.sft.template import CHATML, ChatTemplate, load_template, render_template
from tokenmill.sft.truncate import fit_conversation
from tokenmill.sft.validate import validate_conversation

__all__ = [
    "CHATML", "ChatTemplate", "MaskPolicy", "Rendered", "check_parity", "fit_conversation", "hf_messages",
    "load_template", "normalize_batch", "normalize_rows", "render_conversation", "render_template", "to_arrow",
    "validate_conversation",
]
