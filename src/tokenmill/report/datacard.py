"""The data card of a run: ``DIR/datacard.md`` (a Hugging Face dataset card) and ``DIR/datacard.json``.

Written at the end of every ``tokenmill curate`` and ``tokenmill pretrain`` run, and rebuilt by
``tokenmill card DIR``. The Markdown starts with the dataset-card YAML header the Hub reads (``license``,
``language``, ``size_categories``, ``source_datasets``, ``pretty_name``, ``tags``), so the directory can be
published as it is; then the sources with their licences and counts, the languages, the funnel, the dedup
rates, decontamination per benchmark, the opt-outs honoured (by crawler), tokens per source, the tokenizer
and its fingerprint, the command, the pipeline file (``--config``) with the sha256 of what the run read, and
the pipeline.

**Every number comes from the run's own records**, read by :mod:`tokenmill.report.card_ledger`:
``manifest.json`` (counts, funnel, sources, tokenizer, config) and, for what the manifest does not break
down, the ledger parquet files it lists (a licence, a language, a benchmark or a crawler per document,
counted over the rows the ledger keeps). Nothing is re-scored or re-derived from the documents. A document
is *kept* when no ledger row of it carries a reason. ``datacard.json`` holds the same values as the
Markdown (the Markdown is rendered from it).

The header's ``license`` is the one licence (nearly) every kept document states, else ``other`` with the
counts in the body (:func:`dataset_licence`); ``warnings`` say when the robots step could judge few of the
documents (:func:`warnings`).

The command is the manifest's ``command`` when it records one, else the one the card recorded before
(``tokenmill card`` keeps it), else this process's own command line when it is ``tokenmill``.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from tokenmill.base.files import atomic_write
from tokenmill.errors import InputError
from tokenmill.report.card_ledger import SourceTally, Tally, check_manifest, tally

SIZE_BOUNDS = [(1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"),
               (10_000_000, "1M<n<10M"), (100_000_000, "10M<n<100M"), (1_000_000_000, "100M<n<1B"),
               (10_000_000_000, "1B<n<10B"), (100_000_000_000, "10B<n<100B"), (1_000_000_000_000, "100B<n<1T")]
ONE_LICENCE = 0.95  # the share of kept documents one licence must cover to be the card's `license:`
WARN_SHARE = 0.05  # above this share of the records rejected, or of the documents robots judged without a URL,
# the card warns


def size_category(n: int) -> str:
    """The Hub's ``size_categories`` value for ``n`` examples."""
    return next((label for bound, label in SIZE_BOUNDS if n < bound), "n>1T")


def card_data(out: str | Path, manifest: dict) -> dict[str, Any]:
    """The data card's values, read from ``manifest`` and the ledger files under ``out``."""
    out = Path(out)
    t = tally(out, manifest)
    counts = manifest.get("counts") or {}
    ran = {str(s.get("name")) for s in manifest.get("steps") or [] if isinstance(s, dict)}
    licences = dict(t.licences.most_common()) if "license.label" in t.present else None
    return {
        "track": manifest.get("track"),
        "documents": counts.get("kept", 0),
        "input_records": counts.get("input", 0),
        "rejected": sum((counts.get("rejected") or {}).values()),
        "tokens": counts.get("tokens", 0),
        "sources": _sources(manifest, t),
        "license": dataset_licence(licences),
        "licences": licences,
        "languages": dict(t.languages.most_common()) if "language.label" in t.present else None,
        "steps_ran": sorted(ran & {"license", "language", "robots"}),
        "warnings": warnings(t, manifest),
        "funnel": [{k: r.get(k) for k in ("step", "reached", "removed", "left")} | {"rules": r.get("rules", {})}
                   for r in (manifest.get("funnel") or {}).get("rows", [])],
        "dedup": [{"step": r["step"], "reached": r["reached"], "removed": r["removed"],
                   "rate": round(r["removed"] / r["reached"], 6) if r["reached"] else 0.0}
                  for r in (manifest.get("funnel") or {}).get("rows", []) if "dedup" in r["step"]],
        "decontamination": dict(sorted(t.removed["decontamination"].items())),
        "opt_outs": {"robots_disallowed_by_agent": dict(sorted(t.removed["robots"].items())),
                     "robots_status": dict(sorted(t.robots_status.items())),
                     "tdm_reserved_by_source": dict(sorted(t.removed["tdm"].items()))},
        "tokenizer": _tokenizer(manifest.get("tokenizer")),
        "command": _command(out, manifest),
        **_pipeline_file(manifest.get("pipeline_file")),  # only when the run had one: cards without one unchanged
        "pipeline": {"preset": (manifest.get("config") or {}).get("preset"),
                     "steps": (manifest.get("config") or {}).get("steps") or []},
        "tokenmill": manifest.get("tokenmill"),
        **({"sft": _sft(manifest)} if _sft(manifest) else {}),  # an SFT run's examples
        **({"preference": _preference(manifest)} if manifest.get("track") == "pref" else {}),
        **({"task_mix": _task_mix(manifest)} if _task_mix(manifest) else {}),  # `sft select`'s task labels
    }


def _preference(manifest: dict) -> dict:
    """A preference run's pairs: how many, the length bias and margins a DPO trainer should know of, what the
    template's prompt split, truncation and the checks left out."""
    report, counts = manifest.get("report") or {}, manifest.get("counts") or {}
    return {key: report.get(key) for key in ("pairs", "unpaired", "length_bias", "margin", "prompt_not_prefix",
                                             "truncated", "tokens")} | {
        "chat_template": (manifest.get("config") or {}).get("chat_template"),
        "dropped": dict(sorted({**(counts.get("filtered") or {}), **(counts.get("rejected") or {})}.items()))}


def _task_mix(manifest: dict) -> dict | None:
    """``sft select``'s task mix (:mod:`tokenmill.sft.taskmix`): the scored and selected examples by label and
    what ``--mix`` asked (None for other runs)."""
    mix = (manifest.get("report") or {}).get("task_mix")
    if not isinstance(mix, dict):
        return None
    return {k: mix.get(k) for k in ("rule", "threshold", "scored", "selected", "mix", "asked")}


def card_for(out: str | Path, manifest: dict) -> dict[str, Any]:
    """The card of the output ``out``: :func:`card_data`, except for an export (``tokenmill export --to hf``),
    whose data is the exported run's: that run's card (its manifest and ledger, while they are there), with the
    export's section."""
    source = manifest.get("source") if manifest.get("track") == "export" else None
    if not isinstance(source, dict) or not isinstance(source.get("path"), str):
        return card_data(out, manifest)
    exported = readable_manifest(Path(source["path"]))
    data = card_data(source["path"], exported) if exported is not None else card_data(out, manifest)
    return {**data, "export": manifest.get("export")}


def readable_manifest(directory: Path) -> dict | None:
    """``DIR/manifest.json`` when it is a run's manifest the card can read, else None."""
    try:
        return read_manifest(directory)
    except InputError:
        return None


def _sft(manifest: dict) -> dict | None:
    """An SFT run's examples: the schemas its inputs were read as, the chat template and its hash, the share of
    tokens trained, the stop token trained, what truncation cut and what was dropped (None for other runs)."""
    config, report = manifest.get("config") or {}, manifest.get("report") or {}
    if "chat_template_hash" not in config:
        return None
    schemas = Counter(str((i.get("schema_used") or {}).get("style") or (i.get("schema_used") or {}).get("record"))
                      for i in manifest.get("inputs") or [] if isinstance(i, dict))
    counts = manifest.get("counts") or {}
    return {"schemas": dict(schemas.most_common()), "chat_template": config.get("chat_template"),
            "chat_template_hash": config.get("chat_template_hash"), "examples": report.get("examples", 0),
            "supervised_share": report.get("supervised_share"),
            "stop_token_trained_share": report.get("stop_token_trained_share"),
            "truncated": report.get("truncated", 0), "supervised_tokens_lost": report.get("supervised_tokens_lost", 0),
            "dropped": dict(sorted({**(counts.get("filtered") or {}), **(counts.get("rejected") or {})}.items())),
            **({"task_mix": report["task_mix"]} if report.get("task_mix") else {})}  # a selection's labels


def _sources(manifest: dict, t: Tally) -> list[dict]:
    """Per input file: records and kept (the manifest's when it has them, else the ledger's), tokens, licences."""
    per = (manifest.get("sources") or {})
    names = sorted(set(t.sources) | set(per), key=str)
    licensed = "license.label" in t.present
    out = []
    for name in names:
        mine = t.sources.get(name) or SourceTally()
        entry = per.get(name) or {}
        out.append({"source": name, "records": entry.get("records", mine.records),
                    "kept": entry.get("kept", mine.kept), "tokens": entry.get("tokens"),
                    "licences": dict(mine.licences.most_common()) if licensed else {}})
    return out


def _tokenizer(info: Any) -> dict | None:
    if not isinstance(info, dict):
        return None
    return {k: info.get(k) for k in ("name", "fingerprint", "vocab_size", "backend", "eos_id", "bos_id")}


def _pipeline_file(recorded: Any) -> dict:
    """``{"pipeline_file": {path, sha256}}`` when the manifest records the run's pipeline file, else nothing."""
    if not isinstance(recorded, dict) or not isinstance(recorded.get("sha256"), str):
        return {}
    return {"pipeline_file": {"path": str(recorded.get("path")), "sha256": recorded["sha256"]}}


def _command(out: Path, manifest: dict) -> str | None:
    if manifest.get("command"):
        return str(manifest["command"])
    before = out / "datacard.json"
    if before.is_file():
        try:
            recorded = json.loads(before.read_text(encoding="utf-8")).get("command")
        except (OSError, ValueError):
            recorded = None
        if recorded:
            return recorded
    if Path(sys.argv[0]).name == "tokenmill" and len(sys.argv) > 1 and sys.argv[1] in ("curate", "pretrain"):
        return shlex.join(["tokenmill", *sys.argv[1:]])
    return None


def warnings(t: Tally, manifest: dict) -> list[str]:
    """What a reader of the card must know before trusting it: the run kept nothing, or lost more than a small
    share of its records as unreadable (:func:`loss_warnings`); the robots step could not ask robots.txt for
    many of the documents (no URL, or one naming no host), or its snapshot held none of their hosts (a wrong
    or empty snapshot: nothing was judged)."""
    judged = sum(t.robots_status.values())
    out = loss_warnings(manifest.get("counts") or {}, manifest.get("rejects_file"))
    unasked = t.robots_status["no_url"] + t.robots_status["bad_url"]
    if judged and unasked > WARN_SHARE * judged:
        out.append(f"robots: {unasked:,} of {judged:,} documents have no URL the step could read (no_url "
                   f"{t.robots_status['no_url']:,}, bad_url {t.robots_status['bad_url']:,}): robots.txt was not asked "
                   "for them, and they were kept. Map the field holding each page's URL as url")
    if judged > unasked and not t.robots_matched:
        snapshot = next((s.get("params", {}).get("snapshot") for s in manifest.get("steps") or []
                         if isinstance(s, dict) and s.get("name") == "robots"), None)
        out.append(f"robots: the snapshot{f' {snapshot}' if snapshot else ''} holds a robots.txt for none of the "
                   f"{judged - unasked:,} documents' hosts: nothing was judged. Give the crawl's own snapshot")
    return out


def loss_warnings(counts: dict, rejects_file: str | None) -> list[str]:
    """A run that read records and kept none, or rejected (could not read: malformed, wrong type, broken roles)
    more than :data:`WARN_SHARE` of them. Records the steps filtered are the run's purpose, not a loss."""
    read = counts.get("input") or 0
    rejected = counts.get("rejected") or {}
    lost = sum(rejected.values()) if isinstance(rejected, dict) else 0
    if not isinstance(read, int) or read <= 0:
        return []
    reasons = ", ".join(f"{k} {v:,}" for k, v in sorted(rejected.items(), key=lambda kv: (-kv[1], kv[0]))[:4]) \
        if isinstance(rejected, dict) else ""
    where = f": {rejects_file} lists each with its file, line and reason" if rejects_file else ""
    out = []
    if not counts.get("kept"):
        filtered = counts.get("filtered") or {}
        by_steps = sum(filtered.values()) if isinstance(filtered, dict) else 0
        out.append(f"no record was kept: of {read:,} read, {lost:,} were rejected"
                   f"{f' ({reasons})' if reasons else ''} and {by_steps:,} filtered; the output holds no training data"
                   f"{where}")
    elif lost > WARN_SHARE * read:
        out.append(f"{lost:,} of {read:,} records ({lost / read:.0%}) were rejected ({reasons}) and are not in the "
                   f"output{where}")
    return out


def dataset_licence(licences: dict[str, int] | None) -> str:
    """The data set's licence for the card's header: the one licence that (nearly) every kept document states
    (at least :data:`ONE_LICENCE` of them; ``unknown`` when that many state none), else ``other``: a mix,
    whose counts the card's body gives. Never the licence of a few documents."""
    licences = licences or {}
    total = sum(licences.values())
    if not total:
        return "unknown"
    label, n = max(licences.items(), key=lambda kv: kv[1])
    if n < ONE_LICENCE * total:
        return "other"
    return HF_LICENCES.get(label, label)


HF_LICENCES = {"public-domain": "other"}


def _header(data: dict) -> dict:
    return {"license": [data["license"]], "language": sorted(data["languages"] or {}) or None,
            "size_categories": [size_category(data["documents"])],
            "source_datasets": [s["source"] for s in data["sources"]] or ["original"],
            "pretty_name": f"tokenmill {data['track']} output", "tags": ["tokenmill", str(data["track"])]}


def render(data: dict) -> str:
    """``datacard.md`` from :func:`card_data`'s values."""
    header = {k: v for k, v in _header(data).items() if v is not None}
    noun = "examples" if data.get("sft") else "pairs" if data.get("preference") else "documents"
    parts = ["---\n" + yaml.safe_dump(header, sort_keys=False, allow_unicode=True) + "---\n",
             f"# Data card: tokenmill {data['track']} output\n",
             f"{data['documents']:,} {noun} kept of "
             f"{data['input_records']:,} input records "
             f"({data['rejected']:,} rejected as malformed)" + (f"; {data['tokens']:,} tokens." if data["tokens"] else "."),
             "\n## Sources\n", _table(["source", "records", "kept", "tokens", "licences (kept)"],
                                      [[s["source"], s["records"], s["kept"], s["tokens"] if s["tokens"] is not None else "",
                                        _pairs(s["licences"])] for s in data["sources"]]),
             *_warnings(data["warnings"]),
             "\n## Licences\n", _licence_text(data),
             "\n## Languages\n", _known(data["languages"], "No language step ran." if "language" not in data["steps_ran"]
                                          else "The language step recorded no language."),
             "\n## Funnel\n", _table(["step", "reached", "removed", "left", "rules"],
                                     [[r["step"], r["reached"], r["removed"], r["left"], _pairs(r["rules"])]
                                      for r in data["funnel"]]) or "No curation steps ran.",
             "\n## Deduplication\n", _table(["step", "reached", "removed", "rate"],
                                            [[d["step"], d["reached"], d["removed"], f"{d['rate']:.2%}"]
                                             for d in data["dedup"]]) or "No dedup step ran.",
             "\n## Decontamination\n", _pairs(data["decontamination"]) or "No document was removed for an eval set.",
             "\n## Opt-outs honoured\n", _opt_outs(data["opt_outs"], "robots" in data["steps_ran"]),
             *_sft_text(data.get("sft")), *_export_text(data.get("export")),
             *_preference_text(data.get("preference")),
             *_task_mix_text(data.get("task_mix")),
             "\n## Tokenizer\n", _tokenizer_text(data["tokenizer"]),
             "\n## How it was made\n", f"tokenmill {data['tokenmill']}. Command: "
             + (f"`{data['command']}`" if data["command"] else "not recorded (run from Python)")
             + _pipeline_text(data.get("pipeline_file")),
             "\nPipeline:\n\n```yaml\n" + yaml.safe_dump(data["pipeline"], sort_keys=False, allow_unicode=True) + "```\n"]
    return "\n".join(parts)


def _pipeline_text(recorded: dict | None) -> str:
    return f"\n\nPipeline file: `{recorded['path']}` (sha256 `{recorded['sha256']}`)" if recorded else ""


def _sft_text(sft: dict | None) -> list[str]:
    if not sft:
        return []
    share = lambda v: "not measured" if v is None else f"{v:.1%}"  # noqa: E731
    lines = [f"Input schemas: {_pairs(sft['schemas']) or 'none'}",
             f"Chat template: `{sft['chat_template']}` (sha256 `{sft['chat_template_hash']}`)",
             f"Examples: {sft['examples']:,}; supervised share of tokens: {share(sft['supervised_share'])}; "
             f"examples whose stop token is trained: {share(sft['stop_token_trained_share'])}",
             f"Truncated: {sft['truncated']:,} examples ({sft['supervised_tokens_lost']:,} supervised tokens lost)",
             f"Dropped: {_pairs(sft['dropped']) or 'none'}"]
    if sft.get("task_mix"):
        lines.append(f"Task mix (labelled by `tokenmill sft select`): {_pairs(dict(sorted(sft['task_mix'].items())))}")
    return ["\n## SFT examples\n", "\n".join(f"- {line}" for line in lines)]


def _preference_text(pref: dict | None) -> list[str]:
    if not pref:
        return []
    bias, margin = pref.get("length_bias") or {}, pref.get("margin") or {}
    cut, tokens = pref.get("prompt_not_prefix") or {}, pref.get("tokens") or {}
    longer = bias.get("chosen_longer_share")
    lines = [f"Pairs: {pref.get('pairs') or 0:,}" + (f"; unpaired (KTO): {_pairs(pref['unpaired'])}" if pref.get("unpaired")
                                                       else ""),
             f"Chat template: `{pref.get('chat_template')}`",
             "Length bias: " + ("no pairs" if longer is None else f"the chosen completion is longer in {longer:.1%} of "
                                f"pairs; median chosen/rejected length ratio {bias.get('median_length_ratio')}"),
             "Margins: " + (f"{margin['rated']:,} rated pairs, min {margin['min']:g}, median {margin['median']:g}, "
                            f"max {margin['max']:g}" if margin.get("rated") else "no ratings"),
             f"Prompt rendered differently alone (completion starts where they diverge): {cut.get('pairs') or 0:,} pairs",
             f"Truncated: {pref.get('truncated') or 0:,} pairs (the prompt's end and the completions' starts kept)",
             f"Tokens stored: {tokens.get('stored', 0):,}; the prompt stored once saves {tokens.get('saved_share', 0):.1%}",
             f"Dropped: {_pairs(pref['dropped']) or 'none'}"]
    return ["\n## Preference pairs\n", "\n".join(f"- {line}" for line in lines)]


def _task_mix_text(mix: dict | None) -> list[str]:
    if not mix:
        return []
    lines = [f"Selected: {_pairs(mix['selected'] or {}) or 'none'}", f"Scored: {_pairs(mix['scored'] or {}) or 'none'}"]
    if mix.get("asked"):
        lines.append(f"Asked (--mix {', '.join(f'{k}={v:g}' for k, v in mix['mix'].items())}): "
                     f"{_pairs(mix['asked'])}")
    head = (f"Prompts labelled `academic` (templated tasks: options lists, answer formats, shared templates) or `user` "
            f"(natural requests) by `{mix['rule']}`, academic at score {mix['threshold']} or above.\n")
    return ["\n## Task mix\n", head + "\n".join(f"- {line}" for line in lines)]


EXPORT_FORMATS = {"hf": "a Hugging Face `datasets` folder", "megatron": "a Megatron-LM indexed dataset (`.bin`, `.idx`)",
                  "bin": "one flat token file (nanoGPT's `.bin`)"}


def _export_text(export: dict | None) -> list[str]:
    if not export:
        return []
    shape = f"windows of {export['seq_len']:,} tokens" if export.get("seq_len") else "one sequence per document"
    form = export.get("format") or "hf"
    labels = (", with labels (-100 where no loss is taken)" if form == "hf" else ", with its loss mask (`.mask`)") \
        if export.get("labels") else ""
    return ["\n## Export\n", f"Exported as {EXPORT_FORMATS.get(form, form)}: {export['sequences']:,} sequences "
            f"({shape}), {export['tokens']:,} tokens{labels}."]


def _warnings(found: list[str]) -> list[str]:
    return ["\n## Warnings\n", "\n".join(f"- {w}" for w in found)] if found else []


def _licence_text(data: dict) -> str:
    ran = "license" in data["steps_ran"]
    counts = _known(data["licences"], "The licence step recorded no licence." if ran
                    else "No licence step ran: the licences are not known.")
    if data["license"] != "other" or not data["licences"]:
        return counts
    return (f"The kept documents state {len(data['licences'])} licences (`unknown`: none stated) and no one of them "
            f"covers {ONE_LICENCE:.0%} of the documents, so the header says `license: other`. Per licence: {counts}")


def _known(d: dict | None, absent: str) -> str:
    if d is None:
        return absent
    return _pairs(d) or "No document was kept."


def _pairs(d: dict) -> str:
    return ", ".join(f"{k} {v:,}" for k, v in d.items())


def _table(head: list[str], rows: list[list]) -> str:
    if not rows:
        return ""
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(f"{c:,}" if isinstance(c, int) else str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _opt_outs(o: dict, ran: bool) -> str:
    unknown = "none recorded" if ran else "no robots step ran"  # a step that ran is never called absent
    lines = [f"robots.txt disallowed, by crawler: {_pairs(o['robots_disallowed_by_agent']) or 'none'}",
             f"robots.txt status of every document: {_pairs(o['robots_status']) or unknown}",
             f"TDM reservations, by where they were read: {_pairs(o['tdm_reserved_by_source']) or 'none'}"]
    return "\n".join(f"- {line}" for line in lines)


def _tokenizer_text(t: dict | None) -> str:
    if not t:
        return "None: this directory holds curated documents, not tokens."
    return f"`{t['name']}` (backend {t['backend']}, vocabulary {t['vocab_size']:,}), fingerprint `{t['fingerprint']}`."


def write_datacard(out: str | Path, manifest: dict, data: dict | None = None) -> Path:
    """Write ``out/datacard.json`` and ``out/datacard.md`` (from ``data``, the card already read, when given);
    return the Markdown's path."""
    out = Path(out)
    data = card_data(out, manifest) if data is None else data
    atomic_write(out / "datacard.json", json.dumps(data, indent=2, default=str).encode() + b"\n")
    atomic_write(out / "datacard.md", render(data).encode())
    return out / "datacard.md"


def rebuild(directory: str | Path) -> Path:
    """``tokenmill card DIR``: the card again, from ``DIR/manifest.json`` and its ledger."""
    manifest = read_manifest(directory)
    return write_datacard(directory, manifest, card_for(directory, manifest))


def read_manifest(directory: str | Path) -> dict:
    """``DIR/manifest.json``, checked; ``InputError`` naming the file when it is missing or not a manifest."""
    path = Path(directory) / "manifest.json"
    if not path.is_file():
        raise InputError(f"{directory}: no manifest.json; give the output directory of a tokenmill curate or "
                            "pretrain run")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise InputError(f"{path}: not a JSON manifest ({exc})") from None
    check_manifest(manifest, path)
    return manifest
