"""Worker processes for a script without an ``if __name__ == "__main__":`` guard.

Worker processes start clean (``forkserver`` or ``spawn``) and import the calling script again, as
``__mp_main__``; a script that calls ``run_pretrain`` at top level, unguarded, would start the run again in
every worker and end in multiprocessing's bootstrapping traceback. Such a script is detected up front (its
source has no top-level ``if __name__ == "__main__":``) and the run happens in the calling process with one
worker instead: the same bytes, a warning naming the guard, and no traceback.
"""

from __future__ import annotations

import ast
import sys
import warnings
from functools import lru_cache

GUARD_HINT = ('put the calls under `if __name__ == "__main__":` in {script} to use several worker '
              "processes; running in this process with one worker")


def main_script() -> str | None:
    """The file of the ``__main__`` module worker processes would import again (None: none, e.g. ``-c``)."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    path = getattr(spec, "origin", None) or getattr(main, "__file__", None)
    return path if isinstance(path, str) and path.endswith(".py") else None


@lru_cache(maxsize=8)
def _unguarded(path: str) -> bool:
    try:
        with open(path, "rb") as fh:
            tree = ast.parse(fh.read(), filename=path)
    except (OSError, SyntaxError, ValueError):
        return False  # unreadable: assume guarded, as before
    return not any(isinstance(node, ast.If) and _is_main_test(node.test) for node in tree.body)


def _is_main_test(test: ast.AST) -> bool:
    """``__name__ == "__main__"`` (either side)."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    names = {s.id for s in sides if isinstance(s, ast.Name)}
    values = {s.value for s in sides if isinstance(s, ast.Constant)}
    return names == {"__name__"} and values == {"__main__"}


def main_is_unguarded() -> bool:
    """Whether worker processes would re-run the calling script's top level."""
    script = main_script()
    return script is not None and _unguarded(script)


def allowed_workers(n: int) -> int:
    """``n``, or 1 (with a warning naming the guard) when the calling script has no ``__main__`` guard."""
    if n > 1 and main_is_unguarded():
        warnings.warn(GUARD_HINT.format(script=main_script()), RuntimeWarning, stacklevel=3)
        return 1
    return n
