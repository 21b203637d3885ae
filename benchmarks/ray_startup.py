"""A tiny input on the local engine and on a Ray cluster already started (``--ray-address auto``), side by side.

    python benchmarks/ray_startup.py [--before /tmp/before/src] [--reps 3] [--niceness 0] [--write]

Input: the first 40 documents (87 KB) of the crawl corpus (``benchmarks/crawl_corpus.py``), one JSONL file;
quality model: trained like ``benchmarks/funnel_scale.py``'s (or ``--model``). For each source tree (this
checkout's ``src``, and with ``--before`` another one, e.g. ``git archive main src | tar -x -C /tmp/before``),
a cluster is started with ``ray start --head --block --num-cpus 2`` (its workers import that tree), then
``tokenmill curate TINY --preset dclm --quality-model M --workers 2`` (12 stages) and ``tokenmill pretrain
TINY --tokenizer default --workers 2`` run ``--reps`` times each, alternating the local engine and
``--engine ray --ray-address auto``; the cluster is stopped by ending its ``ray start`` process. Reported:
median wall seconds, Ray's extra over local, and whether anything but tokenmill's own lines reached
stdout/stderr. ``--niceness N`` starts the cluster with ``RAY_worker_niceness=N`` (Ray's default is 15: its
workers run at the lowest priority but one, which on a machine shared with other jobs slows the actors and
not the local engine's workers, which run at the normal priority).
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import REPO, machine, update_section  # noqa: E402

HEADING = "Ray: a tiny input on a cluster already started, local vs --engine ray"
RAY = str(Path(sys.executable).with_name("ray"))
PORT = 6391
OURS = re.compile(r"^(curate|funnel|  |input |rewritten|ledger|report|manifest|pretrain|tokenizer|shards|kept|"
                  r"wrote|val|split|\s*$)")


def start_cluster(src: str, niceness: int | None) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": src}
    if niceness is not None:
        env["RAY_worker_niceness"] = str(niceness)
    proc = subprocess.Popen([RAY, "start", "--head", "--block", "--port", str(PORT), "--num-cpus", "2",
                             "--include-dashboard=false", "--disable-usage-stats"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", PORT)) == 0:
                time.sleep(3)  # the raylet registers after the GCS listens
                return proc
        time.sleep(0.5)
    proc.terminate()
    raise SystemExit("the Ray cluster did not start")


def stop_cluster(proc: subprocess.Popen) -> None:
    proc.terminate()  # `ray start --block` ends the cluster's processes as it exits
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
    current = Path(tempfile.gettempdir()) / "ray" / "ray_current_cluster"  # `ray stop` removes it; so must we:
    if current.is_file() and current.read_text().strip().endswith(f":{PORT}"):  # a plain ray.init() would try
        current.unlink()  # to join the cluster it names, gone now


def run(cmd: list[str], src: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_AUTH_MODE")}
    env["PYTHONPATH"] = src
    t0 = time.perf_counter()
    got = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if got.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed: {got.stderr[-3000:]}")
    foreign = [ln for ln in (got.stdout + got.stderr).splitlines() if not OURS.match(ln)]
    return {"wall": wall, "foreign": foreign}


def measure(src: str, tiny: Path, model: str, work: Path, reps: int) -> dict:
    cli = [sys.executable, "-m", "tokenmill.cli"]
    cmds = {"curate": ["curate", str(tiny), "--preset", "dclm", "--quality-model", model],
            "pretrain": ["pretrain", str(tiny), "--tokenizer", "default"]}
    engines = {"local": [], "ray": ["--engine", "ray", "--ray-address", "auto"]}
    got: dict = {(c, e): [] for c in cmds for e in engines}
    for rep in range(reps):
        for c, args in cmds.items():
            for e, extra in engines.items():
                out = work / f"{c}-{e}-{rep}"
                got[(c, e)].append(run([*cli, *args, "--out", str(out), "--workers", "2", "--no-progress", *extra], src))
    return {k: {"wall": statistics.median(r["wall"] for r in v), "walls": [r["wall"] for r in v],
                "foreign": sorted({ln for r in v for ln in r["foreign"]})} for k, v in got.items()}


def report(rows: list[tuple[str, dict]], args: argparse.Namespace, load: tuple) -> str:
    lines = [f"`python benchmarks/ray_startup.py{' --before BEFORE/src' if args.before else ''} --reps {args.reps}"
             f"{f' --niceness {args.niceness}' if args.niceness is not None else ''}` ({machine()}; load average "
             f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} at the start, shared with other jobs). Input: 40 documents "
             "(87 KB) of crawl text, one file; a cluster of 2 CPUs started with `ray start --head` before the runs; "
             f"median of {args.reps} runs each, local and Ray alternating.", "",
             "| tree | command | local s | `--engine ray --ray-address auto` s | Ray's extra s | lines not tokenmill's |",
             "|---|---|---:|---:|---:|---|"]
    for tree, got in rows:
        for c in ("curate", "pretrain"):
            loc, ray = got[(c, "local")], got[(c, "ray")]
            foreign = "; ".join(f"`{ln[:90]}`" for ln in ray["foreign"][:3]) or "none"
            lines.append(f"| {tree} | {c} | {loc['wall']:.1f} | {ray['wall']:.1f} | "
                         f"{ray['wall'] - loc['wall']:+.1f} | {foreign} |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--before", help="the src directory of the tree to compare with (e.g. main's)")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--niceness", type=int, help="RAY_worker_niceness of the cluster (Ray's default: 15)")
    p.add_argument("--shared", default=str(REPO.parent / "shared" / "data"))
    p.add_argument("--model", help="a quality model to use instead of training one")
    p.add_argument("--write", action="store_true", help="write the section of BENCHMARKS.md")
    args = p.parse_args(argv)
    from crawl_corpus import write_corpus
    from funnel_scale import train_model

    trees = ([("before", args.before)] if args.before else []) + [("after (this tree)", str(REPO / "src"))]
    rows = []
    with tempfile.TemporaryDirectory(prefix="tokenmill-ray-") as tmp:
        work = Path(tmp)
        model = args.model or train_model(Path(args.shared), work)
        write_corpus(work / "crawl.jsonl", shared=Path(args.shared), mb=0.2)
        tiny = work / "tiny.jsonl"
        with open(work / "crawl.jsonl") as src, open(tiny, "w") as dst:
            dst.writelines(line for _, line in zip(range(40), src))
        load = os.getloadavg()
        for tree, src in trees:
            cluster = start_cluster(src, args.niceness)
            try:
                rows.append((tree, measure(src, tiny, model, work / tree.split()[0], args.reps)))
            finally:
                stop_cluster(cluster)
            print(tree, {f"{c}/{e}": v["walls"] for (c, e), v in rows[-1][1].items()}, flush=True)
    body = report(rows, args, load)
    print(body)
    if args.write:
        update_section(HEADING, body)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
