"""What the command line reads before it starts a run's fork server stays light: ``tokenmill.job``,
``tokenmill.engine`` and ``tokenmill.tokenize`` import their names on first use (``base/lazy.py``), so the
early path (``job/early.py``) imports neither the job driver, the executors, the tokenizer adapter nor
pyarrow and numpy; and every name the packages export still resolves to the object its module defines."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest


def test_the_early_path_imports_no_driver_executor_tokenizer_or_arrow():
    probe = textwrap.dedent("""
        import sys
        from tokenmill.cli import build_parser
        build_parser("sft").parse_args(["sft", "in.jsonl"])
        import tokenmill.engine.warm, tokenmill.engine.workers, tokenmill.job.early, tokenmill.job.options
        heavy = ("tokenmill.job.driver", "tokenmill.job.inputs", "tokenmill.engine.local",
                 "tokenmill.engine.workflow", "tokenmill.tokenize.tokenizer", "pyarrow", "numpy")
        print(",".join(m for m in heavy if m in sys.modules))
    """)
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == ""


def test_every_exported_name_is_its_modules_object():
    import tokenmill.engine
    import tokenmill.job
    import tokenmill.tokenize
    from tokenmill.engine import local, stage, workflow
    from tokenmill.job import driver, inputs
    from tokenmill.tokenize import tokenizer

    for package, modules in ((tokenmill.job, (driver, inputs)), (tokenmill.engine, (local, stage, workflow)),
                             (tokenmill.tokenize, (tokenizer,))):
        assert package.__all__
        for name in package.__all__:
            owners = [m for m in modules if name in vars(m)]
            assert owners and getattr(package, name) is getattr(owners[0], name), (package.__name__, name)
    from tokenmill.job import hold_job

    assert hold_job is driver.hold_job
    assert tokenmill.engine.local is local  # a submodule by attribute


def test_an_unknown_name_is_an_attribute_error():
    import tokenmill.engine

    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        tokenmill.engine.nothing_here  # noqa: B018
    with pytest.raises(ImportError):
        from tokenmill.job import nothing_here  # noqa: F401
