"""``tokenmill synth`` against a real OpenAI-compatible server (``transformers serve`` over a tiny local
model): outputs, provenance, the cache, resume after a kill, a server that stops, clear errors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("torch")
pytest.importorskip("httpx")

sys.path.insert(0, str(Path(__file__).parent))
import tinyserver  # noqa: E402

import statekit
from tokenmill.errors import ServerError  # noqa: E402
from tokenmill.synth.client import Client, Generation  # noqa: E402
from tokenmill.synth.distill import distill  # noqa: E402
from tokenmill.synth.rephrase import rephrase  # noqa: E402

LONG = "\n\n".join(f"Paragraph {i} talks about rivers and mountains in some detail, at length." for i in range(40))


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    return tinyserver.build_model(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(scope="module")
def server(model):
    with tinyserver.serve(model) as (url, _):
        yield url


def _client(server, model, tmp_path, **kw) -> Client:
    return Client(server, str(model), Generation(max_tokens=kw.pop("max_tokens", 64)), concurrency=4,
                  cache_dir=tmp_path / "cache", retries=1, backoff=0.05, **kw)


def _docs(tmp_path: Path) -> Path:
    f = tmp_path / "web.jsonl"
    rows = [{"id": "a", "text": "Short page about a river. " * 20}, {"id": "b", "text": LONG},
            {"id": "c", "text": "Another page, about mountains. " * 20}]
    f.write_text("".join(json.dumps(r) + "\n" for r in rows) + "not json\n")
    return f


def test_rephrase_writes_documents_with_provenance(server, model, tmp_path):
    m = rephrase([str(_docs(tmp_path))], out=tmp_path / "out", client=_client(server, model, tmp_path),
                 style="qa", chunk_chars=500, progress=False)
    assert m["counts"]["kept"] == 3 and m["counts"]["rejected"] == {"malformed_json": 1}
    table = pq.read_table(tmp_path / "out" / "documents" / "part-000000.parquet").to_pylist()
    assert [r["id"] for r in table] == ["a#qa", "b#qa", "c#qa"]
    meta = json.loads(table[1]["meta"])
    assert meta["synthetic"] and meta["source_id"] == "b" and meta["style"] == "qa" and meta["pieces"] > 1
    assert meta["model"] == str(model) and len(meta["prompt_sha256"]) == 64 and meta["params"]["max_tokens"] == 64
    assert table[1]["text"].count(tinyserver.ANSWER) == meta["pieces"]  # pieces joined back in order
    assert m["usage_this_run"]["completion_tokens"] > 0


def test_cache_makes_a_rerun_elsewhere_free(server, model, tmp_path):
    docs = str(_docs(tmp_path))
    rephrase([docs], out=tmp_path / "one", client=_client(server, model, tmp_path), progress=False)
    again = _client(server, model, tmp_path)
    m = rephrase([docs], out=tmp_path / "two", client=again, progress=False)
    assert again.usage.requests == again.usage.cached > 0 and m["usage_this_run"]["completion_tokens"] == 0
    a, b = (tmp_path / d / "documents" / "part-000000.parquet" for d in ("one", "two"))
    assert a.read_bytes() == b.read_bytes()


def test_cut_answers_are_counted_not_kept(server, model, tmp_path):
    m = rephrase([str(_docs(tmp_path))], out=tmp_path / "out", client=_client(server, model, tmp_path, max_tokens=2),
                 progress=False)
    assert m["counts"]["kept"] == 0 and m["counts"]["filtered"] == {"synth_truncated": 3}


def test_distill_keeps_matching_traces_with_reasoning(server, model, tmp_path):
    f = tmp_path / "gsm.jsonl"
    rows = [{"question": "What is 6 + 7?", "answer": "6 + 7 = 13\n#### 13"},
            {"question": "What is 3 + 4?", "answer": "#### 7"},
            {"messages": [{"role": "user", "content": "Say something."}]},
            {"other": 1}]
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    m = distill([str(f)], out=tmp_path / "out", client=_client(server, model, tmp_path), samples=2, progress=False)
    c = m["counts"]
    assert (c["kept"], c["filtered"], c["rejected"]) == (2, {"synth_wrong_answer": 1}, {"missing_field": 1})
    recs = [json.loads(x) for x in (tmp_path / "out" / "conversations" / "part-000000.jsonl").read_text().splitlines()]
    assert recs[0]["messages"][1] == {"role": "assistant", "content": "So the answer is 13",
                                      "reasoning_content": "add six and seven"}
    assert recs[0]["meta"]["answer_checked"] and not recs[1]["meta"]["answer_checked"]
    # the output goes through the SFT track unchanged
    from tokenmill.sft.run import run_sft

    sft = run_sft([str(tmp_path / "out" / "conversations")], out=tmp_path / "shards", workers=1, verify=0,
                  progress=False)
    assert sft["counts"]["kept"] == 2


def test_unknown_model_and_unreachable_server_are_clear_errors(server, model, tmp_path):
    with pytest.raises(ServerError, match="does not serve model 'nope'.*serves"):
        Client(server, "nope", cache_dir=tmp_path).check()
    port = tinyserver.free_port()
    t = time.monotonic()
    with pytest.raises(ServerError, match="cannot reach"):
        Client(f"http://127.0.0.1:{port}", "m", cache_dir=tmp_path).check()
    assert time.monotonic() - t < 10


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "tokenmill.cli", *args]


def _env(tmp_path: Path) -> dict:
    src = str(Path(__file__).resolve().parents[2] / "src")
    return {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", ""),
            "TOKENMILL_CACHE": str(tmp_path / "cache")}


def _many_docs(tmp_path: Path, n: int = 12) -> Path:
    f = tmp_path / "many.jsonl"
    f.write_text("".join(json.dumps({"id": f"d{i}", "text": f"Document {i} " + "words here. " * 100}) + "\n"
                         for i in range(n)))
    return f


def test_killed_run_resumes_to_the_same_bytes(server, model, tmp_path):
    docs = _many_docs(tmp_path)
    base = ["synth", "rephrase", str(docs), "--server", server, "--model", str(model), "--unit-bytes", "2KB",
            "--concurrency", "1", "--no-progress", "--max-tokens", "64"]
    env = _env(tmp_path)
    proc = subprocess.Popen(_cli(*base, "--out", str(tmp_path / "killed")), env=env)
    done = tmp_path / "killed" / "_state" / "synth_rephrase_v1" / "done"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not statekit.count(done):
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert subprocess.run(_cli(*base, "--out", str(tmp_path / "killed")), env=env).returncode == 0
    assert subprocess.run(_cli(*base, "--out", str(tmp_path / "clean")), env=env).returncode == 0
    parts = sorted(p.name for p in (tmp_path / "clean" / "documents").iterdir())
    assert len(parts) > 2
    for name in parts:
        assert (tmp_path / "killed" / "documents" / name).read_bytes() == (tmp_path / "clean" / "documents" / name).read_bytes()


def test_server_stopped_mid_run_is_a_clear_error_and_keeps_finished_units(model, tmp_path):
    docs = _many_docs(tmp_path, 30)
    with tinyserver.serve(model) as (url, server_proc):
        cmd = _cli("synth", "rephrase", str(docs), "--server", url, "--model", str(model), "--unit-bytes", "2KB",
                   "--concurrency", "1", "--no-progress", "--retries", "1", "--timeout", "10", "--out", str(tmp_path / "o"))
        proc = subprocess.Popen(cmd, env=_env(tmp_path), stderr=subprocess.PIPE, text=True)
        done = tmp_path / "o" / "_state" / "synth_rephrase_v1" / "done"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not statekit.count(done):
            time.sleep(0.05)
        server_proc.kill()
        _, err = proc.communicate(timeout=120)
    assert proc.returncode != 0
    assert "stopped answering" in err and "Traceback" not in err
    assert statekit.count(done)


def test_rephrase_into_s3_gives_the_bytes_of_a_local_run(server, model, tmp_path):
    """Its stages read each other's units: the run is made in the work directory and published when it ends
    (moto in server mode; s3fs talks HTTP to it), the same documents as a local run, the manifest last."""
    moto_server = pytest.importorskip("moto.moto_server.threaded_moto_server", reason="moto[server] is not installed")
    s3fs = pytest.importorskip("s3fs", reason="s3fs is not installed (pip install 'tokenmill[s3]')")
    from tokenmill.engine.store import RemoteOutput

    moto = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    try:
        host, port = moto.get_host_and_port()
        options = {"endpoint_url": f"http://{host}:{port}", "key": "testing", "secret": "testing"}
        fs = s3fs.S3FileSystem(**options, skip_instance_cache=True)
        fs.mkdir("synth")
        docs = [str(_docs(tmp_path))]
        rephrase(docs, out=tmp_path / "local", client=_client(server, model, tmp_path), style="qa", progress=False)
        out = RemoteOutput("s3://synth/run", storage_options=options, work_dir=tmp_path / "work")
        m = rephrase(docs, out=out, client=_client(server, model, tmp_path), style="qa", progress=False)
        fs.invalidate_cache()
        remote = {k[len("synth/run/"):]: fs.cat_file(k) for k in fs.find("synth/run")}
    finally:
        moto.stop()
    local = {str(p.relative_to(tmp_path / "local")): p.read_bytes() for p in (tmp_path / "local" / "documents").rglob("*")
             if p.is_file()}
    assert local and {k: remote.get(k) for k in local} == local
    assert json.loads(remote["manifest.json"])["counts"] == m["counts"]


def test_limit_reads_only_the_first_records_of_every_input(server, model, tmp_path):
    """``--limit N``: the job flag every command takes; a trial run of synth asks the server about N records."""
    from tokenmill.cli import main

    docs = _docs(tmp_path)  # three documents, then a line that is not JSON
    out = tmp_path / "out"
    assert main(["synth", "rephrase", str(docs), "--server", server, "--model", str(model), "--out", str(out),
                 "--limit", "2", "--no-progress", "--max-tokens", "16", "--cache-dir", str(tmp_path / "cache")]) == 0
    m = json.loads((out / "manifest.json").read_text())
    assert m["counts"]["input"] == 2 and m["counts"]["kept"] == 2 and m["config"]["limit"] == 2
    ids = {i for p in (out / "documents").iterdir() for i in pq.read_table(p, columns=["id"]).column("id").to_pylist()}
    assert {i.split("#")[0].split(":")[0] for i in ids} == {"a", "b"}
