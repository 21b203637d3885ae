"""Before any work: the chat template compiles, and renders at least one of the first records of the inputs.

A template that does not compile, or that fails the same way on every record of the sample (the first
``SAMPLE`` conversations of each input, read as the run will read them), would reject every record and write
an empty output; the run stops instead, with the template's own message. A sample whose every record renders
without the tools it uses (rejected as ``tools_not_rendered``, see :mod:`tokenmill.sft.lacks`) fails alike.
A template that renders some of the sample goes on: records it cannot render are rejected one by one, as usual.

Cost: reading and rendering a few dozen records, before the workers start; nothing is encoded.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from tokenmill.errors import TemplateError
from tokenmill.io import sample_records
from tokenmill.sft.lacks import TOOLS_NOT_RENDERED, tools_not_rendered
from tokenmill.sft.normalize import normalize_rows
from tokenmill.sft.render import MaskPolicy, prepare_conversations
from tokenmill.sft.template import ChatTemplate, compile_template

if TYPE_CHECKING:
    from tokenmill.job.run import Run

SAMPLE = 16
_RECORD = re.compile(r"^record [^:]*(?::\d+)?: ")


def preflight(template: ChatTemplate, run: Run, *, policy: MaskPolicy, allow_consecutive: bool,
              keep_unrendered_tools: bool = False) -> None:
    """Raise :class:`TemplateError` when ``template`` does not compile or fails alike on every sampled record."""
    try:
        compile_template(template.source)
    except Exception as exc:  # noqa: BLE001 - jinja's syntax errors and the sandbox's refusals alike
        raise TemplateError(f"chat template ({template.origin}) does not compile: {exc}") from exc
    convs = _sample(run, allow_consecutive=allow_consecutive)
    if not convs:
        return
    # rendering is what fails alike on every record; what encoding can refuse (a control-token mismatch) is
    # never a template error, so no encoder is built here, in the main process, before the workers start
    results = prepare_conversations(convs, tokenizer=run.loaded_tokenizer, template=template, policy=policy)
    if not keep_unrendered_tools:
        results = [r if isinstance(r, TemplateError) else tools_not_rendered(template.source, c) or r
                   for c, r in zip(convs, results)]
    errors = [r for r in results if isinstance(r, TemplateError)]
    if len(errors) < len(results) or any(e.reason not in ("template_error", TOOLS_NOT_RENDERED) for e in errors):
        return
    messages = {_RECORD.sub("", str(e)) for e in errors}
    if len(messages) == 1:
        raise TemplateError(f"chat template ({template.origin}) fails on every one of the first {len(convs)} "
                            f"records the same way, so the run would reject them all: {str(errors[0])}")


def _sample(run: Run, *, allow_consecutive: bool) -> list[dict]:
    """The first ``SAMPLE`` conversations of each input, normalised with its schema."""
    convs = []
    for f in run.files:
        rows, locs, _ = sample_records(f, n=SAMPLE, text_mode="auto")
        good, _ = normalize_rows(rows, locs, source=f.rel, schema=run.schemas.get(f.rel, {}),
                                 allow_consecutive=allow_consecutive)
        convs += good[:SAMPLE]
    return convs
