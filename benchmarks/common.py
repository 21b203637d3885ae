"""Shared pieces of the benchmark scripts: the machine line, process-tree measurement, BENCHMARKS.md sections."""

from __future__ import annotations

import os
import platform
import re
import subprocess
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
BENCHMARKS_MD = REPO / "BENCHMARKS.md"
TITLE = "# tokenmill benchmarks\n\nEvery number below is measured by the script named in its section.\n"


def compile_sources(*roots: str | Path) -> None:
    """Byte-compile tokenmill's source before timing it: ``src`` of this checkout and each ``--src`` compared.

    An installed package comes compiled (``pip install`` writes its ``.pyc`` files, as it did for every peer
    measured here); an editable checkout is compiled by the first process that imports it, or by every process
    where ``PYTHONDONTWRITEBYTECODE`` is set, as on the machines these figures come from: 0.05-0.1 s of
    compiling in every tokenmill process (the driver, the fork server) and in none of the peers'."""
    import compileall

    for root in roots or (REPO / "src",):
        compileall.compile_dir(str(root), quiet=1)


def machine() -> str:
    """``N CPUs (model), X GiB RAM, Python V`` of this machine."""
    model = platform.processor() or ""
    for line in Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").exists() else []:
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    ram = psutil.virtual_memory().total / 2**30
    return f"{os.cpu_count()} CPUs ({model}), {ram:.0f} GiB RAM, Python {platform.python_version()}"


def run_measured(cmd: list[str], *, poll_s: float = 0.05, env: dict | None = None) -> dict:
    """Run ``cmd``; return its stdout, exit code, wall seconds and the peak memory of its process tree (MB).

    The tree (the process and all its descendants) is polled every ``poll_s`` seconds, so shorter peaks can
    be missed. ``peak_rss_mb`` sums every process's RSS, counting pages shared between processes (a forked
    worker's copy-on-write pages) once per process; ``peak_pss_mb`` sums the proportional set sizes, which
    count a shared page once in total, so it is the tree's real footprint.
    """
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    root = psutil.Process(proc.pid)
    peak_rss = peak_pss = 0
    while proc.poll() is None:
        rss, pss = _tree_memory(root)
        peak_rss, peak_pss = max(peak_rss, rss), max(peak_pss, pss)
        time.sleep(poll_s)
    out, err = proc.communicate()
    return {"stdout": out, "stderr": err, "rc": proc.returncode, "wall_s": time.perf_counter() - start,
            "peak_rss_mb": peak_rss / 2**20, "peak_pss_mb": peak_pss / 2**20}


def _tree_memory(root: psutil.Process) -> tuple[int, int]:
    try:
        procs = [root] + root.children(recursive=True)
    except psutil.NoSuchProcess:
        return 0, 0
    rss = pss = 0
    for p in procs:
        try:
            info = p.memory_full_info()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        rss += info.rss
        pss += getattr(info, "pss", info.rss)
    return rss, pss


def update_section(heading: str, body: str, *, path: Path = BENCHMARKS_MD) -> None:
    """Replace the ``## heading`` section of BENCHMARKS.md with ``body`` (appended when absent)."""
    text = path.read_text() if path.exists() else TITLE
    section = f"## {heading}\n\n{body.strip()}\n"
    pattern = re.compile(rf"^## {re.escape(heading)}\n.*?(?=^## |\Z)", re.DOTALL | re.MULTILINE)
    if pattern.search(text):
        text = pattern.sub(lambda _: section + "\n", text, count=1).rstrip() + "\n"
    else:
        text = text.rstrip() + "\n\n" + section
    path.write_text(text)


def run_per_process(cmd: list[str], *, poll_s: float = 0.1, env: dict | None = None, cwd: str | None = None) -> dict:
    """Run ``cmd``; its wall seconds, and per process of its tree (polled every ``poll_s`` seconds) the peak RSS
    (MB) and CPU seconds (user + system, as last seen: a process's final ``poll_s`` can be missed)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd)
    root = psutil.Process(proc.pid)
    rss: dict[int, int] = {}
    cpu: dict[int, float] = {}
    while proc.poll() is None:
        try:
            procs = [root] + root.children(recursive=True)
        except psutil.NoSuchProcess:
            procs = []
        for p in procs:
            try:
                with p.oneshot():
                    r, t = p.memory_info().rss, p.cpu_times()
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
            rss[p.pid] = max(r, rss.get(p.pid, 0))
            cpu[p.pid] = max(t.user + t.system, cpu.get(p.pid, 0.0))
        time.sleep(poll_s)
    out, err = proc.communicate()
    return {"stdout": out, "stderr": err, "rc": proc.returncode, "wall_s": time.perf_counter() - start,
            "cpu_s": sum(cpu.values()), "cpu_by_pid": cpu, "peak_rss_mb": {pid: v / 2**20 for pid, v in rss.items()},
            "main_rss_mb": rss.get(proc.pid, 0) / 2**20}


def stage_results(stage_dir: Path) -> list[dict]:
    """The unit results of one stage's state directory (``_state/<stage>``): its ``index.jsonl`` once the stage
    has ended, else its commit journals under ``done/``."""
    import json

    index = Path(stage_dir) / "index.jsonl"
    if index.is_file():
        return [json.loads(line)["result"] for line in index.read_text().splitlines() if line.strip()]
    from tokenmill.engine.journal import committed_results

    return [r for _, r in sorted(committed_results(Path(stage_dir) / "done").items())]


def reopen_stage(stage_dir: Path) -> Path:
    """Turn an ended stage back into what a run killed after its last commit leaves (a marker per unit under
    ``done/``, no index); return ``done/``."""
    import json

    stage_dir = Path(stage_dir)
    done = stage_dir / "done"
    done.mkdir(exist_ok=True)
    for line in (stage_dir / "index.jsonl").read_text().splitlines():
        row = json.loads(line)
        (done / f"{row['unit']}.json").write_text(json.dumps(row["result"], sort_keys=True))
    (stage_dir / "index.jsonl").unlink()
    return done
