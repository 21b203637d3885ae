"""A track run's fork server started as the command begins, when the run will use a pool of workers.

Before its first unit, a run on several workers waits for the fork server (``engine/local.py``) to boot: a
fresh interpreter, the track's modules and the fast encoder's build (``engine/warm.py``), together
about a second and a half on 2 cores, none of which needs the driver. The driver used to start it only once
it had read its pipeline options, imported the track and listed the inputs (0.7 s of a 44 MB run on 2
cores), while the second core idled. :func:`start_fork_server` starts it as soon as the command line is
parsed, so that its boot overlaps the driver's own work (BENCHMARKS.md, "Pretraining: 44 MB against
`datasets`").

Whether a pool will be needed is guessed from the command line and the inputs' names and sizes alone (no
file is opened, nothing is routed): a run on one worker, on another engine, with a pipeline file (which may
name other inputs, tokenizer or workers), or on inputs that are not local files starts nothing here, nor does
one whose inputs the guess puts in one unit (such a run never starts a pool). The run's own plan decides
everything else, and starts the pool as before; a wrong guess costs an idle fork server, never an output byte.
"""

from __future__ import annotations

import glob
import multiprocessing
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from tokenmill.base.inputs import HF_DATASET_MARKERS, InputFile, estimate_units, split_name

if TYPE_CHECKING:
    from tokenmill.tokenize.sources import TokenizerSpec
    from tokenmill.tokenize.tokenizer import Tokenizer

ENOUGH = 2  # files listed before the guess stops: two files are two units at least


def start_fork_server(track: str, inputs: Sequence[str], *, workers: int | None, unit_bytes: int | None,
                      tokenizer: TokenizerSpec | Tokenizer | None) -> bool:
    """Start the fork server of a ``track`` run on ``inputs`` now, if the run will start a pool (a guess);
    whether it was started. The server preloads the track's modules and builds ``tokenizer``'s fast encoder."""
    # here, not at the top: every command line imports this module (cli/__init__.py), and only a pool run needs these
    from tokenmill.engine.warm import TASK_MODULES, encoder_hint, preload_in_forkserver
    from tokenmill.engine.workers import default_workers

    if "forkserver" not in multiprocessing.get_all_start_methods() or (workers or default_workers()) < 2:
        return False
    files = local_files(inputs)
    if files is None or estimate_units(files, unit_bytes=unit_bytes) < 2:
        return False
    from multiprocessing import forkserver

    with encoder_hint(tokenizer):
        preload_in_forkserver(TASK_MODULES[track])
        forkserver.ensure_running()  # returns once the server is spawned: its imports and build go on there
    return True


def local_files(inputs: Sequence[str]) -> list[InputFile] | None:
    """Some of the files ``inputs`` name (at least :data:`ENOUGH`, or all), with their formats by name and
    their sizes; None when an input is not a local file, directory or glob (a URL, a missing path)."""
    files: list[InputFile] = []
    for given in map(str, inputs):
        if "://" in given:
            return None
        path = os.path.expanduser(given)
        if os.path.isfile(path):
            found = [path]
        elif os.path.isdir(path):
            found = _listed(path)
        elif any(c in path for c in "*?["):
            found = []
            for match in sorted(glob.iglob(path, recursive=True)):
                if os.path.basename(match).startswith((".", "_")):
                    continue
                found.extend([match] if os.path.isfile(match) else _listed(match) if os.path.isdir(match) else [])
                if len(found) >= ENOUGH:
                    break
        else:
            return None
        for p in found:
            fmt, compression = split_name(p)
            files.append(InputFile(p, p, fmt, 0 if os.path.isdir(p) else os.path.getsize(p), compression))
        if len(files) >= ENOUGH:
            break
    return files or None


def _listed(directory: str) -> list[str]:
    """Up to :data:`ENOUGH` input files below ``directory`` (hidden and ``_``-prefixed names skipped, as the
    input walk does); a saved ``datasets`` directory is one input."""
    if all(os.path.isfile(os.path.join(directory, m)) for m in HF_DATASET_MARKERS):
        return [directory]
    out: list[str] = []
    for root, dirs, names in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))
        out.extend(os.path.join(root, n) for n in sorted(names) if not n.startswith((".", "_")))
        if len(out) >= ENOUGH:
            break
    return out[:ENOUGH]
