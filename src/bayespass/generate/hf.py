"""Generation with Hugging Face transformers (optional extra ``bayespass[hf]``).

K samples per task come from **one** ``model.generate`` call with
``num_return_sequences=K`` (the prompt is prefilled once per task, then the K
continuations are decoded as one batch).  Each sample records its raw text,
the extracted program (evalplus's sanitizer: the target function and what it
needs), the number of generated tokens, the mean token log-probability under
the model (log-softmax of the raw logits, i.e. temperature 1, over the kept
tokens), the finish reason (``stop``, ``eos`` or ``length``) and the
generation time of its batch.

Determinism: the sampler is seeded per task from ``(seed, task_id,
temperature)``, so a task's samples do not depend on which tasks ran before
(what makes kill-and-resume reproduce an uninterrupted run).
"""

from __future__ import annotations

import json
import os
import re
import time
import warnings
from collections import Counter
from pathlib import Path

from .base import Coder

__all__ = ["HFCoder", "ReplayCoder", "generate_to_jsonl", "load_model_config", "write_samples", "MODELS_DIR"]

MODELS_DIR = Path(__file__).resolve().parents[3] / "models"
_BASE_STOPS = ["\ndef ", "\nclass ", "\nif __name__", "\nprint(", "\nassert ", '\n"""', "\n#"]
_INSTRUCTION = ("Complete the following Python function. Reply with the complete function in one ```python code "
                "block, including the imports it needs.\n\n```python\n{prompt}```")


def _require_torch():
    try:
        import torch
        import transformers
    except ImportError as err:  # pragma: no cover - exercised only without the extra
        raise ImportError("the transformers coder needs the optional extra: pip install 'bayespass[hf]'") from err
    return torch, transformers


def load_model_config(model: str, *, folder: str | os.PathLike | None = None) -> dict:
    """Prompt settings for a model from ``models/*.json``: the first whose ``match`` regex matches ``model``.

    Keys: ``style`` (``"chat"`` or ``"base"``), ``instruction`` (chat only; ``{prompt}`` is the task prompt),
    ``stop`` (stop sequences), ``system`` (optional system message).  Without a match: ``{"style": "auto"}``.
    """
    folder = Path(folder) if folder is not None else MODELS_DIR
    if folder.is_dir():
        for path in sorted(folder.glob("*.json")):
            cfg = json.loads(path.read_text())
            if re.search(cfg.get("match", "$^"), str(model), flags=re.IGNORECASE):
                return dict(cfg, source=str(path))
    return {"style": "auto"}


def _device(device: str, torch):
    """Return the torch device for ``device``, refusing one this machine lacks (before any weights load)."""
    mps = getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available()
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "mps" if mps else "cpu")
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            why = "this torch was built without CUDA" if torch.version.cuda is None else "no GPU is visible"
            raise ValueError(f"device={device!r}: CUDA is not available here (torch {torch.__version__}: {why}); "
                             "use 'cpu', or 'auto' to take a GPU where there is one")
        n = torch.cuda.device_count()
        if ":" in device and int(device.split(":")[1]) >= n:
            raise ValueError(f"device={device!r}: this machine has {n} CUDA device(s), cuda:0 to cuda:{n - 1}")
    if device == "mps" and not mps:
        raise ValueError("device='mps': Apple's MPS backend is not available here; use 'cpu' or 'auto'")
    return torch.device(device)


def check_local_options(device: str, dtype: str, *, local: bool, coder: str) -> None:
    """Refuse a transformers model's device and dtype settings before a suite or model loads.

    Bad names; a device or dtype given where no transformers model runs here (``local`` false: the synthetic
    coder, replayed samples or an endpoint, described by ``coder``); a GPU this machine lacks.
    """
    from ..validate import check_torch_device, check_torch_dtype

    check_torch_device(device)
    check_torch_dtype(dtype)
    for name, value in (("device", device), ("dtype", dtype)):
        if value != "auto" and not local:
            raise ValueError(f"{name}={value!r} applies only to a transformers model run here (--model ID_OR_PATH "
                             f"without --endpoint); this run's coder is {coder}")
    if device not in ("auto", "cpu"):
        try:
            torch, _ = _require_torch()
        except ImportError as err:
            raise ValueError(f"device={device!r}: {err}") from None
        _device(device, torch)


def _dtype(dtype: str, device, torch):
    if dtype != "auto":
        return getattr(torch, dtype)
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    if device.type == "mps":
        return torch.float16
    return torch.float32


def _task_seed(seed: int, task_id: str, temperature: float) -> int:
    from ..simulate import stable_seed

    return stable_seed(seed, task_id, repr(temperature))


def extract_program(task, text: str, style: str) -> str:
    """Extract a sample's program with evalplus's sanitizer.

    It reads the prompt plus the continuation (``style="base"``) or the reply (``"chat"``); the raw code is
    kept when the sanitizer finds nothing or fails.
    """
    from evalplus.sanitize import sanitize

    code = task.prompt + text if style == "base" else text
    try:
        return sanitize(code, task.entry_point) or code
    except Exception:  # noqa: BLE001 - the sanitizer parses untrusted text; keep the raw code then
        return code


def _cut(text: str, stops: list[str]) -> tuple[str, bool]:
    pos = [text.find(s) for s in stops if s and s in text]
    return (text[: min(pos)], True) if pos else (text, False)


def _eos_ids(tok, generation_config) -> frozenset:
    """Every token that ends a sample: the tokenizer's EOS and the model's generation config's (often a list).

    ``generate`` stops a row at any of them (Llama 3 and Qwen2.5 instruct models list two or three) and pads it
    after, so a row ended by one the tokenizer does not name must be cut there too.
    """
    ids = set()
    for v in (tok.eos_token_id, getattr(generation_config, "eos_token_id", None)):
        if v is not None:
            ids.update(int(i) for i in (v if isinstance(v, list | tuple) else [v]))
    return frozenset(ids)


#: a full decode of each unfinished row at least every this many tokens (see :func:`_row_stopper`)
FULL_DECODE_EVERY = 64


def _stop_window(stops: list[str]) -> int:
    """Tokens of a row's tail that hold a stop sequence its last token completed.

    Each token that carries part of a stop carries at least one of its UTF-8 bytes, so a stop of b bytes lies
    in its last b tokens; four more for the window's ragged start (a character cut in two, a leading space a
    tokenizer drops at the start of a text).  A tokenizer that decoded a tail otherwise is still exact: the
    whole decode every ``full_every`` tokens finds the stop and its first step.
    """
    return max(8, max((len(s.encode()) for s in stops), default=0) + 4)


class _RowStops:
    """Where each of k rows ends: at an EOS token or at the first step its decoded text holds a stop sequence.

    ``.ends[r]`` is the number of tokens row r kept (``None``: it ran to the length limit) and ``.reasons[r]``
    why it ended.  The rows' new tokens are copied to the host once per step (where each row used to be read
    from the device on its own, twice per step: a synchronisation each on a GPU).  A row's whole text is
    decoded only when its last ``window`` tokens (:func:`_stop_window`) hold a stop (to confirm it) and every
    ``full_every`` tokens (a stop the tail missed, were a tokenizer to decode a tail otherwise than the whole:
    its first step is then found and kept), not every step: decoding grows with the row, so at hundreds of rows
    of hundreds of tokens the host's decoding took as long as the model's steps.
    """

    def __init__(self, tok, n_prompt: int, k: int, stops: list[str], eos_ids: frozenset, *, window: int | None,
                 full_every: int):
        self.tok, self.n_prompt, self.k, self.stops, self.eos_ids = tok, n_prompt, k, stops, eos_ids
        self.window = _stop_window(stops) if window is None else window
        self.full_every = full_every
        self.ends, self.reasons = [None] * k, ["length"] * k
        self.hist = [[] for _ in range(k)]  # each row's generated tokens, on the host
        self.clear = [0] * k  # each row's longest prefix whose whole text was decoded and held no stop
        self.full_decodes = 0

    def _holds_stop(self, tokens) -> bool:
        return _cut(self.tok.decode(tokens, skip_special_tokens=True), self.stops)[1]

    def _first_stop(self, r: int, upto: int) -> int | None:
        """Return the first length in (clear[r], upto] whose text holds a stop (None: none), decoding it whole."""
        h = self.hist[r]
        self.full_decodes += 1
        if not self._holds_stop(h[:upto]):
            self.clear[r] = upto
            return None
        if upto - 1 > self.clear[r] and self._holds_stop(h[: upto - 1]):  # a stop the tail missed: its first step
            return next(n for n in range(self.clear[r] + 1, upto) if self._holds_stop(h[:n]))
        return upto

    def _end(self, r: int, n_gen: int) -> tuple[int, str] | None:
        h = self.hist[r]
        if h[-1] in self.eos_ids:  # the tokens before it may hold a stop the tail missed
            end = self._first_stop(r, n_gen - 1) if self.stops and n_gen - 1 > self.clear[r] else None
            return (n_gen, "eos") if end is None else (end, "stop")
        if self.stops and (n_gen - self.clear[r] >= self.full_every or n_gen <= self.window
                           or self._holds_stop(h[-self.window:])):
            end = self._first_stop(r, n_gen)
            return None if end is None else (end, "stop")
        return None

    def step(self, input_ids) -> list[bool]:
        """Take the step's tokens; return which rows have ended."""
        n_gen = input_ids.shape[1] - self.n_prompt
        if n_gen == len(self.hist[0]) + 1:
            for row, t in zip(self.hist, input_ids[:, -1].tolist(), strict=True):
                row.append(t)
        else:  # not called once per step: copy what was generated
            self.hist = input_ids[:, self.n_prompt:].tolist()
        for r in range(self.k):
            if self.ends[r] is None and (found := self._end(r, n_gen)) is not None:
                self.ends[r], self.reasons[r] = found
        return [e is not None for e in self.ends]

    def finish(self) -> None:
        """Check the rows that ran to the length limit whole (their last tokens since a whole decode)."""
        for r in range(self.k):
            if self.ends[r] is None and self.stops and len(self.hist[r]) > self.clear[r]:
                end = self._first_stop(r, len(self.hist[r]))
                if end is not None:
                    self.ends[r], self.reasons[r] = end, "stop"


def _row_stopper(transformers, torch, tok, n_prompt: int, k: int, stops: list[str], eos_ids: frozenset, *,
                 window: int | None = None, full_every: int = FULL_DECODE_EVERY):
    """Return a transformers stopping criterion for k rows (:class:`_RowStops`: ``.ends``, ``.reasons``)."""

    class _Stop(_RowStops, transformers.StoppingCriteria):
        def __call__(self, input_ids, scores, **kw):
            return torch.tensor(self.step(input_ids), device=input_ids.device)

    return _Stop(tok, n_prompt, k, stops, eos_ids, window=window, full_every=full_every)


def _check_model_id(model: str) -> None:
    """Refuse a model that names a local folder which does not exist; a hub id ('org/name') goes to transformers.

    A hub id has at most one '/' and no leading '.', '/' or '~'; such a name is taken as a local folder only
    where one exists (transformers' own rule), so 'Qwen/Qwen2.5-Coder-1.5B-Instruct' loads from the Hugging Face
    cache (it was refused as a missing folder).
    """
    local = Path(model).expanduser()
    if local.exists():
        return
    path_like = (model.startswith((".", "/", "~")) or model.count("/") > 1 or "\\" in model
                 or (os.sep != "/" and os.sep in model))
    if path_like:
        raise FileNotFoundError(f"model folder {model!r} does not exist")


def _check_hub_reachable(model: str, *, timeout: float = 5.0) -> None:
    """Refuse at once a hub id that is not cached where the hub cannot be reached (no internet).

    transformers retries such a download for about 50 s before it says so; one request to the hub's endpoint
    (through the proxies huggingface_hub uses, ``timeout`` seconds at most) tells the same at once. A local
    folder, a cached id and ``HF_HUB_OFFLINE=1`` (transformers then reads the cache alone, at once) are not
    checked.
    """
    from huggingface_hub import constants, try_to_load_from_cache

    if Path(model).expanduser().exists() or constants.HF_HUB_OFFLINE:
        return
    try:
        if isinstance(try_to_load_from_cache(model, "config.json"), str):
            return  # cached: transformers reads it (and checks for a newer revision only when it can)
    except ValueError:  # not a valid hub id: transformers says what is wrong with it
        return
    from huggingface_hub.utils import get_session

    try:
        get_session().head(constants.ENDPOINT, timeout=timeout)  # any answer: the hub can be reached
    except Exception as err:  # noqa: BLE001 - httpx/requests errors alike: no connection
        raise FileNotFoundError(
            f"model {model!r} is not a local folder nor in the Hugging Face cache ({constants.HF_HUB_CACHE}), and "
            f"{constants.ENDPOINT} cannot be reached ({type(err).__name__}: {err}): download it where there is "
            f"internet ('hf download {model}', then copy the cache or set HF_HOME) or give the model's local "
            "folder") from None


class HFCoder(Coder):
    """A causal LM from the Hugging Face hub or a local folder.

    Parameters
    ----------
    model : str
        Hub id (e.g. ``"Qwen/Qwen2.5-Coder-1.5B-Instruct"``) or local path.  Set
        ``HF_HUB_OFFLINE=1`` to forbid downloads; a local path never downloads.
    device : str
        ``"auto"`` (CUDA, then MPS, then CPU), ``"cpu"``, ``"cuda"``, ``"cuda:N"`` or ``"mps"``; one this
        machine lacks is refused before the weights load.
    dtype : str
        ``"auto"`` (bf16, else fp16, on a GPU; fp32 on a CPU), ``"float32"``, ``"bfloat16"`` or ``"float16"``.
    max_new_tokens, top_p : int, float
        Sampling settings.
    stop : list of str, optional
        Stop sequences (default: from ``models/*.json``, else evalplus's for base models).
    style : {"auto", "chat", "base"}
        ``"chat"`` wraps the prompt in the tokenizer's chat template with an instruction;
        ``"base"`` continues the prompt.  ``"auto"``: the model config, else chat iff the
        tokenizer has a chat template.
    """

    name = "hf"

    def __init__(self, model: str, *, device: str = "auto", dtype: str = "auto", max_new_tokens: int = 512,
                 top_p: float = 0.95, stop: list[str] | None = None, style: str = "auto"):
        torch, transformers = _require_torch()
        from ..validate import check_choice, check_torch_device, check_torch_dtype

        check_choice(style, ("auto", "chat", "base"), name="style")
        check_torch_device(device)
        check_torch_dtype(dtype)
        if not isinstance(max_new_tokens, int) or max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be a positive integer; got {max_new_tokens!r}")
        if not 0 < top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1]; got {top_p!r}")
        self.model_id = str(model)
        _check_model_id(self.model_id)
        _check_hub_reachable(self.model_id)  # at once, not after transformers' 50 s of retries
        self.device = _device(device, torch)
        self.dtype = _dtype(dtype, self.device, torch)
        try:
            self.tokenizer = transformers.AutoTokenizer.from_pretrained(self.model_id)
        except OSError as err:  # a hub id that is neither cached nor (offline, or no such model) downloadable
            raise FileNotFoundError(f"model {self.model_id!r} is not a local folder, and the Hugging Face hub id "
                                    f"could not be loaded: {err}") from None
        self.model = transformers.AutoModelForCausalLM.from_pretrained(self.model_id, dtype=self.dtype)
        self.model.to(self.device).eval()
        self.cfg = load_model_config(self.model_id)
        st = style if style != "auto" else self.cfg.get("style", "auto")
        if st == "auto":
            st = "chat" if getattr(self.tokenizer, "chat_template", None) else "base"
        self.style = st
        self.stop = list(stop if stop is not None else self.cfg.get("stop", _BASE_STOPS if st == "base" else []))
        self.max_new_tokens, self.top_p = max_new_tokens, top_p
        self.forward_calls = 0  # prefills + decode steps, for checks and benchmarks
        self.prefill_calls = 0
        self._steps = None  # while sampling: the sampled tokens' log-probabilities, one (k,) tensor per step
        self._pending = None  # the last forward call's log-softmax at the last position, (k, vocab)
        self.model.register_forward_pre_hook(self._count, with_kwargs=True)
        self.model.register_forward_hook(self._keep_logprobs, with_kwargs=True)

    def _count(self, module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        self.forward_calls += 1
        if ids is not None and ids.shape[-1] > 1:
            self.prefill_calls += 1
        if self._steps is not None and self._pending is not None and ids is not None:
            self._take(ids[:, -1])

    def _keep_logprobs(self, module, args, kwargs, output):
        """Keep the log-softmax of the raw logits of the position just computed (what ``output_logits`` holds).

        The next forward call's input is the token sampled from it, and ``_count`` takes that token's entry:
        one (k, vocab) row is held at a time, where ``output_logits`` held (k, steps, vocab) in float32 (15 GB
        for 50 samples of 512 tokens over a 152k vocabulary).
        """
        if self._steps is not None:
            import torch

            logits = output.logits if hasattr(output, "logits") else output[0]
            self._pending = torch.log_softmax(logits[:, -1, :].float(), dim=-1)

    def _take(self, tokens):
        self._steps.append(self._pending.gather(1, tokens.reshape(-1, 1)).squeeze(1))
        self._pending = None

    def prompt_text(self, task) -> str:
        """Return the text fed to the model for a task (chat template applied for chat models)."""
        if self.style == "base":
            return task.prompt
        msgs = []
        if self.cfg.get("system"):
            msgs.append({"role": "system", "content": self.cfg["system"]})
        msgs.append({"role": "user", "content": self.cfg.get("instruction", _INSTRUCTION).format(prompt=task.prompt)})
        return self.tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)

    def program(self, task, text: str) -> str:
        """Extract the program from a sample's text (evalplus's sanitizer)."""
        return extract_program(task, text, self.style)

    def _generate_rows(self, enc, k: int, temperature: float, stopper) -> tuple:
        """Sample k continuations of a prompt in one ``generate`` call.

        Returns the tokens (k, steps) and their log-probabilities, on the host, and the seconds it took.
        """
        torch, transformers = _require_torch()
        tok = self.tokenizer
        t0 = time.perf_counter()
        self._steps, self._pending = [], None
        try:
            with torch.no_grad():
                out = self.model.generate(
                    enc["input_ids"].to(self.device), attention_mask=enc["attention_mask"].to(self.device),
                    do_sample=True, temperature=float(temperature), top_p=self.top_p, top_k=0,
                    num_return_sequences=k, max_new_tokens=self.max_new_tokens, return_dict_in_generate=True,
                    stopping_criteria=transformers.StoppingCriteriaList([stopper]),
                    pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id)
            gen = out.sequences[:, enc["input_ids"].shape[1]:]
            self._take(gen[:, -1])
            logp = torch.stack(self._steps, dim=1).cpu()  # raw log-probabilities, before temperature
        finally:
            self._steps, self._pending = None, None
        if logp.shape[1] != gen.shape[1]:
            raise RuntimeError(f"{self.model_id}: {logp.shape[1]} forward calls for {gen.shape[1]} generated "
                               "tokens; the log-probabilities would not line up with the tokens")
        return gen.cpu(), logp, time.perf_counter() - t0

    def _sample_task(self, task, k: int, temperature: float, seed: int) -> list[dict]:
        torch, transformers = _require_torch()
        tok = self.tokenizer
        enc = tok(self.prompt_text(task), return_tensors="pt", add_special_tokens=self.style == "base")
        stopper = _row_stopper(transformers, torch, tok, enc["input_ids"].shape[1], k, self.stop,
                               _eos_ids(tok, self.model.generation_config))
        torch.manual_seed(_task_seed(seed, task.task_id, temperature))
        gen, logp, elapsed = self._generate_rows(enc, k, temperature, stopper)
        stopper.finish()
        recs = []
        for r in range(k):
            n = stopper.ends[r] if stopper.ends[r] is not None else gen.shape[1]
            toks = gen[r, :n].tolist()
            raw = tok.decode(toks, skip_special_tokens=True)
            text, _ = _cut(raw, self.stop)
            recs.append({"task_id": task.task_id, "completion" if self.style == "base" else "response": text,
                         "solution": self.program(task, text), "raw": raw, "n_tokens": int(n),
                         "mean_logprob": float(logp[r, :n].mean()) if n else float("nan"),
                         "finish_reason": stopper.reasons[r], "gen_time": elapsed / k, "token_ids": toks})
        return recs

    def generate(self, suite, k: int, *, temperature: float, seed: int = 0, tasks=None) -> list[dict]:
        """Return ``k`` samples per task (see the module docstring for the fields)."""
        if temperature <= 0:
            raise ValueError(f"temperature must be > 0; got {temperature!r}")
        if not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be a positive integer; got {k!r}")
        recs = []
        for tid in tasks if tasks is not None else list(suite.tasks):
            for i, r in enumerate(self._sample_task(suite.tasks[tid], k, temperature, seed)):
                recs.append(dict(r, model=self.model_id, temperature=temperature, sample=i, seed=seed))
        return recs

    def mean_logprob(self, task, token_ids: list[int]) -> float:
        """Recompute a sample's mean token log-probability with one forward pass (a check)."""
        torch, _ = _require_torch()
        enc = self.tokenizer(self.prompt_text(task), return_tensors="pt", add_special_tokens=self.style == "base")
        ids = torch.cat([enc["input_ids"], torch.tensor([token_ids])], dim=1).to(self.device)
        with torch.no_grad():
            logits = self.model(ids).logits.float()
        n0 = enc["input_ids"].shape[1]
        logp = torch.log_softmax(logits[0, n0 - 1: -1], dim=-1)
        return float(logp[torch.arange(len(token_ids)), torch.tensor(token_ids)].mean())


_VOLATILE = ("gen_time",)


def generate_to_jsonl(coder: Coder, suite, path: str | os.PathLike, *, k: int, temperature: float, seed: int = 0,
                      tasks=None, progress: bool = True) -> Path:
    """Append ``k`` samples per task to a JSONL file, resuming where an earlier run stopped.

    Records of one task are written (and fsynced) together; on restart, tasks
    already complete for this (model, temperature) are skipped and a torn
    last line is dropped.  Timing fields go to ``PATH.timing.jsonl`` so that
    the samples file of an interrupted-and-resumed run is byte-identical to
    an uninterrupted one.  A second process given the same file is refused at once (:mod:`bayespass._busy`):
    one could rewrite the file (dropping a task cut short) while the other appends to the old one.
    """
    from .._busy import exclusive

    path = Path(path)
    with exclusive(path, name="out", directory=False):
        return _generate_to_jsonl(coder, suite, path, k=k, temperature=temperature, seed=seed, tasks=tasks,
                                  progress=progress)


def _generate_to_jsonl(coder: Coder, suite, path: Path, *, k: int, temperature: float, seed: int, tasks,
                       progress: bool) -> Path:
    from tqdm.auto import tqdm

    if hasattr(coder, "stream"):
        return _stream_to_jsonl(coder, suite, path, k=k, temperature=temperature, seed=seed, tasks=tasks,
                                progress=progress)
    model = getattr(coder, "model_id", coder.name)
    lines = _intact_lines(path)
    recs = [json.loads(ln) for ln in lines]
    keep = _complete_tasks(recs, path, model=model, temperature=temperature, k=k)
    if len(keep) != len(lines):  # a task cut short: its records go, the task is generated again
        _replace(path, [lines[i] for i in keep])
    done = {recs[i]["task_id"] for i in keep
            if recs[i].get("model") == model and recs[i].get("temperature") == temperature}
    todo = [t for t in (tasks if tasks is not None else list(suite.tasks)) if t not in done]
    bar = tqdm(total=len(todo), desc=f"generating T={temperature:g}", unit="task", disable=not progress)
    n_tok, t_start = 0, time.perf_counter()
    try:
        with open(path, "a", encoding="utf-8") as fh, open(path.with_suffix(".timing.jsonl"), "a") as th:
            for tid in todo:
                recs = coder.generate(suite, k, temperature=temperature, seed=seed, tasks=[tid])
                body = "".join(json.dumps({k_: v for k_, v in r.items() if k_ not in _VOLATILE}) + "\n"
                               for r in recs)
                fh.write(body)
                fh.flush()
                os.fsync(fh.fileno())
                th.write("".join(json.dumps({"task_id": tid, "temperature": temperature, "sample": r.get("sample"),
                                             **{v: r.get(v) for v in _VOLATILE}}) + "\n" for r in recs))
                n_tok += sum(int(r.get("n_tokens", 0)) for r in recs)
                bar.update(1)
                # refresh=False: the bar redraws at tqdm's own pace (every set_postfix redrew it, one line per
                # task in a log)
                bar.set_postfix(tok_s=f"{n_tok / max(time.perf_counter() - t_start, 1e-9):.0f}", refresh=False)
    finally:
        bar.close()
    return path


def _complete_tasks(recs: list[dict], path: Path, *, model: str, temperature: float, k: int) -> list[int]:
    """Return the indices of the records to keep before generating ``k`` samples per task of ``model``, ``temperature``.

    A task of this model and temperature with fewer than ``k`` records is generated again (its records go): the
    last one written may have been cut short, and any other comes from an earlier run with a smaller k, whose
    seeded draws of fewer samples are not the first of k (said with a warning: they are replaced). Records of
    other models and temperatures stay whatever their number (a file holding T = 0.8 at k = 8 lost every record
    when T = 0.2 was generated into it at k = 10).
    """
    mine = [i for i, r in enumerate(recs) if r.get("model") == model and r.get("temperature") == temperature]
    per_task = Counter(recs[i]["task_id"] for i in mine)
    short = {t for t, n in per_task.items() if n < k}
    if mine and short - {recs[mine[-1]]["task_id"]}:  # not only the task written last (a write cut short)
        fewer = sum(per_task[t] for t in short)
        warnings.warn(f"{path}: {len(short)} task(s) of {model} at temperature {temperature:g} hold fewer than "
                      f"k = {k} samples (an earlier run with a smaller k): their {fewer} samples are replaced by "
                      f"{k} new ones each (the seeded draws of {k} samples per task are not those of fewer plus "
                      f"more)", UserWarning, stacklevel=3)
    drop = {i for i in mine if recs[i]["task_id"] in short}
    return [i for i in range(len(recs)) if i not in drop]


def _intact_lines(path: Path) -> list[str]:
    """Return the complete JSON lines of a samples file; a torn last write (and anything after it) is cut off."""
    if not path.exists():
        return []
    raw = path.read_text(encoding="utf-8").splitlines(keepends=True)
    lines = []
    for line in raw:
        try:
            json.loads(line)
        except json.JSONDecodeError:
            break
        if not line.endswith("\n"):
            break
        lines.append(line)
    if len(lines) != len(raw):
        _replace(path, lines)
    return lines


def _replace(path: Path, lines: list[str]) -> None:
    """Atomically replace the file's content by ``lines``."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(lines), encoding="utf-8")
    os.replace(tmp, path)


def _stream_to_jsonl(coder, suite, path: Path, *, k: int, temperature: float, seed: int, tasks, progress: bool):
    """Append samples as requests complete (one fsync per request); ask only for the (task, sample) missing."""
    from tqdm.auto import tqdm

    from ..validate import check_positive_int

    k = check_positive_int(k, name="k")
    model = coder.model_id
    have: dict = {}
    for line in _intact_lines(path):
        r = json.loads(line)
        if r.get("model") == model and r.get("temperature") == temperature:
            have.setdefault(r["task_id"], set()).add(int(r.get("sample", -1)))
    ids = list(tasks if tasks is not None else suite.tasks)
    todo = {t: [s for s in range(k) if s not in have.get(t, ())] for t in ids}
    todo = {t: s for t, s in todo.items() if s}
    total = sum(len(s) for s in todo.values())
    bar = tqdm(total=total, desc=f"{model} T={temperature:g}", unit="sample", disable=not progress)
    t0 = time.perf_counter()
    try:
        with open(path, "a", encoding="utf-8") as fh:
            for recs in coder.stream(suite, todo, temperature=temperature, seed=seed):
                fh.write("".join(json.dumps(r) + "\n" for r in recs))
                fh.flush()
                os.fsync(fh.fileno())
                bar.update(len(recs))
                st, dt = coder.stats, max(time.perf_counter() - t0, 1e-9)
                bar.set_postfix(req_s=f"{st['requests'] / dt:.1f}", tok_s=f"{st['completion_tokens'] / dt:.0f}",
                                errors=st["retries"], refresh=False)
    finally:
        bar.close()
    return path


def write_samples(records, path: str | os.PathLike) -> Path:
    """Write sample records as evalplus-format JSONL (``task_id`` + ``solution``, other fields kept)."""
    path = Path(path)
    with open(path, "w", encoding="utf-8") as fh:
        for r in records:
            fh.write(json.dumps(r) + "\n")
    return path


class ReplayCoder(Coder):
    """Replays existing generations (evalplus samples ``.jsonl`` or samples directory) through the coder interface.

    ``path`` is one file or directory, or a list of them (each its own config, as ``bayespass execute A B``).
    ``generate(suite, k, temperature=...)`` returns the first ``k`` samples of each task (all of them with
    ``k=None``) with the configs they have in the files: a record's own ``config``, its ``model`` (and
    ``temperature``), else its file's name (``model`` here renames that, for one file); ``temperature`` only
    labels the records that carry neither a config nor a temperature. ``suite`` is needed only by a
    bigcode-evaluation-harness generations file, which lists tasks by position
    (:func:`bayespass.execution.samples_io.read_samples`).
    """

    name = "replay"

    def __init__(self, path, *, model: str | None = None, suite=None):
        from ..execution.samples_io import file_config, read_samples, sample_paths

        paths = sample_paths(path) or [Path(os.fspath(path))]  # the latter: a TypeError naming what path was
        if model is not None and len(paths) > 1:
            raise ValueError(f"model={model!r} would name the samples of {len(paths)} files one model; each file "
                             "is named by its file name (or its records' 'model' or 'config')")
        self.path = paths[0]
        self.table = read_samples(paths if len(paths) > 1 else paths[0], suite=suite)
        self.model_id = model or file_config(paths[0])
        #: the files' own names: a record whose config is one of them named none itself
        self._file_names = {file_config(p): (model or file_config(p)) for p in paths}

    def _labelled(self, rec: dict, temperature: float | None) -> dict:
        """Keep a record's config if it named one; give one named by its file the file's (or ``model``) name."""
        from ..execution.samples_io import _config_of

        named = str(rec.pop("config"))
        if "model" in rec:
            if named != _config_of(rec, ""):
                rec["config"] = named
        elif named in self._file_names:
            rec["model"] = self._file_names[named]
        else:
            rec["config"] = named
        if temperature is not None and "config" not in rec:
            rec.setdefault("temperature", temperature)
        return rec

    def generate(self, suite=None, k: int | None = None, *, temperature: float | None = None, seed: int = 0,
                 tasks=None) -> list[dict]:
        """Return the stored records (first ``k`` per task), in file order."""
        t = self.table
        if tasks is not None:
            t = t[t["task"].isin(list(tasks))]
        if k is not None:
            t = t[t["sample"] < k]
        return [self._labelled({key: v for key, v in r.items() if key not in ("task", "sample")
                                and not (isinstance(v, float) and v != v)}, temperature)
                for r in t.to_dict("records")]
