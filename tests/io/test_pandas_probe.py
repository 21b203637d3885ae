"""Pool workers never import pandas through pyarrow's first ``pa.array`` probe; ``to_pandas`` still works."""

from __future__ import annotations

import multiprocessing
import sys


def _worker(queue) -> None:
    import pyarrow as pa

    from tokenmill._arrow import skip_pandas_probe

    skip_pandas_probe()
    pa.array(["a", "b"])
    pa.RecordBatch.from_pydict({"text": ["x"]})
    before = "pandas" in sys.modules
    frame = pa.table({"a": [1, 2]}).to_pandas()  # pyarrow imports pandas for real when asked for it
    queue.put((before, int(frame["a"].sum())))


def test_workers_skip_the_pandas_probe():
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_worker, args=(queue,))
    proc.start()
    before, total = queue.get(timeout=120)
    proc.join(timeout=60)
    assert before is False and total == 3


def test_the_main_process_is_left_alone():
    from tokenmill._arrow import skip_pandas_probe

    finders = list(sys.meta_path)
    skip_pandas_probe()  # not a pool worker: a user's own process keeps pyarrow's pandas checks
    assert sys.meta_path == finders


def _curate_worker(queue) -> None:
    import pyarrow as pa

    from tokenmill.curate.workflows.presets import step_specs
    from tokenmill.curate.workflows.tasks import ReadTask
    from tokenmill.steps.build import build_steps
    from tokenmill.steps.cascade import Cascade

    task = ReadTask(Cascade(tuple(build_steps(step_specs("refinedweb", None), source="steps"))), {}, "curate",
                    "documents")
    task.setup()
    docs = pa.record_batch({"id": ["1"], "text": pa.array(["Some words here.\nAnd more words."], pa.large_string()),
                            "source": ["a"], "url": ["https://example.org/"]})
    task.cascade(docs, [1])
    queue.put("pandas" in sys.modules)


def test_curate_workers_skip_the_pandas_probe():
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_curate_worker, args=(queue,))
    proc.start()
    imported = queue.get(timeout=120)
    proc.join(timeout=60)
    assert imported is False
