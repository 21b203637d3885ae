"""Keep pyarrow from importing pandas in worker processes.

The first time ``pa.array`` sees a Python list, pyarrow imports pandas only to ask whether the list is a
pandas object: 0.4 s of a worker's start-up on an idle 2-core machine (1.7 s under load), and about 60 MB
of RSS, for a library tokenmill's workers never use. :func:`skip_pandas_probe` answers that first
question with pandas unavailable. pyarrow asks again, and imports pandas for real, when a caller
converts to pandas (``to_pandas``); only its "is this a pandas object?" checks keep answering no, so it is
called in pool workers and in the ``tokenmill`` command's own process, never in a user's process that imports
tokenmill as a library.
"""

from __future__ import annotations

import multiprocessing
import sys


class _NoPandas:
    """A meta-path finder under which ``import pandas`` raises ImportError."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == "pandas" or name.startswith("pandas."):
            raise ImportError("pandas is hidden from pyarrow's probe in this worker")
        return None


def skip_pandas_probe(*, command: bool = False) -> None:
    """In a pool worker whose pandas is not imported yet, let pyarrow's first probe find no pandas.
    ``command``: this is the ``tokenmill`` command's process (no user code runs in it), skip it here too."""
    if "pandas" in sys.modules or (multiprocessing.parent_process() is None and not command):
        return
    import pyarrow as pa

    finder = _NoPandas()
    sys.meta_path.insert(0, finder)
    try:
        pa.array([0])  # pyarrow's probe runs here, once per process
    finally:
        sys.meta_path.remove(finder)
