"""Determinism at the scale points: the same bytes at 1, 2 and 4 workers, local and Ray, and after ``kill -9``.

    python benchmarks/determinism_scale.py components [--docs 1e6 4e6 16e6] [--workers 1 2 4] [--ray 1 2 4]
                                                      [--kill [local] [ray]] [--workdir DIR]
    python benchmarks/determinism_scale.py curate [--mb 200] [--workers 1 2 4] [--ray 2] [--kill [local] [ray]]
                                                  [--cluster [run] [kill]] [--node-cpus 1]
                                                  [--stages STAGE ...] [--scratch DIR] [--workdir DIR]

``components``. The graph of ``benchmarks/components_memory.py`` (``--docs`` documents, a third of them in
clusters, one chain) behind three stages run by the engine: a source stage of synthetic documents (units of
100,000 rows, each with its survivor priority: a small integer from a hash of the id, so that ties are broken by
the id), the real ``minhash_dedup.components`` stage (``ComponentsTask``) over the graph's edge files, and the
real ``minhash_dedup`` stage (``ApplyTask``: every unit's rows looked up in the labels, the ledger written). The
workflow runs twice into one output: up to the components stage, whose files (``labels-*``, ``sizes-*``,
``counts-*``) are hashed then, and again with the apply stage (the first two resumed from their indexes), whose
documents and ledger are hashed. Local: the components unit makes its per-partition calls one after the other
in one process, the apply stage's units go to the pool. Ray: each per-partition call goes to one of the
``workers`` actors. ``--kill``: at 2 workers, local (``--kill`` alone or ``--kill local``) and on Ray (``--kill
ray``), ``kill -9`` of the process group during the components stage (once a step has written labels) and
during the apply stage (some units committed), then the same run again.

``curate``. ``benchmarks/dedup_scale.py``'s crawl corpus (real pages of ``/work/shared/data`` resampled to
``--mb`` MB with 10% exact and 10% near copies), ``tokenmill curate --preset dclm`` (RefinedWeb's rules,
exact dedup, MinHash dedup, the quality model's top 10%; the model trained by ``tokenmill quality train`` on
OpenStax against NLTK web text, as ``benchmarks/dsir.py`` does) at each ``--workers`` locally and at ``--ray``
workers with ``--engine ray`` (a local Ray instance). ``--kill``: for every stage of the run (or the
``--stages`` named), the same command at 2 workers, local or with ``--engine ray`` as for ``components``,
``kill -9`` of its whole process group once the stage has committed some but not all of its units (the
commit journals under ``_state/<stage>/done/``; a one-unit stage: once its unit's staging directory exists),
then the same command again, resuming. ``--cluster``: the same command on a Ray cluster of two nodes started
here with ``ray start`` (:mod:`ray_nodes`: a head and a worker node, each with its own temp dir, ``--node-cpus``
CPUs and a custom resource named after it), ``--engine ray --ray-address HEAD:PORT --workers`` (the cluster's
CPUs); ``--cluster kill``: for each of the ``--stages`` (default ``curate_v1``) a run on a fresh two-node cluster
whose worker node's raylet is killed with SIGKILL while one of its workers is inside a unit of the stage, once
the stage has committed some but not all of its units (a one-unit stage: once its staging directory exists);
the run goes on on the head node and ends. Each cluster is torn down after its run, whatever happens: every
node's processes killed (never ``ray stop``, which would stop every Ray process of the machine), then any
process with the run's mark still alive (:func:`reap`); ``ps`` is asked for any Ray process left.
``--scratch DIR``: every local and ``--engine ray`` run after the reference (the first local one, staged in the
output as by default; not the ``--cluster`` runs) stages its units in a fresh directory under ``DIR``
(``TOKENMILL_SCRATCH``: a node's own disk; on another filesystem than the output, the commit copies each file
across), removed after each run. A kill in a one-unit stage is not seen then (the poller looks for the staging
directory in the output's state).

A killed run's processes: the command runs in a session of its own with a mark in its environment
(:data:`RUN_MARK`), which every process it starts inherits (the local pool's fork server and workers; on Ray
the GCS server, the raylet, its workers and the actors). ``kill -9`` goes to the whole process group; any
process of the session or with the mark still alive once the driver has exited (one that left the group:
Ray's raylet starts each worker in a process group of its own; or one still exiting) is killed then and
named (``left`` of the kill record), and the next run starts only once none is left.

Compared: the sha256 of every file the run leaves outside ``_state/`` (``manifest.json`` without its ``run``
entry: wall seconds, memory, the engine), and per stage the unit results of ``_state/<stage>/index.jsonl``
without what depends on the run (seconds, CPU seconds, peak memory, the process ids), all against the first
run (1 worker, local).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from common import machine
from ray_nodes import ENV as RAY_ENV
from ray_nodes import Cluster, Node, ray_processes
from tokenmill.base.segments import SCRATCH_ENV
from tokenmill.curate.dedup import common as cm
from tokenmill.curate.dedup.minhash import ComponentsTask, MinHashDedup, _plan_apply
from tokenmill.engine import Stage, StagePlan, Unit, UnitResult
from tokenmill.engine.journal import committed_results
from tokenmill.records import DOCUMENT
from tokenmill.report.accounting import Stats

UNIT_ROWS = 100_000
RUN_FIELDS = ("seconds", "cpu_seconds", "peak_rss_mb", "step_seconds")  # a unit result's fields of the run
RUN_DATA = ("processes",)  # ... and of its data


# --- what is compared -----------------------------------------------------------------------------


def file_hashes(out: Path, under: str = "") -> dict[str, tuple[str, int]]:
    """``{path: (sha256, bytes)}`` of every file below ``out/under`` outside ``_state/``; the manifest
    without its ``run`` entry."""
    got = {}
    for path in sorted((out / under).rglob("*")):
        rel = str(path.relative_to(out))
        if not path.is_file() or rel.split("/")[0] == "_state":
            continue
        data = path.read_bytes()
        if rel == "manifest.json":
            manifest = json.loads(data)
            manifest.pop("run", None)
            data = json.dumps(manifest, sort_keys=True).encode()
        got[rel] = (hashlib.sha256(data).hexdigest(), len(data))
    return got


def stage_results(out: Path) -> dict[str, tuple[str, int]]:
    """``{stage: (sha256 of its unit results without the run's fields, units)}`` from ``_state/*/index.jsonl``."""
    got = {}
    for index in sorted((out / "_state").glob("*/index.jsonl")):
        rows = []
        for line in index.read_text().splitlines():
            row = json.loads(line)
            for f in RUN_FIELDS:
                row["result"].pop(f, None)
            for f in RUN_DATA:
                row["result"].get("data", {}).pop(f, None)
            rows.append(json.dumps(row, sort_keys=True))
        got[index.parent.name] = (hashlib.sha256("\n".join(rows).encode()).hexdigest(), len(rows))
    return got


def group_of(rel: str) -> str:
    """The row of the table a file counts in: its step's folder, ``documents/``, ``ledger/``, or the run's files."""
    parts = rel.split("/")
    if parts[0] in ("steps", "_work") and len(parts) > 2:
        return f"{parts[0]}/{parts[1]}/"
    if len(parts) > 1:
        return f"{parts[0]}/"
    return "run files (manifest, report, rejects, data card)"


def compare(ref: dict, got: dict) -> dict:
    """Per group: files, bytes, and whether every file of the group is identical (same names, same bytes)."""
    groups: dict[str, dict] = {}
    for rel in sorted(set(ref) | set(got)):
        g = groups.setdefault(group_of(rel), {"files": 0, "bytes": 0, "same": True, "differ": []})
        g["files"] += 1
        g["bytes"] += (ref.get(rel) or got[rel])[1]
        if ref.get(rel) != got.get(rel):
            g["same"] = False
            g["differ"].append(rel)
    return groups


# --- components: synthetic documents over the graph -------------------------------------------------


@dataclass(frozen=True)
class SyntheticSource:
    """Unit ``u``: documents ``u * UNIT_ROWS ...`` (id and text ``d<n>``), their ledger and priorities."""

    def __call__(self, unit: Unit, staging: Path) -> UnitResult:
        lo, n = unit.index * UNIT_ROWS, unit.size
        ids = pa.array([f"d{i}" for i in range(lo, lo + n)], pa.string())
        nulls = pa.nulls(n, pa.string())
        table = pa.table({"id": ids, "text": ids.cast(pa.large_string()), "source": pa.array(["synthetic"] * n),
                          "url": nulls, "license": nulls, "meta": nulls}, schema=DOCUMENT)
        docs, ledger = f"source/docs/{unit.name}.parquet", f"source/ledger/{unit.name}.parquet"
        prio = f"_work/source/prio/{unit.name}"
        for d in ("source/docs", "source/ledger", prio):
            (staging / d).mkdir(parents=True, exist_ok=True)
        pq.write_table(table, staging / docs)
        pq.write_table(pa.table({"id": ids, "source": table.column("source"), "kept": pa.array([True] * n),
                                 "reason": nulls}), staging / ledger)
        rows = np.arange(lo, lo + n, dtype=np.uint64)
        np.save(staging / prio / "prio.npy", (cm.mix64(rows) % np.uint64(4)).astype(np.float64))
        return UnitResult(stats=Stats(input=n, kept=n), outputs=[docs, ledger],
                          data={"docs": docs, "ledger": ledger, "unit": unit.name, "rows": n, "prio": prio})


def synthetic_stages(graph: Path, docs: int, partition_edges: int) -> list[Stage]:
    """The source, components and apply stages over the graph in ``graph`` (module docstring)."""
    n_units = -(-docs // UNIT_ROWS)
    units = [Unit(u, f"unit-{u:06d}", size=min(UNIT_ROWS, docs - u * UNIT_ROWS)) for u in range(n_units)]
    step = MinHashDedup(partition_edges=partition_edges)
    edges = tuple(str(d) for d in sorted(graph.glob("g*")))

    def source(ctx):
        return StagePlan(units, SyntheticSource(), {"docs": docs})

    def components(ctx):
        prio = tuple(r.data["prio"] for r in ctx.results["source"])
        task = ComponentsTask(str(ctx.out), edges, prio, step.partition_edges, step.name)
        return StagePlan([Unit(0, "all")], task, {"graph": graph.name, "edge_files": len(edges)})

    return [Stage("source", 1, source), Stage(f"{step.name}.components", 1, components),
            Stage(step.name, step.version, lambda ctx: _plan_apply(step, "source", ctx))]


def write_graph(docs: int, graph: Path) -> dict:
    """components_memory's graph, one folder per edge file (``g<k>/parts.bin``, its columns ``a`` and ``b``) as
    the verify stage writes them."""
    from components_memory import write_graph as write

    info = write(docs, graph)
    (graph / "prio.npy").unlink()
    for a in sorted(graph.glob("a-*.npy")):
        b = graph / a.name.replace("a-", "b-")
        ends = np.load(a), np.load(b)
        cm.write_partitioned(graph / f"g{a.stem[2:]}", np.zeros(len(ends[0]), dtype=np.int64), 1,
                             {"a": ends[0], "b": ends[1]})
        a.unlink()
        b.unlink()
    return info


def components_child(graph: Path, out: Path, docs: int, partition_edges: int, engine: str, workers: int,
                     result: Path) -> None:
    """Run the synthetic workflow into ``out`` (twice: module docstring); write the hashes to ``result``."""
    from tokenmill.engine import LocalExecutor, run_workflow
    from tokenmill.engine.ray import RayExecutor

    stages = synthetic_stages(graph, docs, partition_edges)
    executor = RayExecutor(workers=workers) if engine == "ray" else LocalExecutor(workers=workers)
    started = time.perf_counter()
    with executor:
        res = run_workflow(stages[:2], out=out, fingerprint="determinism", executor=executor)
        comp = file_hashes(out, "_work/minhash_dedup/components")
        run_workflow(stages, out=out, fingerprint="determinism", executor=executor)
    (comp_result,) = res["minhash_dedup.components"]
    result.write_text(json.dumps({"components": comp, "final": file_hashes(out), "stages": stage_results(out),
                                  "seconds": time.perf_counter() - started, "rounds": comp_result.data["rounds"],
                                  "partitions": comp_result.data.get("partitions", 1),  # as_data leaves out a default 1
                                  "processes": len(comp_result.data["processes"])}))


def run_components(root: Path, docs: int, partition_edges: int, engine: str, workers: int, *,
                   kill: str | None = None) -> dict:
    """One configuration in a fresh process; with ``kill`` (a stage key), killed once in that stage first."""
    graph, out = root / f"graph-{docs}", root / f"out-{docs}-{engine}-{workers}{'-kill' if kill else ''}"
    result = out.with_suffix(".json")
    cmd = [sys.executable, __file__, "_components", str(graph), str(out), str(docs), str(partition_edges), engine,
           str(workers), str(result)]
    units = 1 if "components" in (kill or "") else -(-docs // UNIT_ROWS)
    killed = kill_in(cmd, out, kill, units, "labels-r*") if kill else None  # components: between its steps
    if killed:
        killed["engine"] = engine
    started = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-3000:])
    got = json.loads(result.read_text())
    got.update({"wall_s": time.perf_counter() - started, "killed": killed})
    shutil.rmtree(out)
    return got


# --- kill -9 ----------------------------------------------------------------------------------------


RUN_MARK = "TOKENMILL_DETERMINISM_RUN"  # in the environment of a run that is killed, and of all it starts


def kill_in(cmd: list[str], out: Path, stage: str, units: int, staged: str | None = None,
            poll_s: float = 0.005, env: dict | None = None) -> dict:
    """Start ``cmd`` in a process group of its own; ``kill -9`` the group once ``stage`` has committed some but
    not all of its ``units`` (a one-unit stage: once its unit's staging directory exists, or holds a file named
    ``staged``, a glob), then whatever of the run outlived it (:func:`reap`). Returns what was seen then."""
    mark = f"{os.getpid()}-{time.monotonic_ns()}"
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                            env={**(os.environ if env is None else env), RUN_MARK: mark})
    root = out / "_state" / stage
    seen: dict = {"stage": stage, "missed": True}
    while proc.poll() is None:
        if (root / "index.jsonl").exists():
            break
        done = len(committed_results(root / "done"))
        running = sum(_count(run) for run in (root / "tmp").glob("*")) if (root / "tmp").is_dir() else 0
        if 0 < done < units if units > 1 else running and _busy(root / "tmp", staged):
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            seen = {"stage": stage, "missed": False, "committed": done, "units": units, "running": running}
            break
        time.sleep(poll_s)
    else:
        seen["rc"] = proc.returncode
    if proc.poll() is None:
        proc.wait()
    seen["left"] = reap(mark, proc.pid)
    return seen


def reap(mark: str, session: int, wait_s: float = 30.0) -> list[str]:
    """Kill the processes of the session ``session`` or with ``RUN_MARK=mark`` in their environment that are
    still alive; wait until none is. Returns their names as first found (empty: the group's kill took all)."""
    found = _run_processes(mark, session)
    deadline = time.monotonic() + wait_s
    while (alive := _run_processes(mark, session)) and time.monotonic() < deadline:
        for pid in alive:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)
    if alive:
        raise RuntimeError(f"processes of a killed run still alive after {wait_s:g} s: {alive}")
    return sorted(found.values())


def _run_processes(mark: str, session: int) -> dict[int, str]:
    """``{pid: name}`` of the live processes (not zombies) in ``session`` or whose environment holds the mark."""
    tag = f"{RUN_MARK}={mark}".encode()
    got = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            stat = (proc / "stat").read_text()
            fields = stat[stat.rindex(")") + 2:].split()  # state, ppid, pgrp, session, ...
            if fields[0] == "Z":
                continue
            if int(fields[3]) == session or tag in (proc / "environ").read_bytes().split(b"\0"):
                got[int(proc.name)] = (proc / "comm").read_text().strip()
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
    return got


def _count(folder: Path) -> int:
    try:
        with os.scandir(folder) as it:
            return sum(1 for e in it if not e.name.endswith(".tmp"))
    except FileNotFoundError:
        return 0


def _busy(tmp: Path, name: str | None) -> bool:
    """A unit's staging directory holds a file called ``name`` (a glob; None: it exists)."""
    return name is None or any(p.is_file() for p in tmp.rglob(name))


# --- curate -------------------------------------------------------------------------------------------


def quality_model(root: Path, shared: Path) -> Path:
    import zipfile

    path = root / "quality.bin"
    if not path.exists():
        with zipfile.ZipFile(shared / "curation/quality/nltk_webtext.zip") as zf:
            zf.extractall(root / "neg")
        subprocess.run([sys.executable, "-m", "tokenmill.cli", "quality", "train", "--positive",
                        str(shared / "curation/quality/openstax_anatomy"), "--negative", str(root / "neg" / "webtext"),
                        "--text-mode", "file", "--out", str(path), "--overwrite"], check=True, capture_output=True)
    return path


def curate_cmd(corpus: Path, model: Path, out: Path, workers: int, engine: str) -> list[str]:
    return [sys.executable, "-m", "tokenmill.cli", "curate", str(corpus), "--preset", "dclm", "--quality-model",
            str(model), "--workers", str(workers), "--engine", engine, "--out", str(out), "--no-progress"]


@contextlib.contextmanager
def scratch_env(base: str | None) -> Iterator[dict[str, str]]:
    """The environment of a run: ``$TOKENMILL_SCRATCH`` set to a fresh directory under ``base`` (None: not set),
    the directory removed afterwards, whatever happens."""
    if base is None:
        yield dict(os.environ)
        return
    Path(base).mkdir(parents=True, exist_ok=True)
    scratch = tempfile.mkdtemp(prefix="tokenmill-scratch-", dir=base)
    try:
        yield {**os.environ, SCRATCH_ENV: scratch}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def run_curate(cmd: list[str], out: Path, *, env: dict | None = None,
               watch: Callable[[], bool] | None = None, poll_s: float = 0.02) -> dict:
    """Run ``cmd``; with ``watch``, call it every ``poll_s`` while the command runs, until it returns True."""
    started = time.perf_counter()
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, text=True, env=env)
        while watch is not None and proc.poll() is None and not watch():
            time.sleep(poll_s)
        if proc.wait() != 0:
            err.seek(0)
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{err.read()[-3000:]}")
    return {"final": file_hashes(out), "stages": stage_results(out), "wall_s": time.perf_counter() - started}


def stage_order(out: Path) -> list[tuple[str, int]]:
    """The stages of a finished run in the order they ran (the manifest's), with their units."""
    seconds = json.loads((out / "manifest.json").read_text())["run"]["stage_seconds"]
    units = {k: v[1] for k, v in stage_results(out).items()}
    return [(k, units[k]) for k in seconds if k in units]


# --- curate on two Ray nodes ---------------------------------------------------------------------------


@contextlib.contextmanager
def two_nodes(root: Path, cpus: int) -> Iterator[tuple[Cluster, dict]]:
    """A head and a worker node of ``cpus`` CPUs each, started with ``ray start``, and a record of them (start
    seconds; once torn down: ``left``, the processes with the nodes' mark still alive after every node's kill,
    killed then; ``ps``, the Ray processes of the machine afterwards that name a node's temp dir, and
    ``ps_others``, how many others there were: other users' Ray). Torn down whatever happens."""
    mark = f"{os.getpid()}-{time.monotonic_ns()}"
    cluster = Cluster(root, cpus=cpus, env={RUN_MARK: mark})
    record: dict = {"mark": mark}
    failed = True
    try:
        started = time.perf_counter()
        cluster.start("node_a", head=True)
        cluster.start("node_b")
        record["start_s"] = time.perf_counter() - started
        yield cluster, record
        failed = False
    finally:
        cluster.kill(keep_logs=failed)  # a failed run's node logs kept in root, for what ended it
        record["left"] = sorted({name for node in cluster.nodes for name in reap(mark, node.process.pid)})
        record["ps"] = ray_processes(tuple(str(node.temp_dir) for node in cluster.nodes))
        record["ps_others"] = len(ray_processes()) - len(record["ps"])


def node_killer(node: Node, state: Path, units: int, seen: dict) -> Callable[[], bool]:
    """A watch for :func:`run_curate`: kills ``node``'s raylet (SIGKILL) while one of its workers is inside a
    unit of the stage whose state is ``state``, once the stage has committed some but not all of its ``units``
    (a one-unit stage: once its staging directory exists); gives up once the stage has ended. What it saw goes
    into ``seen``."""
    seen.update({"stage": state.name, "missed": True})

    def watch() -> bool:
        if (state / "index.jsonl").exists():
            return True
        done = len(committed_results(state / "done"))
        ready = 0 < done < units if units > 1 else (state / "tmp").is_dir()
        raylet = node.raylet() if ready and node.busy() else None
        if raylet is None:
            return False
        raylet.kill()
        seen.update({"missed": False, "committed": done, "units": units})
        return True

    return watch


def run_on_nodes(root: Path, cmd: list[str], out: Path, cpus: int, kill: tuple[str, int] | None = None) -> dict:
    """``cmd`` (a ``curate --engine ray`` command) on a two-node cluster of its own; with ``kill`` (a stage and
    its units), the worker node's raylet killed in that stage (:func:`node_killer`)."""
    with two_nodes(root, cpus) as (cluster, record):
        env = {**os.environ, **RAY_ENV, RUN_MARK: record["mark"]}
        cmd = [*cmd, "--ray-address", cluster.address]
        seen: dict = {}
        watch = node_killer(cluster.nodes[1], out / "_state" / kill[0], kill[1], seen) if kill else None
        got = run_curate(cmd, out, env=env, watch=watch)
        got.update({"killed": seen or None, "ran_units": [n.name for n in cluster.nodes if n.ran_units()],
                    "alive": sorted(k for n in cluster.alive() for k in n if k.startswith("node_"))})
    got["cluster"] = record
    return got


# --- report -------------------------------------------------------------------------------------------


def table_rows(point: str, label: str, ref: dict, got: dict, key: str = "final") -> list[str]:
    rows = []
    for group, g in compare(ref[key], got[key]).items():
        same = "yes" if g["same"] else f"**no** ({', '.join(g['differ'][:3])})"
        rows.append(f"| {point} | {label} | {group} | {g['files']:,} | {g['bytes']:,} | {same} |")
    if key != "final":
        return rows
    stages_same = ref["stages"] == got["stages"]
    rows.append(f"| {point} | {label} | unit results of {len(ref['stages'])} stages | "
                f"{sum(n for _, n in ref['stages'].values()):,} units | | {'yes' if stages_same else '**no**'} |")
    return rows


def emit(record: dict, log: Path) -> None:
    print(json.dumps(record), flush=True)
    with open(log, "a") as fh:
        fh.write(json.dumps(record) + "\n")


def main_components(args: argparse.Namespace, root: Path) -> None:
    log = root / "components.jsonl"
    for n in (int(d) for d in args.docs):
        graph = root / f"graph-{n}"
        if not graph.exists():
            info = write_graph(n, graph)
            emit({"docs": n, "graph": info}, log)
        configs = [("local", w) for w in args.workers] + [("ray", w) for w in args.ray]
        ref = None
        for engine, w in configs:
            load = os.getloadavg()[0]
            got = run_components(root, n, args.partition_edges, engine, w)
            ref = ref or got
            rows = table_rows(f"{n / 1e6:g} M", f"{engine}, {w}", ref, got, "components") + \
                table_rows(f"{n / 1e6:g} M", f"{engine}, {w}", ref, got)
            emit({"docs": n, "engine": engine, "workers": w, "load": load, "wall_s": got["wall_s"],
                  "rounds": got["rounds"], "partitions": got["partitions"], "processes": got["processes"], "rows": rows}, log)
        for engine in args.kill:
            for stage in ("minhash_dedup.components_v1", "minhash_dedup_v1"):
                load = os.getloadavg()[0]
                got = run_components(root, n, args.partition_edges, engine, 2, kill=stage)
                label = f"{engine}, 2, kill -9 in {stage}"
                rows = table_rows(f"{n / 1e6:g} M", label, ref, got, "components") + \
                    table_rows(f"{n / 1e6:g} M", label, ref, got)
                emit({"docs": n, "kill": got["killed"], "load": load, "wall_s": got["wall_s"], "rows": rows}, log)
        shutil.rmtree(graph)


def main_curate(args: argparse.Namespace, root: Path) -> None:
    from dedup_scale import build_input

    log = root / "curate.jsonl"
    corpus = root / f"corpus-{int(args.mb)}"
    if not corpus.exists():
        emit({"corpus": build_input(corpus, args.mb, args.file_mb, Path(args.shared))}, log)
    model = quality_model(root, Path(args.shared))
    configs = [("local", w) for w in args.workers] + [("ray", w) for w in args.ray]
    ref, order = None, []
    for engine, w in configs:
        out = root / f"out-{engine}-{w}"
        load = os.getloadavg()[0]
        scratch = args.scratch if ref is not None else None
        with scratch_env(scratch) as env:
            got = run_curate(curate_cmd(corpus, model, out, w, engine), out, env=env)
        if ref is None:
            ref, order = got, stage_order(out)
        emit({"engine": engine, "workers": w, "load": load, "wall_s": got["wall_s"], "scratch": scratch,
              "rows": table_rows(f"{args.mb:g} MB", f"{engine}, {w}{scratch_label(scratch)}", ref, got)}, log)
        shutil.rmtree(out)
    if args.cluster:
        main_cluster(args, root, corpus, model, ref, dict(order), log)
    for engine in args.kill:
        for stage, units in order:
            if args.stages and stage not in args.stages:
                continue
            out = root / f"out-kill-{engine}-{stage}"
            load = os.getloadavg()[0]
            cmd = curate_cmd(corpus, model, out, 2, engine)
            with scratch_env(args.scratch) as env:
                killed = {**kill_in(cmd, out, stage, units, env=env), "engine": engine}
                got = run_curate(cmd, out, env=env)
            label = f"{engine}, 2{scratch_label(args.scratch)}, kill -9 in {stage}"
            emit({"kill": killed, "load": load, "wall_s": got["wall_s"], "scratch": args.scratch,
                  "rows": table_rows(f"{args.mb:g} MB", label, ref, got)}, log)
            shutil.rmtree(out)


def scratch_label(scratch: str | None) -> str:
    return f", staged under {scratch}" if scratch else ""


def main_cluster(args: argparse.Namespace, root: Path, corpus: Path, model: Path, ref: dict | None,
                 units: dict[str, int], log: Path) -> None:
    """The ``--cluster`` runs: a plain one, and one per kill stage (module docstring)."""
    if ref is None:
        raise SystemExit("--cluster compares with a local run first: give --workers (1 for the reference)")
    workers = 2 * args.node_cpus
    kills = [None] if "run" in args.cluster else []
    if "kill" in args.cluster:
        kills += [(stage, units[stage]) for stage in args.stages or ["curate_v1"]]
    for kill in kills:
        out = root / f"out-nodes-{kill[0] if kill else 'run'}"
        load = os.getloadavg()[0]
        got = run_on_nodes(root, curate_cmd(corpus, model, out, workers, "ray"), out, args.node_cpus, kill)
        label = f"ray on 2 nodes of {args.node_cpus} CPU, {workers}"
        if kill:
            label += f", the worker node's raylet killed in {kill[0]}"
            label += ": not killed, the worker node not seen in it (a plain run)" \
                if got["killed"]["missed"] else ""
        emit({"nodes": 2, "node_cpus": args.node_cpus, "workers": workers, "load": load, "wall_s": got["wall_s"],
              "killed": got["killed"], "ran_units": got["ran_units"], "alive_after": got["alive"],
              "cluster": got["cluster"], "rows": table_rows(f"{args.mb:g} MB", label, ref, got)}, log)
        shutil.rmtree(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["components", "curate"])
    ap.add_argument("--docs", type=float, nargs="+", default=[1e6, 4e6, 16e6])
    ap.add_argument("--partition-edges", type=int, default=500_000)
    ap.add_argument("--mb", type=float, default=200)
    ap.add_argument("--file-mb", type=float, default=32)
    ap.add_argument("--shared", default="/work/shared/data")
    ap.add_argument("--workers", type=int, nargs="*", default=[1, 2, 4])
    ap.add_argument("--ray", type=int, nargs="*", default=None)
    ap.add_argument("--kill", nargs="*", choices=["local", "ray"], default=None,
                    help="kill -9 at 2 workers, then resume: local (no value), on Ray, or both")
    ap.add_argument("--cluster", nargs="*", choices=["run", "kill"], default=None,
                    help="curate on two Ray nodes started here: a run (no value), one per --stages whose worker "
                         "node's raylet is killed, or both")
    ap.add_argument("--node-cpus", type=int, default=1, help="CPUs of each of the two nodes (--cluster)")
    ap.add_argument("--stages", nargs="*", default=None,
                    help="kill -9 (or the worker node's raylet, --cluster kill) in these stages only (curate)")
    ap.add_argument("--scratch", default=None,
                    help="curate: every run after the reference stages its units in a fresh directory here "
                         "(TOKENMILL_SCRATCH), removed after the run")
    ap.add_argument("--workdir", default=None)
    args = ap.parse_args()
    args.kill = [] if args.kill is None else args.kill or ["local"]
    args.cluster = [] if args.cluster is None else args.cluster or ["run"]
    if args.ray is None:
        args.ray = [1, 2, 4] if args.what == "components" else [2]
    root = Path(args.workdir or tempfile.mkdtemp(prefix="tokenmill-determinism-"))
    root.mkdir(parents=True, exist_ok=True)
    print(json.dumps({"machine": machine(), "load": os.getloadavg()[0], "workdir": str(root)}), flush=True)
    (main_components if args.what == "components" else main_curate)(args, root)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_components":
        a = sys.argv[2:]
        components_child(Path(a[0]), Path(a[1]), int(a[2]), int(a[3]), a[4], int(a[5]), Path(a[6]))
    else:
        main()
