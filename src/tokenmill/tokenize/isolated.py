"""Load a tokenizer in a short-lived process, so a run's main process never holds its encoders.

Loading converts files (``vocab.json`` + ``merges.txt`` go through ``transformers``), builds the
reference and fast encoders and runs the parity check: for a 150k-token vocabulary that is several hundred
MB the main process of a run would otherwise keep for its whole life, while only the workers encode.
The child returns the :class:`Tokenizer` with its encoders released (its recipe and metadata travel;
the workers rebuild only what they use). Warnings raised while loading (a fast-path fallback) are
raised again in the caller.
"""

from __future__ import annotations

import multiprocessing
import os
import warnings
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from tokenmill._guard import main_is_unguarded
from tokenmill.errors import TokenizerError, TokenmillError
from tokenmill.tokenize.sources import TokenizerSpec
from tokenmill.tokenize.tokenizer import Tokenizer, load_if_checked, load_tokenizer


def _load_released(spec: TokenizerSpec, fast: bool, parity_sample: list[str] | None = None
                   ) -> tuple[Tokenizer | None, list[tuple[str, type]], str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            tok = load_tokenizer(spec, fast=fast, parity_sample=parity_sample)
        except TokenmillError as exc:
            return None, [], str(exc)
    tok.release()
    return tok, [(str(w.message), w.category) for w in caught], ""


def load_tokenizer_isolated(spec: TokenizerSpec, *, fast: bool = True, parity_sample: list[str] | None = None,
                            isolate: bool = True) -> Tokenizer:
    """:func:`load_tokenizer` run in a child process; objects (already loaded) are loaded in place.

    ``parity_sample``: texts (e.g. documents of the run's own inputs) the fast path must also agree on.
    ``isolate=False``: load in this process and keep the encoders (for a run whose only worker is this
    process: a child would only add its start-up, and this process would build the encoders again).
    A ``tokenizer.json`` tokenizer whose parity verdict is cached loads here too, building no encoder
    (:func:`~tokenmill.tokenize.tokenizer.load_if_checked`).
    """
    if not isolate or not isinstance(spec, (str, os.PathLike)) or main_is_unguarded():  # no child re-running the script
        return load_tokenizer(spec, fast=fast, parity_sample=parity_sample)
    checked = load_if_checked(spec, parity_sample=parity_sample) if fast else None
    if checked is not None:  # nothing to build or check: no child (it would wait for the fork server's start)
        return checked
    method = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
    try:
        with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context(method)) as pool:
            tok, caught, error = pool.submit(_load_released, os.fspath(spec), fast, parity_sample).result()
    except BrokenProcessPool:  # no child process possible here (e.g. a __main__ that cannot be re-imported)
        tok, caught, error = _load_released(os.fspath(spec), fast, parity_sample)
    if error or tok is None:  # the child returns a tokenizer or says why not
        raise TokenizerError(error)
    for message, category in caught:
        warnings.warn(message, category, stacklevel=2)
    return tok
