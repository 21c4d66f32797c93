"""Generation from any OpenAI-compatible server: vLLM, TGI, SGLang, llama.cpp, ``transformers serve``, hosted APIs.

:class:`OpenAICompatibleCoder` talks to ``/v1/completions`` (base models:
the prompt is continued and cut at stop sequences) or
``/v1/chat/completions`` (instruction models: the prompt templates of
``models/*.json``).  K samples per task are asked for with ``n=K`` where the
server honours it; a server that returns fewer choices (or refuses ``n``) is
asked once per missing sample, each with its own seed.  Requests run
concurrently (``concurrency``) and are retried with exponential backoff and
jitter on 429, 5xx, time-outs and refused connections (a URL with nothing
behind it at the start is refused at once, or after ``wait_for_server``
seconds of asking: :meth:`check_reachable`), honouring
``Retry-After``; other 4xx answers and malformed bodies stop the run with an
error naming the task and the request.

Each sample records the raw text, the extracted program (evalplus's
sanitizer, as the transformers coder), ``finish_reason``, the request's
``prompt_tokens`` and ``completion_tokens``, ``n_tokens`` (the sample's
tokens when the server says, from its log-probabilities or from usage of a
one-sample request), ``latency`` (seconds of its request) and
``mean_logprob`` (mean token log-probability, when the server returns
log-probabilities; absent otherwise, and the executed dataset then says so in
its ``mean_logprob_note`` attribute).

The API key comes from the environment variable named by ``api_key_env``
(default ``OPENAI_API_KEY``; none needed by a local server); it is sent in
the ``Authorization`` header and never stored.

:func:`bayespass.generate.hf.generate_to_jsonl` writes the samples as they
arrive and, re-run, asks only for the missing ones.
"""

from __future__ import annotations

import email.utils
import json
import os
import random
import threading
import time
from collections import Counter
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

from .base import Coder
from .hf import _BASE_STOPS, _INSTRUCTION, _cut, _task_seed, extract_program, load_model_config

__all__ = ["OpenAICompatibleCoder", "EndpointError"]

_RETRY_STATUS = (408, 409, 425, 429, 500, 502, 503, 504)


class EndpointError(RuntimeError):
    """A request that cannot succeed (a 4xx answer, a malformed body, or retries exhausted)."""


def _retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header (a number of seconds or an HTTP date)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


class OpenAICompatibleCoder(Coder):
    """A model behind an OpenAI-compatible HTTP API.

    Parameters
    ----------
    base_url : str
        The API root, e.g. ``"http://127.0.0.1:8000/v1"`` (vLLM) or ``"https://api.openai.com/v1"``.
    model : str
        The model name the server expects (also the config label of the samples and the key into
        ``models/*.json`` for prompt settings).
    api : {"auto", "completions", "chat"}
        Endpoint to call.  ``"auto"``: ``completions`` when the model's config in ``models/*.json`` says
        ``"style": "base"``, else ``chat``.
    concurrency : int
        Requests in flight at once (8 suits a local vLLM server; hosted APIs may want fewer).
    max_new_tokens, top_p : int, float
        Sampling settings (``max_tokens`` and ``top_p`` of the request).
    stop : list of str, optional
        Stop sequences (default: the model config's, else evalplus's for completions).  Also applied
        client-side, since some servers cap how many they accept.
    timeout : float
        Seconds per request.
    max_retries : int
        Retries per request on 429, 5xx, time-outs and refused connections.
    backoff, max_backoff : float
        First retry delay and its cap (doubling, with jitter in [0.5, 1.5)).
    api_key_env : str
        Environment variable holding the API key (not needed by a local server unless it asks).
    logprobs : bool
        Ask for token log-probabilities (dropped for the rest of the run if the server refuses them).
    wait_for_server : float
        Seconds to keep asking, before the first sample, for a server that refuses connections (one still
        loading its model: vLLM holds its port closed until then); 0, the default, says at once that nothing
        answers.
    """

    name = "endpoint"

    def __init__(self, base_url: str, model: str, *, api: str = "auto", concurrency: int = 8,
                 max_new_tokens: int = 512, top_p: float = 0.95, stop: list[str] | None = None,
                 timeout: float = 120.0, max_retries: int = 8, backoff: float = 0.5, max_backoff: float = 30.0,
                 api_key_env: str = "OPENAI_API_KEY", logprobs: bool = True, wait_for_server: float = 0.0):
        from ..validate import check_choice, check_positive_int, check_wait

        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise ValueError(f"endpoint must be an http:// or https:// URL such as http://127.0.0.1:8000/v1; "
                             f"got {base_url!r}")
        if not isinstance(model, str) or not model.strip():
            raise ValueError(f"model must name the model served at {base_url}; got {model!r}")
        check_choice(api, ("auto", "completions", "chat"), name="api")
        check_positive_int(concurrency, name="concurrency")
        check_positive_int(max_new_tokens, name="max_new_tokens")
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ValueError(f"max_retries must be a non-negative integer; got {max_retries!r}")
        if not 0 < top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1]; got {top_p!r}")
        for name, v in (("timeout", timeout), ("backoff", backoff), ("max_backoff", max_backoff)):
            if not isinstance(v, int | float) or not v > 0:
                raise ValueError(f"{name} must be a positive number of seconds; got {v!r}")
        wait_for_server = check_wait(wait_for_server)
        if api_key_env != "OPENAI_API_KEY" and not os.environ.get(api_key_env):
            raise ValueError(f"api_key_env={api_key_env!r}: that environment variable is not set")
        self.base_url = base_url.rstrip("/")
        self.model_id = model
        self.cfg = load_model_config(model)
        if api == "auto":
            api = "completions" if self.cfg.get("style") == "base" else "chat"
        self.api = api
        self.style = "base" if api == "completions" else "chat"
        self.stop = list(stop if stop is not None else self.cfg.get("stop", _BASE_STOPS if api == "completions"
                                                                    else []))
        self.concurrency, self.max_new_tokens, self.top_p = concurrency, max_new_tokens, float(top_p)
        self.timeout, self.max_retries = float(timeout), max_retries
        self.backoff, self.max_backoff = float(backoff), float(max_backoff)
        self._api_key_env = api_key_env
        self.logprobs = bool(logprobs)
        self.wait_for_server = wait_for_server
        self.n_supported: bool | None = None  # learnt from the first answer
        self.stats = Counter()  # requests, retries by reason, tokens
        self._lock = threading.Lock()
        self._local = threading.local()
        self.stop_event = threading.Event()
        self.notes: list[str] = []

    # -- requests ---------------------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        """The endpoint URL requests go to."""
        return f"{self.base_url}/{'completions' if self.api == 'completions' else 'chat/completions'}"

    def _session(self):
        import requests

        s = getattr(self._local, "session", None)
        if s is None:
            s = self._local.session = requests.Session()
        return s

    def _headers(self) -> dict:
        key = os.environ.get(self._api_key_env)
        return {"Authorization": f"Bearer {key}"} if key else {}

    def messages(self, task) -> list[dict]:
        """Chat messages for a task (system message, then the instruction with the prompt)."""
        msgs = []
        if self.cfg.get("system"):
            msgs.append({"role": "system", "content": self.cfg["system"]})
        msgs.append({"role": "user", "content": self.cfg.get("instruction", _INSTRUCTION).format(prompt=task.prompt)})
        return msgs

    def body(self, task, n: int, temperature: float, seed: int) -> dict:
        """Return the JSON body of a request for ``n`` samples of ``task``."""
        b = {"model": self.model_id, "max_tokens": self.max_new_tokens, "temperature": float(temperature),
             "top_p": self.top_p, "n": int(n), "seed": int(seed)}
        if self.api == "completions":
            b["prompt"] = task.prompt
            if self.logprobs:
                b["logprobs"] = 1
        else:
            b["messages"] = self.messages(task)
            if self.logprobs:
                b["logprobs"] = True
        if self.stop:
            b["stop"] = list(self.stop)
        return b

    def _bump(self, **kw) -> None:
        with self._lock:
            self.stats.update(kw)

    def _wait(self, seconds: float) -> None:
        if self.stop_event.wait(seconds):
            raise EndpointError("stopped")

    def post(self, body: dict, what: str) -> tuple[dict, float]:
        """POST ``body`` with retries; return (parsed JSON, seconds of the successful request)."""
        import requests

        last = ""
        for attempt in range(self.max_retries + 1):
            if self.stop_event.is_set():
                raise EndpointError("stopped")
            t0 = time.perf_counter()
            delay = None
            try:
                r = self._session().post(self.url, json=body, headers=self._headers(), timeout=self.timeout)
            except requests.Timeout:
                last, reason = f"no answer within {self.timeout:g} s", "timeout"
            except requests.ConnectionError as err:
                last, reason = f"connection failed ({type(err).__name__})", "connection"
            except requests.exceptions.ChunkedEncodingError:  # the server went away mid-answer
                last, reason = "connection broken mid-answer (ChunkedEncodingError)", "connection"
            else:
                latency = time.perf_counter() - t0
                if r.status_code == 200:
                    try:
                        return r.json(), latency
                    except ValueError:
                        raise EndpointError(f"malformed response from {self.url} for {what}: the body is not JSON "
                                            f"(starts with {r.text[:200]!r})") from None
                if r.status_code in _RETRY_STATUS or r.status_code >= 500:
                    last, reason = f"HTTP {r.status_code}: {r.text[:200]!r}", str(r.status_code)
                    delay = _retry_after(r.headers.get("Retry-After"))
                else:
                    refused = self._refused_option(r, body)
                    if refused:
                        body = refused
                        continue
                    raise EndpointError(f"{self.url} answered HTTP {r.status_code} for {what}: {r.text[:300]!r}")
            self._bump(**{f"retry_{reason}": 1, "retries": 1})
            if attempt == self.max_retries:
                break
            if delay is None:
                delay = min(self.max_backoff, self.backoff * 2 ** attempt) * random.uniform(0.5, 1.5)
            self._wait(delay)
        raise EndpointError(f"gave up on {what} after {self.max_retries + 1} tries (last: {last}); the samples "
                            f"received so far are saved: run the same command again to resume")

    def _refused_option(self, r, body: dict) -> dict | None:
        """Return the body without an option a 400 answer refuses (``logprobs``, ``seed``; remembered), else None."""
        if r.status_code != 400:
            return None
        text = r.text.lower()
        if "logprob" in text and "logprobs" in body:
            self.logprobs = False
            self.notes.append(f"{self.base_url} refused logprobs ({r.text[:120]!r}): mean_logprob is None")
            return {k: v for k, v in body.items() if k != "logprobs"}
        if "seed" in text and "seed" in body:
            self.notes.append(f"{self.base_url} refused seed: samples are not reproducible by seed")
            return {k: v for k, v in body.items() if k != "seed"}
        return None

    # -- one request ------------------------------------------------------------------------------------------
    def request(self, task, samples: list[int], temperature: float, seed: int) -> list[dict]:
        """Ask for the samples numbered ``samples`` of ``task`` in one request; return the records received.

        With ``n > 1`` a server that ignores ``n`` returns fewer records than asked: the caller asks again
        for the rest.
        """
        n = len(samples)
        rseed = (_task_seed(seed, task.task_id, temperature) + samples[0]) % 2 ** 31
        what = f"task {task.task_id} (samples {samples[0]}..{samples[-1]}, n={n}, T={temperature:g})"
        data, latency = self.post(self.body(task, n, temperature, rseed), what)
        choices = data.get("choices") if isinstance(data, dict) else None
        if not isinstance(choices, list) or not choices:
            raise EndpointError(f"malformed response from {self.url} for {what}: no 'choices' list "
                                f"(got {json.dumps(data)[:200]})")
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        if n > 1 and self.n_supported is None:
            self.n_supported = len(choices) >= n
        recs = []
        for i, ch in enumerate(sorted(choices, key=lambda c: c.get("index", 0) if isinstance(c, dict) else 0)[:n]):
            raw = self._text(ch, what)
            text, cut = _cut(raw, self.stop) if self.stop else (raw, False)
            lps = self._logprobs(ch)
            finish = ch.get("finish_reason") or "unknown"
            if cut and finish == "length":
                finish = "stop"
            n_tok = len(lps) if lps else (usage.get("completion_tokens") if len(choices) == 1 else None)
            rec = {"task_id": task.task_id, "sample": samples[i],
                   "completion" if self.style == "base" else "response": text,
                   "solution": extract_program(task, text, self.style), "raw": raw,
                   "finish_reason": finish, "prompt_tokens": usage.get("prompt_tokens"),
                   "completion_tokens": usage.get("completion_tokens"), "latency": round(latency, 4),
                   "model": self.model_id, "temperature": temperature, "seed": seed}
            if n_tok is not None:
                rec["n_tokens"] = int(n_tok)
            if lps:  # absent (not None) without log-probabilities, so that the dataset column is absent too
                rec["mean_logprob"] = float(sum(lps) / len(lps))
            recs.append(rec)
        self._bump(requests=1, samples=len(recs), prompt_tokens=int(usage.get("prompt_tokens") or 0),
                   completion_tokens=int(usage.get("completion_tokens") or 0))
        return recs

    def _text(self, ch, what: str) -> str:
        if isinstance(ch, dict):
            if self.api == "completions" and isinstance(ch.get("text"), str):
                return ch["text"]
            msg = ch.get("message")
            if self.api == "chat" and isinstance(msg, dict) and isinstance(msg.get("content"), str | None):
                return msg.get("content") or ""
        field = "text" if self.api == "completions" else "message.content"
        raise EndpointError(f"malformed response from {self.url} for {what}: a choice has no {field!r} string "
                            f"(got {json.dumps(ch)[:200]})")

    def _logprobs(self, ch: dict) -> list[float] | None:
        lp = ch.get("logprobs")
        if not isinstance(lp, dict):
            return None
        if self.api == "completions":
            vals = lp.get("token_logprobs")
        else:
            vals = [t.get("logprob") for t in lp.get("content") or [] if isinstance(t, dict)]
        vals = [float(v) for v in vals or [] if isinstance(v, int | float)]
        return vals or None

    def check_reachable(self) -> None:
        """Raise an :class:`EndpointError` where nothing answers at the endpoint (refused, unknown host).

        One GET of ``/models`` (any answer, even 401 or 404, is a server); a time-out is left to the requests'
        own retries (a busy server). Nothing there: asked again every 2 s for ``wait_for_server`` seconds (a
        server still loading its model), then the error; with 0, the error at once. Before it, a URL with
        nothing behind it (a typo, a server not started) was retried for 84 s before the run gave up; a
        connection lost mid-run is still retried.
        """
        import sys

        deadline = time.monotonic() + self.wait_for_server
        while True:
            reason = self._refused()
            left = deadline - time.monotonic()
            if reason is None:
                return
            if left <= 0:
                break
            if not self.stats["waits"]:
                print(f"waiting up to {self.wait_for_server:g} s for a server at {self.base_url} ({reason}; "
                      f"Ctrl-C stops)", file=sys.stderr, flush=True)
            self.stats["waits"] += 1
            time.sleep(min(2.0, left))
        waited = (f"; waited {self.wait_for_server:g} s" if self.wait_for_server else
                  "; a server still loading its model: --wait-for-server SECONDS (Python: wait_for_server=)")
        raise EndpointError(
            f"nothing answers at {self.base_url} ({reason}): is the server running, and "
            f"does the URL end in /v1 (vLLM's 'vllm serve MODEL --port 8000' answers at "
            f"http://127.0.0.1:8000/v1)? No sample was asked for{waited}") from None

    def _refused(self) -> str | None:
        """Why nothing answers at the endpoint (one GET of ``/models``), or None where something does."""
        import re

        import requests

        try:
            self._session().get(f"{self.base_url}/models", headers=self._headers(), timeout=min(self.timeout, 10.0))
        except requests.ConnectionError as err:
            said = re.findall(r"Failed to resolve '[^']+'|\[Errno -?\d+\] [^'\")(]+", str(err))  # urllib3's nesting
            return ", ".join(s.strip() for s in said) or type(err).__name__
        except requests.RequestException:  # a time-out or another answer: a server is there
            pass
        return None

    # -- many requests ----------------------------------------------------------------------------------------
    def stream(self, suite, todo: dict, *, temperature: float, seed: int = 0):
        """Yield lists of records as requests complete; ``todo`` maps task id -> sample numbers wanted.

        The first request asks for ``n`` samples at once; if the server returns fewer, every missing sample
        is then asked for on its own.
        """
        if temperature < 0:
            raise ValueError(f"temperature must be >= 0; got {temperature!r}")
        units = [(tid, list(s)) for tid, s in todo.items() if s]
        if units:
            self.check_reachable()  # a URL with nothing behind it: at once, not after the retries
        self.stop_event.clear()
        pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="bayespass-endpoint")
        pending = {}

        def submit(tid, samples):
            f = pool.submit(self.request, suite.tasks[tid], samples, temperature, seed)
            pending[f] = (tid, samples)

        try:
            queue = list(units)
            if queue and self.n_supported is None and len(queue[0][1]) > 1:
                submit(*queue.pop(0))  # learn whether the server honours n before flooding it
                done, _ = wait(list(pending), return_when=FIRST_COMPLETED)
                for f in done:
                    yield from self._collect(f, pending, submit)
            for tid, samples in queue:
                if self.n_supported is False:
                    for s in samples:
                        submit(tid, [s])
                else:
                    submit(tid, samples)
                while len(pending) >= 2 * self.concurrency:
                    done, _ = wait(list(pending), return_when=FIRST_COMPLETED)
                    for f in done:
                        yield from self._collect(f, pending, submit)
            while pending:
                done, _ = wait(list(pending), return_when=FIRST_COMPLETED)
                for f in done:
                    yield from self._collect(f, pending, submit)
        finally:
            self.stop_event.set()
            pool.shutdown(wait=False, cancel_futures=True)

    def _collect(self, f, pending, submit):
        tid, samples = pending.pop(f)
        recs = f.result()
        got = {r["sample"] for r in recs}
        for s in samples:
            if s not in got:
                submit(tid, [s])
        if recs:
            yield recs

    def generate(self, suite, k: int, *, temperature: float, seed: int = 0, tasks=None) -> list[dict]:
        """Return ``k`` samples per task, ordered by task then sample."""
        from ..validate import check_positive_int

        k = check_positive_int(k, name="k")
        ids = list(tasks if tasks is not None else suite.tasks)
        recs = [r for batch in self.stream(suite, {t: list(range(k)) for t in ids}, temperature=temperature,
                                           seed=seed) for r in batch]
        order = {t: i for i, t in enumerate(ids)}
        return sorted(recs, key=lambda r: (order[r["task_id"]], r["sample"]))
