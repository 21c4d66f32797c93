"""The OpenAI-compatible endpoint coder against a real HTTP server on 127.0.0.1.

The server is the project's own test server (``tests/generate/openai_server.py``), serving the tiny
local model with transformers: ``transformers serve`` needs fastapi, uvicorn and openai, which are not
dependencies of bayespass, so it cannot run offline here.  Generation is real; failures (429, 5xx,
malformed bodies, servers that ignore ``n``, a killed server) are injected by server options.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import bayespass as bp  # noqa: E402
from bayespass.generate.endpoint import EndpointError, OpenAICompatibleCoder, _retry_after  # noqa: E402
from bayespass.generate.hf import generate_to_jsonl  # noqa: E402
from bayespass.generate.tiny import build_tiny_model  # noqa: E402

pytestmark = pytest.mark.hf
SERVER = Path(__file__).with_name("openai_server.py")
ENV = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """The test server in a subprocess (start, kill, restart on the same port)."""

    def __init__(self, tiny, tmp_path, *opts, port=None, start=True):
        self.tiny, self.opts, self.port = tiny, list(opts), port or _free_port()
        self.log = tmp_path / f"server-{self.port}.log"
        self.proc = None
        if start:
            self.start()

    def start(self):
        self.proc = subprocess.Popen([sys.executable, str(SERVER), str(self.tiny), "--port", str(self.port),
                                      "--log", str(self.log), *self.opts], env=ENV, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True)
        line = self.proc.stdout.readline()  # blocks until the model is loaded and the socket listens
        assert line.startswith("READY"), line

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}/v1"

    def requests(self):
        return [json.loads(x) for x in self.log.read_text().splitlines()] if self.log.exists() else []

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()


@pytest.fixture
def server(tiny, tmp_path):
    made = []

    def make(*opts):
        made.append(Server(tiny, tmp_path, *opts))
        return made[-1]

    yield make
    for s in made:
        s.kill()


def _keys(recs):
    return Counter((r["task_id"], r["temperature"], r["sample"]) for r in recs)


def test_n_per_request_fields_and_seeds(server, suite):
    srv = server()
    coder = OpenAICompatibleCoder(srv.url, "tiny-llama", max_new_tokens=16, concurrency=3)
    tasks = list(suite.tasks)[:3]
    recs = coder.generate(suite, 4, temperature=0.8, seed=3, tasks=tasks)
    assert coder.api == "completions" and coder.n_supported is True  # tiny-llama is a base model (models/*.json)
    log = srv.requests()
    assert len(log) == 3 and all(r["n"] == 4 for r in log)  # one request per task, n = K
    assert [(r["task_id"], r["sample"]) for r in recs] == [(t, s) for t in tasks for s in range(4)]
    for r in recs:
        assert {"completion", "solution", "raw", "finish_reason", "prompt_tokens", "completion_tokens", "latency",
                "n_tokens", "mean_logprob", "model", "temperature"} <= set(r)
        assert 1 <= r["n_tokens"] <= 16 and np.isfinite(r["mean_logprob"]) and r["mean_logprob"] < 0
        assert r["prompt_tokens"] > 10 and r["finish_reason"] in ("stop", "length")
        assert isinstance(r["solution"], str) and r["completion"] in r["raw"]
    assert len({s["seed"] for s in log}) == 3  # a seed per task
    again = coder.generate(suite, 4, temperature=0.8, seed=3, tasks=tasks[::-1])
    assert sorted((r["task_id"], r["sample"], r["raw"]) for r in again) == \
        sorted((r["task_id"], r["sample"], r["raw"]) for r in recs)  # the seed reproduces the samples


def test_server_that_ignores_n_is_asked_once_per_sample(server, suite):
    srv = server("--no-n")
    coder = OpenAICompatibleCoder(srv.url, "tiny-llama", max_new_tokens=8, concurrency=4)
    tasks = list(suite.tasks)[:5]
    recs = coder.generate(suite, 3, temperature=1.0, seed=0, tasks=tasks)
    assert coder.n_supported is False
    assert _keys(recs) == Counter({(t, 1.0, s): 1 for t in tasks for s in range(3)})
    log = srv.requests()
    assert len(log) == 15 and log[0]["n"] == 1  # the first asked n=3 and got one choice; then one per sample
    assert len({r["seed"] for r in log}) == 15  # each sample its own seed, so they are not copies
    assert len({r["raw"] for r in recs}) > 10


def test_retries_on_429_and_5xx_honour_retry_after_and_are_reported(server, suite, tmp_path):
    srv = server("--fail", "429,500,503", "--retry-after", "1.0")
    out = tmp_path / "s.jsonl"
    res = subprocess.run([sys.executable, "-m", "bayespass.cli", "generate", "--endpoint", srv.url, "--model",
                          "tiny-llama", "--k", "2", "--tasks", "3", "--max-new-tokens", "8", "--out", str(out)],
                         env=ENV, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "3 retried (429: 1, 500: 1, 503: 1)" in res.stderr
    log = srv.requests()
    assert [r["status"] for r in log[:4]] == [429, 500, 503, 200]
    assert log[1]["t"] - log[0]["t"] >= 1.0  # waited as Retry-After said (a lower bound: never flaky)
    recs = [json.loads(x) for x in out.read_text().splitlines()]
    assert _keys(recs) == Counter({(t, 0.8, s): 1 for t in list(suite.tasks)[:3] for s in range(2)})


def test_gives_up_after_max_retries_with_a_clear_error(server, suite):
    srv = server("--fail", "500,500,500,500")
    coder = OpenAICompatibleCoder(srv.url, "tiny-llama", max_new_tokens=8, max_retries=2, backoff=0.01)
    with pytest.raises(EndpointError, match=r"gave up on task HumanEval/0 .* after 3 tries \(last: HTTP 500"):
        coder.generate(suite, 2, temperature=0.8, tasks=["HumanEval/0"])
    assert coder.stats["retry_500"] == 3
    port = _free_port()  # nothing behind the URL (a typo, a server not started): said at once, not retried 84 s
    closed = OpenAICompatibleCoder(f"http://127.0.0.1:{port}/v1", "tiny-llama")
    with pytest.raises(EndpointError, match=rf"nothing answers at http://127.0.0.1:{port}/v1 \(\[Errno \d+\] .*\): "
                                            r"is the server running, and does the URL end in /v1 .*No sample was "):
        closed.generate(suite, 1, temperature=0.8, tasks=["HumanEval/1"])
    assert closed.stats["retries"] == 0 and closed.stats["requests"] == 0


def test_a_server_still_loading_is_waited_for(tiny, suite, tmp_path):
    port = _free_port()  # vLLM keeps its port closed while it loads the model: connections are refused
    url = f"http://127.0.0.1:{port}/v1"
    brief = OpenAICompatibleCoder(url, "tiny-llama", wait_for_server=0.2)
    with pytest.raises(EndpointError, match=r"nothing answers at .*No sample was asked for; waited 0.2 s"):
        brief.generate(suite, 1, temperature=0.8, tasks=["HumanEval/1"])
    assert brief.stats["waits"] >= 1 and brief.stats["requests"] == 0
    with pytest.raises(EndpointError, match=r"a server still loading its model: --wait-for-server SECONDS"):
        OpenAICompatibleCoder(url, "tiny-llama").check_reachable()
    out = tmp_path / "s.jsonl"
    proc = subprocess.Popen(_gen_cmd(url, out, "--wait-for-server", "600"), env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    srv = Server(tiny, tmp_path, port=port, start=False)
    try:
        said = ""
        while "waiting up to" not in said:  # until the client says it waits (or ends: readline then gives "")
            line = proc.stderr.readline()
            said += line
            if not line:
                break
        assert f"waiting up to 600 s for a server at {url} ([Errno 111] Connection refused" in said, said[-2000:]
        srv.start()  # the server comes up while the client waits
        _, err = proc.communicate(timeout=600)
    finally:
        srv.kill()
        if proc.poll() is None:  # a failed check above: end the client and close its pipes
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err[-2000:]
    recs = [json.loads(x) for x in out.read_text().splitlines()]
    assert _keys(recs) == Counter({(t, 0.8, s): 1 for t in list(suite.tasks)[:20] for s in range(4)})


def test_answer_cut_mid_body_is_retried(server, suite):
    srv = server("--fail", "cut,cut")  # what a server killed while writing its answer leaves
    coder = OpenAICompatibleCoder(srv.url, "tiny-llama", max_new_tokens=8, backoff=0.01)
    recs = coder.generate(suite, 2, temperature=0.8, tasks=["HumanEval/0"])
    assert [r["sample"] for r in recs] == [0, 1] and coder.stats["retry_connection"] == 2
    assert [r["status"] for r in srv.requests()[:3]] == ["cut", "cut", 200]
    once = OpenAICompatibleCoder(server("--fail", "cut").url, "tiny-llama", max_new_tokens=8, max_retries=0)
    with pytest.raises(EndpointError, match=r"after 1 tries \(last: connection broken mid-answer"):
        once.generate(suite, 1, temperature=0.8, tasks=["HumanEval/1"])


def test_malformed_response_names_the_task_and_request(server, suite, tmp_path):
    srv = server("--malformed", "def truncate_number")  # HumanEval/2's prompt
    coder = OpenAICompatibleCoder(srv.url, "tiny-llama", max_new_tokens=8, concurrency=1)
    out = tmp_path / "s.jsonl"
    with pytest.raises(EndpointError, match=r"malformed response from .*/v1/completions for task HumanEval/2 "
                                            r"\(samples 0\.\.1, n=2, T=0\.8\): no 'choices' list"):
        generate_to_jsonl(coder, suite, out, k=2, temperature=0.8, tasks=list(suite.tasks)[:4], progress=False)
    saved = {json.loads(x)["task_id"] for x in out.read_text().splitlines()}
    assert {"HumanEval/0", "HumanEval/1"} <= saved and "HumanEval/2" not in saved  # what arrived is kept
    res = subprocess.run([sys.executable, "-m", "bayespass.cli", "generate", "--endpoint", srv.url, "--model",
                          "tiny-llama", "--k", "2", "--tasks", "4", "--max-new-tokens", "8", "--out",
                          str(tmp_path / "t.jsonl")], env=ENV, capture_output=True, text=True, timeout=600)
    assert res.returncode != 0 and "HumanEval/2" in res.stderr and "Traceback" not in res.stderr


def _intact(path):
    """Records of the complete lines (a SIGKILL may tear the last one; the coder drops it on resume)."""
    out = []
    for line in path.read_text().splitlines(keepends=True):
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            break
    return out


def _gen_cmd(url, out, *extra):
    return [sys.executable, "-m", "bayespass.cli", "generate", "--endpoint", url, "--model", "tiny-llama",
            "--k", "4", "--tasks", "20", "--max-new-tokens", "12", "--concurrency", "2", "--seed", "9",
            "--out", str(out), *extra]


def _wait_lines(path, n, proc, limit=300):
    deadline = time.time() + limit
    while time.time() < deadline and proc.poll() is None:
        if path.exists() and path.read_text().count("\n") >= n:
            return
        time.sleep(0.05)


def test_server_killed_and_restarted_mid_run(server, suite, tmp_path):
    srv = server("--no-n")  # one request per sample: many requests, so the kill lands mid-run
    out = tmp_path / "s.jsonl"
    proc = subprocess.Popen(_gen_cmd(srv.url, out), env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    _wait_lines(out, 10, proc)
    srv.kill()
    n_mid = out.read_text().count("\n")
    time.sleep(1.5)  # the client retries against a dead server meanwhile
    srv.start()
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-2000:]
    assert 10 <= n_mid < 80
    recs = [json.loads(x) for x in out.read_text().splitlines()]
    assert _keys(recs) == Counter({(t, 0.8, s): 1 for t in list(suite.tasks)[:20] for s in range(4)})
    assert "connection" in err  # the refused connections were retried and reported


def test_client_killed_and_rerun_asks_only_for_what_is_missing(server, suite, tmp_path):
    srv = server("--no-n")
    out = tmp_path / "s.jsonl"
    proc = subprocess.Popen(_gen_cmd(srv.url, out), env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_lines(out, 10, proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    first = _intact(out)
    assert 10 <= len(first) < 80
    time.sleep(0.5)  # the server finishes what the killed client had in flight
    t_rerun = time.time()
    res = subprocess.run(_gen_cmd(srv.url, out), env=ENV, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    recs = [json.loads(x) for x in out.read_text().splitlines()]
    assert _keys(recs) == Counter({(t, 0.8, s): 1 for t in list(suite.tasks)[:20] for s in range(4)})
    asked = sum(r["t"] >= t_rerun for r in srv.requests())
    assert asked == 80 - len(first)  # exactly the missing samples, each asked for once


def test_logprobs_absent_are_noted_in_the_dataset(server, suite):
    srv = server("--no-logprobs")
    coder = OpenAICompatibleCoder(srv.url, "tiny-llama", max_new_tokens=8)
    recs = coder.generate(suite, 2, temperature=0.8, tasks=list(suite.tasks)[:2])
    assert all("mean_logprob" not in r for r in recs)
    ds = bp.execute(recs, bp.load_suite("humaneval"), progress=False)
    assert "mean_logprob" not in ds and "no sample carries a mean token log-probability" in ds.attrs[
        "mean_logprob_note"]


def test_run_end_to_end_with_an_api_key_that_is_never_written(server, tmp_path):
    secret = "sk-test-7f3a9c-never-on-disk"
    srv = server("--api-key", secret)
    out = tmp_path / "run"
    res = subprocess.run([sys.executable, "-m", "bayespass.cli", "run", "--endpoint", srv.url, "--model",
                          "tiny-llama", "--quick", "--max-new-tokens", "16", "--out", str(out)],
                         env=dict(ENV, OPENAI_API_KEY=secret), capture_output=True, text=True, timeout=1200)
    assert res.returncode == 0, res.stderr[-3000:]
    counts = bp.read_counts(out / "counts.nc")
    assert counts.sizes["config"] == 2 and counts.sizes["task"] == 30 and (counts.n.values == 5).all()
    req = json.loads((out / "requests.json").read_text())
    assert req["stats"]["requests"] == 60 and req["n_supported"] is True  # 30 tasks x 2 temperatures, n = 5
    assert "pass@" in res.stdout
    for f in out.rglob("*"):
        if f.is_file():
            assert secret.encode() not in f.read_bytes(), f
    assert secret not in res.stdout + res.stderr
    no_key = subprocess.run([sys.executable, "-m", "bayespass.cli", "generate", "--endpoint", srv.url, "--model",
                             "tiny-llama", "--k", "1", "--tasks", "1", "--out", str(tmp_path / "x.jsonl")],
                            env={k: v for k, v in ENV.items() if k != "OPENAI_API_KEY"}, capture_output=True,
                            text=True, timeout=600)
    assert no_key.returncode != 0 and "HTTP 401" in no_key.stderr


def test_bad_input_is_refused_before_any_request():
    with pytest.raises(ValueError, match="endpoint must be an http"):
        OpenAICompatibleCoder("127.0.0.1:8000/v1", "m")
    with pytest.raises(ValueError, match="concurrency"):
        OpenAICompatibleCoder("http://127.0.0.1:1/v1", "m", concurrency=0)
    with pytest.raises(ValueError, match="api"):
        OpenAICompatibleCoder("http://127.0.0.1:1/v1", "m", api="embeddings")
    with pytest.raises(ValueError, match="NO_SUCH_KEY_VAR"):
        OpenAICompatibleCoder("http://127.0.0.1:1/v1", "m", api_key_env="NO_SUCH_KEY_VAR")
    for bad in (-1, float("nan"), float("inf"), "10", True):
        with pytest.raises(ValueError, match=r"wait_for_server must be a non-negative number of seconds .*got"):
            OpenAICompatibleCoder("http://127.0.0.1:1/v1", "m", wait_for_server=bad)
    with pytest.raises(ValueError, match="wait_for_server must be"):
        bp.RunConfig(coder="m", endpoint="http://127.0.0.1:1/v1", wait_for_server=-5)
    for cmd in (["run", "--model", "m"], ["generate", "--model", "m", "--out", "never.jsonl"]):
        res = subprocess.run([sys.executable, "-m", "bayespass.cli", *cmd, "--endpoint", "http://127.0.0.1:1/v1",
                              "--wait-for-server", "-5"], env=ENV, capture_output=True, text=True, timeout=120)
        assert res.returncode != 0 and "--wait-for-server must be" in res.stderr and "-5" in res.stderr, res.stderr
    res = subprocess.run([sys.executable, "-m", "bayespass.cli", "run", "--endpoint", "http://127.0.0.1:1/v1"],
                         env=ENV, capture_output=True, text=True, timeout=120)
    assert res.returncode != 0 and "--model" in res.stderr


def test_chat_api_sends_the_prompt_template_and_reads_logprobs(tmp_path_factory, tmp_path, suite):
    chat_model = build_tiny_model(tmp_path_factory.mktemp("models") / "tiny-chat", chat=True)
    srv = Server(chat_model, tmp_path, "--name", "tiny-chat")
    try:
        coder = OpenAICompatibleCoder(srv.url, "tiny-chat", api="chat", max_new_tokens=12)
        assert coder.url.endswith("/v1/chat/completions")
        recs = coder.generate(suite, 2, temperature=0.8, tasks=["HumanEval/3"])
        assert [r["sample"] for r in recs] == [0, 1]
        assert all("response" in r and np.isfinite(r["mean_logprob"]) for r in recs)
        head = srv.requests()[0]["head"]  # the end of the prompt the server built from the messages
        assert head.endswith("<assistant>") and "```" in head  # chat template + the instruction's code fence
    finally:
        srv.kill()


def test_retry_after_parses_seconds_and_http_dates():
    import email.utils

    assert _retry_after("2.5") == 2.5 and _retry_after(None) is None and _retry_after("soon") is None
    future = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 < _retry_after(future) <= 31
