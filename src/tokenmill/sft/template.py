"""Chat templates: load the model's own Jinja template and render it exactly as ``transformers`` does.

The environment mirrors ``transformers.utils.chat_template_utils``: an ``ImmutableSandboxedEnvironment`` with
``trim_blocks``, ``lstrip_blocks``, the ``loopcontrols`` extension, a ``{% generation %}`` tracker, and the
globals/filters ``raise_exception``, ``strftime_now``, ``tojson`` (``json.dumps``, ``ensure_ascii=False``),
``dict`` and ``namespace``. Templates see ``messages``, ``tools``, ``documents``, ``add_generation_prompt`` and the
tokenizer's named special tokens (``bos_token``, ``eos_token``, ...), the way ``apply_chat_template`` passes them.
"""

from __future__ import annotations

import hashlib
import json
import re
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2
import jinja2.ext
import jinja2.nodes
import jinja2.parser

from tokenmill.base.yamlsafe import decode
from tokenmill.errors import TemplateError
from tokenmill.sft.budget import (
    BudgetedSandbox,
    BudgetExceeded,
    CountedRange,
    join_within_budget,
    render_budget,
)
from tokenmill.sft.dates import DEFAULT_DATE

if TYPE_CHECKING:
    from tokenmill.tokenize.tokenizer import Tokenizer

CHATML = (Path(__file__).with_name("chatml.jinja")).read_text(encoding="utf-8")
NAMED_SPECIAL_TOKENS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
_GENERATION_TAG = re.compile(r"\{%-?\s*generation\s*-?%\}")


@dataclass(frozen=True)
class ChatTemplate:
    """A Jinja chat template, where it came from, and its content hash (recorded in shard headers)."""

    source: str
    origin: str = "builtin:chatml"
    date: str = DEFAULT_DATE  # what strftime_now() tells the template: a fixed day, so every render is the same

    @cached_property
    def stamps_time(self) -> bool:
        """Whether the template reads the clock (``strftime_now``: SmolLM3, Granite, Hunyuan write today's date)."""
        return "strftime_now" in self.source

    @cached_property
    def clock(self) -> dict[str, Any]:
        """``{"strftime_now": ...}`` at :attr:`date` for a template that reads the clock, else ``{}``: passed with
        the render's variables (they shadow the environment's ``strftime_now``), here and to the reference."""
        return {"strftime_now": fixed_clock(self.date)} if self.stamps_time else {}

    @cached_property  # read for every conversation: searched once per template object
    def digest(self) -> str:
        return hashlib.sha256(self.source.encode("utf-8")).hexdigest()

    @cached_property
    def has_generation_blocks(self) -> bool:
        return bool(_GENERATION_TAG.search(self.source))


def load_template(spec: Any = None, *, name: str = "default") -> ChatTemplate:
    """The chat template from ``spec``.

    ``spec`` is None or ``"chatml"`` (the built-in ChatML), a ``ChatTemplate``, a tokenizer object with a
    ``chat_template`` attribute, a ``tokenizer_config.json``, a ``.jinja`` or plain template file, a directory
    holding ``chat_template.jinja`` or ``tokenizer_config.json``, or the template text itself.
    ``name`` picks one of several named templates (default ``"default"``).
    """
    if spec is None or spec == "chatml":
        return ChatTemplate(CHATML)
    if isinstance(spec, ChatTemplate):
        return spec
    if hasattr(spec, "chat_template"):
        return _from_value(spec.chat_template, name=name, origin=f"tokenizer:{type(spec).__name__}")
    if isinstance(spec, str) and ("{{" in spec or "{%" in spec):
        return ChatTemplate(spec, origin="string")
    return _from_path(Path(spec), name=name)


def _from_path(path: Path, *, name: str) -> ChatTemplate:
    if path.is_dir():
        for candidate in ("chat_template.jinja", "tokenizer_config.json"):
            if (path / candidate).is_file():
                return _from_path(path / candidate, name=name)
        raise TemplateError(f"{path}: no chat_template.jinja or tokenizer_config.json in this directory")
    if not path.is_file():
        raise TemplateError(f"{path}: chat template file not found; pass a file, a directory or 'chatml'")
    text = decode(path.read_bytes(), where=str(path), what="chat template", error=TemplateError)
    if path.suffix == ".json":
        try:
            config = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TemplateError(f"{path}: not valid JSON ({exc})") from exc
        return _from_value(config.get("chat_template"), name=name, origin=str(path))
    return ChatTemplate(text, origin=str(path))


def _from_value(value: Any, *, name: str, origin: str) -> ChatTemplate:
    """A template from a ``chat_template`` value: a string, or a list / dict of named templates."""
    if isinstance(value, list):
        value = {item.get("name"): item.get("template") for item in value if isinstance(item, dict)}
    if isinstance(value, dict):
        if name not in value:
            raise TemplateError(f"{origin}: no chat template named {name!r}; available: {sorted(map(str, value))}")
        value = value[name]
        origin = f"{origin}#{name}"
    if not isinstance(value, str) or not value.strip():
        raise TemplateError(f"{origin}: no chat template found; pass one explicitly or use the built-in 'chatml'")
    return ChatTemplate(value, origin=origin)


def _tracker(environment: jinja2.Environment) -> _GenerationTracker:
    """The ``{% generation %}`` extension of a template's environment."""
    return next(e for e in environment.extensions.values() if isinstance(e, _GenerationTracker))


class _GenerationTracker(jinja2.ext.Extension):
    """``{% generation %}...{% endgeneration %}``: records the character span each block renders to."""

    tags = {"generation"}

    def __init__(self, environment: jinja2.Environment):
        super().__init__(environment)
        self._state: ContextVar = ContextVar("generation_tracker", default=None)

    def parse(self, parser: jinja2.parser.Parser) -> jinja2.nodes.CallBlock:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        node = jinja2.nodes.CallBlock(self.call_method("_support"), [], [], body)
        node.set_lineno(lineno)
        return node

    @jinja2.pass_eval_context
    def _support(self, context: jinja2.nodes.EvalContext, caller: jinja2.runtime.Macro) -> str:
        rv = caller()
        state = self._state.get()
        if state is not None:
            blocks, spans = state
            start = sum(len(b) for b in blocks)
            spans.append((start, start + len(rv)))
        return rv

    @contextmanager
    def track(self, blocks: list[str], spans: list[tuple[int, int]]):
        token = self._state.set((blocks, spans))
        try:
            yield
        finally:
            self._state.reset(token)


def _raise_exception(message: str):
    raise jinja2.exceptions.TemplateError(message)


def _tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


def parse_date(value: str) -> datetime:
    """``value`` (ISO 8601: ``2025-01-01`` or ``2025-01-01T09:30``) as a datetime; :class:`ValueError` otherwise."""
    return datetime.fromisoformat(str(value))


def fixed_clock(date: str):
    """``strftime_now`` that always answers ``date``: a template that stamps the current time renders the same
    on every run, in every worker and in the reference."""
    moment = parse_date(date)

    def strftime_now(fmt: str) -> str:
        return moment.strftime(fmt)

    return strftime_now


class _TemplateDict:
    def __call__(self, *args, **kwargs):
        return dict(*args, **kwargs)

    def fromkeys(self, *args, **kwargs):
        return dict.fromkeys(*args, **kwargs)


class _Namespace(jinja2.utils.Namespace):
    """``namespace()`` that refuses dunder attributes, as transformers' does."""

    def __init__(*args, **kwargs):
        self, args = args[0], args[1:]
        attrs = dict(*args, **kwargs)
        for key in attrs:
            _Namespace._check(key)
        jinja2.utils.Namespace.__init__(self, attrs)

    def __setitem__(self, key, value):
        _Namespace._check(key)
        jinja2.utils.Namespace.__setitem__(self, key, value)

    @staticmethod
    def _check(key):
        if isinstance(key, str) and key.startswith("_"):
            raise jinja2.exceptions.SecurityError(f"chat templates cannot set underscore attributes ({key!r})")


@lru_cache(maxsize=64)
def compile_template(source: str) -> jinja2.Template:
    """Compile ``source`` in the sandboxed environment (cached by text)."""
    env = BudgetedSandbox(  # sft/budget.py: the sandbox with render size and step budgets
        trim_blocks=True, lstrip_blocks=True, extensions=[_GenerationTracker, jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = _tojson
    env.globals.update(
        raise_exception=_raise_exception, strftime_now=_strftime_now, dict=_TemplateDict(), namespace=_Namespace,
        range=CountedRange,
    )
    compiled = env.from_string(source)
    # one flat dict: every render copies the globals, and copying the chained mapping costs a third of a
    # small render; nothing changes the environment's globals after this
    compiled.globals = dict(compiled.globals)
    return compiled


def special_token_kwargs(tokenizer: Tokenizer) -> dict[str, str]:
    """The named special tokens a template sees (``bos_token``, ``eos_token``, ...), None ones left out."""
    out = {}
    for attr in NAMED_SPECIAL_TOKENS:
        value = getattr(tokenizer, attr, None)
        if value is not None:
            out[attr] = str(value)
    return out


def render_template(
    template: ChatTemplate,
    messages: list[dict],
    *,
    tools: list | None = None,
    special_tokens: dict[str, str] | None = None,
    record_id: str = "?",
    track_generation: bool = False,
    generation_prompt: bool = False,
) -> tuple[str, list[tuple[int, int]]]:
    """Render ``messages`` (HF form), without a generation prompt unless asked (calibration reads it); returns the
    text and ``{% generation %}`` spans.

    Raises :class:`TemplateError` naming ``record_id`` when the template fails.
    """
    compiled = _compile_or_raise(template)
    kwargs: dict[str, Any] = dict(special_tokens or {})
    kwargs.update(messages=messages, tools=tools, documents=None, add_generation_prompt=generation_prompt,
                  **template.clock)
    blocks: list[str] = []
    spans: list[tuple[int, int]] = []
    try:
        with render_budget():  # sft/budget.py: time, steps and size of one render are bounded
            if not track_generation:
                return join_within_budget(compiled.generate(**kwargs)), spans
            with _tracker(compiled.environment).track(blocks, spans):
                for block in compiled.generate(**kwargs):
                    blocks.append(block)
            return join_within_budget(blocks), spans
    except BudgetExceeded as exc:
        raise TemplateError(f"record {record_id}: chat template ({template.origin}): {exc}", reason=exc.reason) from exc
    except Exception as exc:  # a template is user code: any failure is a per-record template error
        raise TemplateError(
            f"record {record_id}: chat template ({template.origin}) failed to render: {_describe(exc)}"
        ) from exc


def _describe(exc: Exception) -> str:
    """``Type: message``; a message-less error says so and what it most often means."""
    if str(exc).strip():
        return f"{type(exc).__name__}: {exc}"
    return (f"{type(exc).__name__} raised without a message (most often the template reads a field or a value "
            "this record lacks, or raise_exception('') fired)")


def _compile_or_raise(template: ChatTemplate) -> jinja2.Template:
    try:
        return compile_template(template.source)
    except jinja2.exceptions.TemplateError as exc:
        raise TemplateError(f"chat template ({template.origin}) does not compile: {exc}") from exc
