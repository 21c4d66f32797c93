"""``bayespass.execute``: samples -> per-test verdicts and output digests (xarray)."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import threading
import warnings
from collections import Counter, deque
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from .._busy import exclusive
from .._version import __version__
from ..data.io import atomic_netcdf
from .child import decode
from .groundtruth import load_factor
from .harness import SlotPool, check_workers
from .judge import VERDICTS, _digest_of, digest, judge, judge_value, value_digest
from .samples_io import code_hash, read_samples
from .sandbox import HARNESS_VERSION, Limits, Outcome, Sandbox, check_layer
from .store import VerdictStore
from .twins import behaviour_key

__all__ = ["execute", "to_counts"]


def _prepare(suite, table: pd.DataFrame) -> pd.DataFrame:
    unknown = sorted(set(table["task"]) - set(suite.tasks))
    if unknown and len(unknown) == table["task"].nunique():
        raise ValueError(f"samples: none of the {len(unknown)} task id(s) is in suite {suite.name!r} "
                         f"(e.g. {unknown[:3]}; the suite's ids look like {next(iter(suite.tasks))!r})")
    if unknown:  # as evalplus: generations of the original MBPP include tasks MBPP+ dropped
        skipped = int(table["task"].isin(unknown).sum())
        warnings.warn(f"{len(unknown)} sample task id(s) are not in suite {suite.name!r} and are skipped "
                      f"({skipped} samples): {unknown[:5]}", UserWarning, stacklevel=3)
        table = table[~table["task"].isin(unknown)].reset_index(drop=True)
    codes = [suite.program(t, solution=r.get("solution") if isinstance(r.get("solution"), str) else None,
                           completion=r.get("completion") if isinstance(r.get("completion"), str) else None)
             for t, r in zip(table["task"], table.to_dict("records"), strict=True)]
    hashes = {c: code_hash(c) for c in set(codes)}  # once per exact text: real runs repeat programs verbatim
    table = table.assign(code=codes, code_hash=[hashes[c] for c in codes])
    _warn_one_program_per_task(table)
    return table


#: a config is warned about when at least this share of its tasks (with two or more samples) repeat one program
ONE_PROGRAM_SHARE = 0.95


def _warn_one_program_per_task(table: pd.DataFrame) -> None:
    """Warn for configs whose samples of (nearly) every task are one program: they are not independent draws.

    Greedy decoding, an endpoint that ignores the temperature or caches its answers, or one seed for every
    sample gives K copies of one program per task; counted as K samples, every task is all-pass or all-fail
    and pass@k is pass@1 at every k. Real code models sampled at T = 0.2 repeat one program on at most a third
    of MBPP's tasks (the real set in shared/), so the rule does not fire on them.
    """
    g = table.groupby(["config", "task"])["code_hash"]
    per = pd.DataFrame({"k": g.size(), "distinct": g.nunique()})
    per = per[per["k"] >= 2]
    if per.empty:
        return
    by = (per["distinct"] == 1).groupby(level="config")
    share, tasks = by.mean(), by.size()
    bad = [f"{str(c)!r} ({share[c]:.0%} of {tasks[c]} tasks)" for c in share.index
           if share[c] >= ONE_PROGRAM_SHARE and tasks[c] >= 10]
    if bad:
        warnings.warn(f"config(s) {', '.join(bad[:5])}{' ...' if len(bad) > 5 else ''}: each of these tasks' "
                      "samples is one program repeated, not independent draws (greedy decoding, an endpoint that "
                      "ignores the temperature or caches its answers, or one seed for every sample): each task is "
                      "then all-pass or all-fail and pass@k equals pass@1 at every k. Sample at a temperature above "
                      "0 with a seed per sample, or draw one sample per task", UserWarning, stacklevel=4)


def _encoded_len(v) -> int:
    """Length of a tagged value's JSON text (a digest marker counts as a large value)."""
    if isinstance(v, dict):
        return 1 << 30
    if isinstance(v, list):
        if not any(isinstance(e, list | dict) for e in v):  # leaves only: one pass, no call per element
            return 2 + sum(map(len, map(str, v))) + 3 * len(v)
        return 2 + sum(_encoded_len(e) + 1 for e in v)
    return len(str(v)) + 2


#: the smallest value cap a child is given (see :func:`task_cap`)
VALUE_CAP_FLOOR = 1 << 14


def task_cap(values, max_value_bytes: int) -> int:
    """Return the value cap of every test of a task: longer values come back from the child as their digest.

    A value more than 16x longer than the expected one cannot match it, so sending its digest instead loses
    nothing.  The cap goes to the child, which runs the candidate, so it must not tell one test's expected
    value from another's (a cap per test told a program that reads it from the harness's frame the length
    of each expected value: ``True`` from ``False``).  It is the same for every test of the task: 16x the
    longest expected value, rounded up to a power of two, at least :data:`VALUE_CAP_FLOOR` (so that the
    tasks whose expected values are all short, nearly all of them, get the same cap), at most
    ``max_value_bytes``.  It is never below the cap of any test alone, so a value sent whole before still is.
    """
    need = max((16 * _encoded_len(v) + 4096 for v in values), default=0)
    return min(max_value_bytes, max(VALUE_CAP_FLOOR, 1 << (need - 1).bit_length()))


_UNDECODED = object()

#: per task: the value caps of its jobs and its decoded expected values, kept across calls on the same suite
#: (a benchmark or a notebook that executes config after config would otherwise recompute them while the
#: sandbox slots wait: 11 s for MBPP+'s 378 tasks), keyed by the identity of the task's expected-values dict
_TASK_CACHE: dict[tuple[int, str], tuple] = {}
_TASK_CACHE_LOCK = threading.Lock()


def _per_task(e: dict, kind: str, make):
    key = (id(e), kind)
    with _TASK_CACHE_LOCK:
        hit = _TASK_CACHE.get(key)
    if hit is None or hit[0] is not e:
        value = make()
        with _TASK_CACHE_LOCK:
            if len(_TASK_CACHE) > 16_384:
                _TASK_CACHE.clear()
            hit = _TASK_CACHE[key] = (e, value)
    return hit[1]


def _same(out, exp) -> bool:
    """``out == exp`` for decoded values, False where the comparison raises."""
    try:
        return bool(out == exp)
    except (TypeError, ValueError, OverflowError, RecursionError):
        return False


class _Judge:
    """Per-task expected values (decoded once), time limits, value caps and the judging of outcomes."""

    def __init__(self, suite, limits: Limits, load_factor: float = 1.0):
        self.suite, self._limits, self.load_factor = suite, limits, load_factor
        self._expected: dict = {}
        self._digests: dict = {}  # canonical digests of expected values (judging values sent as digests)
        self._references: dict = {}  # behaviour digests of expected values
        self._jobs: dict = {}  # per task: the part of a job that does not depend on the program
        self._lock = threading.Lock()

    def __getstate__(self) -> dict:
        return {"suite": self.suite, "limits": self._limits, "load_factor": self.load_factor}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["suite"], state["limits"], state["load_factor"])

    def subset(self, task_ids) -> _Judge:
        """Return a judge holding only these tasks (what a Dask worker needs for one batch)."""
        from types import SimpleNamespace

        ids = list(dict.fromkeys(task_ids))
        sub = SimpleNamespace(name=self.suite.name, tasks={t: self.suite.tasks[t] for t in ids},
                              expected={t: self.suite.expected[t] for t in ids})
        return _Judge(sub, self._limits, self.load_factor)

    def expected(self, task_id: str) -> list:
        """Return the decoded expected values of a task (decoded once, on first use)."""
        with self._lock:
            if task_id not in self._expected:
                e = self.suite.expected[task_id]
                self._expected[task_id] = _per_task(e, "expected", lambda: [decode(v) for v in e["values"]])
            return self._expected[task_id]

    def job(self, task_id: str, code: str) -> dict:
        """Return the job for one program of a task (its tests, limits and value caps are computed once per task)."""
        if task_id not in self._jobs:
            t, e, lim = self.suite.tasks[task_id], self.suite.expected[task_id], self._limits
            caps = _per_task(e, f"task-caps{lim.max_value_bytes}",
                             lambda: [task_cap(e["values"], lim.max_value_bytes)] * len(e["values"]))
            self._jobs[task_id] = {"entry_point": t.entry_point, "inputs": e["inputs"],
                                   "time_limits": [self.load_factor * lim.time_limit(x) for x in e["times"]],
                                   "output_not_none": t.output_not_none, "caps": caps}
        return {"code": code, **self._jobs[task_id]}

    def expected_digest(self, task_id: str, i: int) -> str | None:
        """Canonical digest of an expected value (computed once: seconds for a million-element list)."""
        key = (task_id, i)
        if key not in self._digests:
            across = _per_task(self.suite.expected[task_id], "digests", dict)  # {test: digest}, across calls
            if i not in across:
                across[i] = _digest_of(self.expected(task_id)[i])
            self._digests[key] = across[i]
        return self._digests[key]

    def reference_digest(self, task_id: str, i: int) -> int:
        """Behaviour digest of a test's expected value (computed once)."""
        if (task_id, i) not in self._references:
            t, e = self.suite.tasks[task_id], self.suite.expected[task_id]
            across = _per_task(e, f"references {t.atol!r} {t.set_equal!r}", dict)
            if i not in across:
                across[i] = digest(Outcome("value", e["values"][i]), atol=t.atol, set_equal=t.set_equal)
            self._references[task_id, i] = across[i]
        return self._references[task_id, i]

    def judged(self, task_id: str, i: int, o: Outcome) -> Outcome:
        """Set the verdict and the behaviour digest of an outcome and drop its value.

        The value is decoded once; an output exactly equal (``==``) to the expected one has the expected
        value's digest (the normalisation is a function of ``==``), computed once per test.
        """
        t, exp = self.suite.tasks[task_id], self.expected(task_id)[i]
        out = _UNDECODED
        if o.status == "value" and not isinstance(o.value, dict):
            try:
                out = decode(o.value)
            except (ValueError, TypeError, RecursionError, OverflowError):
                pass
        if out is _UNDECODED:
            o.verdict = judge(o, exp, atol=t.atol, entry_point=t.entry_point, inp=t.inputs[i],
                              expected_digest=lambda: self.expected_digest(task_id, i))
            o.digest = digest(o, atol=t.atol, set_equal=t.set_equal) if o.status != "not_run" else 0
        else:
            o.verdict = judge_value(out, exp, atol=t.atol, entry_point=t.entry_point, inp=t.inputs[i],
                                    expected_digest=lambda: self.expected_digest(task_id, i), exact_only=o.exact_only)
            o.digest = (self.reference_digest(task_id, i) if o.verdict == "pass" and _same(out, exp)
                        else value_digest(out, atol=t.atol, set_equal=t.set_equal))
        o.value = None
        return o

    def score(self, task_id: str, outcomes: list[Outcome]):
        for i, o in enumerate(outcomes):
            if o.verdict is None:
                self.judged(task_id, i, o)
        v = [VERDICTS[o.verdict] for o in outcomes]
        d = [o.digest for o in outcomes]
        flags = [int(o.retried) | 2 * int(o.presumed) for o in outcomes]
        return v, d, [o.duration for o in outcomes], flags


def _run_job(sb: Sandbox, job: dict, *, stop=None, judge_fn=None, max_timeouts=None) -> list[Outcome]:
    return sb.run(job["code"], job["entry_point"], job["inputs"], job["time_limits"],
                  output_not_none=job["output_not_none"], stop=stop, judge=judge_fn, caps=job["caps"],
                  max_timeouts=max_timeouts)


#: per dask-worker thread: one sandbox (and its zygote) kept across batches, keyed by its settings
_WORKER = threading.local()


def _worker_sandbox(limits: Limits, layer: str, fresh: bool) -> Sandbox:
    """Return this worker thread's sandbox for these settings (started once, closed at exit)."""
    cache = getattr(_WORKER, "sandboxes", None)
    if cache is None:
        cache = _WORKER.sandboxes = {}
    key = (limits, layer, fresh)
    if key not in cache:
        import atexit

        cache[key] = sb = Sandbox(limits=limits, layer=layer, fresh=fresh)
        atexit.register(sb.close)
    return cache[key]


def _remote_batch(judge_: _Judge, items: list[tuple[str, str]], layer: str, max_timeouts: int | None = None,
                  fresh: bool = False, fast_check: bool = False) -> list[tuple]:
    """Dask worker entry point: run and judge a batch of ``(task, code)`` in this worker's own sandbox."""
    sb = _worker_sandbox(judge_._limits, layer, fresh)
    return [judge_.score(task, _judged_run(sb, judge_, task, judge_.job(task, code), fast_check, max_timeouts))
            for task, code in items]


def _tests_of(judge_: _Judge) -> _Judge:
    """Return ``judge_`` (a Dask task whose result, a batch's tests, workers fetch once and share)."""
    return judge_


def _judged_run(sb: Sandbox, judge_: _Judge, task: str, job: dict, fast_check: bool, max_timeouts) -> list[Outcome]:
    """Run one program, judging each test as it arrives (and stopping at the first failure with fast_check)."""
    stop = (lambda i, o: o.verdict != "pass") if fast_check else None
    return _run_job(sb, job, stop=stop, max_timeouts=max_timeouts, judge_fn=lambda i, o: judge_.judged(task, i, o))


def _progress(total: int, enabled: bool):
    if enabled and total:
        from tqdm.auto import tqdm  # a widget in Jupyter
    else:  # no bar: tqdm.auto would still warn, in a notebook without ipywidgets, at its import
        from tqdm import tqdm

    # nothing to run (every verdict reused): no bar, which tqdm would print empty at its start and again at close
    return tqdm(total=total, desc="executing programs", unit="prog", disable=not enabled or total == 0,
                smoothing=0.05)


_DEFAULT = "default"


def _check_max_timeouts(max_timeouts):
    from ..defaults import rcParams

    if max_timeouts == _DEFAULT:
        return rcParams["execute.max_timeouts"]
    if max_timeouts is not None and (isinstance(max_timeouts, bool) or not isinstance(max_timeouts, int)
                                     or max_timeouts < 1):
        raise ValueError(f"max_timeouts must be a positive integer or None (every test runs to its own "
                         f"limit); got {max_timeouts!r}")
    return max_timeouts


def execute(samples, suite, *, out: str | os.PathLike | None = None, workers: int | None = None,
            limits: Limits | None = None, layer: str = "auto", fast_check: bool = False,
            scheduler=None, progress: bool = True, reuse=(), max_timeouts: int | None | str = _DEFAULT,
            fresh_interpreter: bool = False, detail: str = "test", dedup: str = "behaviour") -> xr.Dataset:
    """Execute every sample against its task's tests in the sandbox.

    Parameters
    ----------
    samples : path, list of paths, list of dict or DataFrame
        evalplus-format samples (see :func:`bayespass.execution.samples_io.read_samples`); several files or
        directories are a config each (named by their records' ``model`` or ``config``, else by the file).
    suite : Suite
        From :func:`bayespass.load_suite` (expected outputs are computed if missing).
    out : path, optional
        Run directory: verdicts are committed to ``out/verdicts.sqlite`` as
        they are judged (re-running resumes) and the dataset is written to
        ``out/samples.nc``.
    workers : int, optional
        Sandbox slots (default: ``rcParams["execute.workers"]`` = cores).
    limits : Limits, optional
        Resource and time limits (evalplus defaults: 1 s / 4x ground truth).
    layer : str
        Isolation layer (``"auto"``: the strongest that works here; see
        :class:`~bayespass.execution.sandbox.Sandbox`).
    fast_check : bool
        Stop a program at its first non-passing test (the rest ``not_run``).
    scheduler : str or dask Client/LocalCluster, optional
        Run program batches on a Dask cluster instead of local slots.
    progress : bool
        Show a progress bar (programs done, rate, ETA).
    max_timeouts : int or None
        After this many timed-out tests of a program (default
        ``rcParams["execute.max_timeouts"]`` = 1) its remaining tests share
        ``limits.timeout_budget`` seconds (0.5), each at most
        ``limits.budget_step`` (0.1 s) of it before the next one starts in a
        fresh child; tests that do not finish in that are recorded as
        timeouts (``presumed``; duration NaN).
        A program with a timeout is incorrect either way, so correctness never
        changes; ``None`` runs every test to its own limit.
    reuse : sequence of path
        Other run directories (or ``verdicts.sqlite`` files) whose results for
        the same programs, test sets and harness version are imported instead
        of re-executed (e.g. the synthetic coder's pool run).
    fresh_interpreter : bool
        Start a fresh interpreter per program instead of forking from the
        slot's zygote (slower; kept for comparison).
    dedup : {"behaviour", "text"}
        ``"text"``: textually identical programs (after removing comments and
        blank lines) are executed once.  ``"behaviour"`` (default): also
        programs that differ only in docstrings, string statements or an
        ``if __name__ == "__main__":`` block, which never runs here, unless the
        program could observe them (:mod:`bayespass.execution.twins`); a twin
        gets its representative's verdicts, digests and durations.
    detail : {"test", "sample"}
        ``"test"``: every test's verdict (below).  ``"sample"``: per sample
        only (``exists``, ``executed``, ``correct``, ``base_correct``,
        ``n_timeout``, ``n_presumed``, ``n_retried``, ``program``), for runs
        too large to hold config x task x sample x test in memory.

    Returns
    -------
    xarray.Dataset
        Dims ``(config, task, sample, test)``: ``verdict`` (int8; codes in
        ``attrs["verdict_codes"]``, -1 where the test or sample does not
        exist), ``digest`` (int64 behaviour digest), ``duration`` (s, wall
        clock as the supervisor saw it), ``retried`` (the test timed out and
        was re-run with a larger limit) and ``presumed`` (recorded as a timeout
        without running, see ``max_timeouts``); per sample ``exists``,
        ``program`` (60-bit hash of the normalised code: equal for textually
        identical programs), ``correct`` (all tests pass), ``base_correct``
        (all base tests pass) and, when the records carry them,
        ``mean_logprob``, ``n_tokens`` and ``correct_true`` (NaN where
        missing); per (task, test) ``is_plus`` (-1 where the task has fewer
        tests) and ``reference_digest`` (the canonical solution's digest).
    """
    limits, max_timeouts, workers, layer = _check_args(limits, max_timeouts, detail, workers, layer, scheduler)
    if dedup not in ("behaviour", "text"):
        raise ValueError(f"dedup={dedup!r}: expected 'behaviour' or 'text'")
    # results with presumed timeouts are stored under their own key, never mixed with complete runs
    harness = (HARNESS_VERSION if max_timeouts is None else
               f"{HARNESS_VERSION}+t{max_timeouts}b{limits.timeout_budget:g}s{limits.budget_step:g}")
    table = _prepare(suite, read_samples(samples, suite=suite))
    tmp = tempfile.TemporaryDirectory(prefix="bayespass-run-") if out is None else None
    out = Path(tmp.name if tmp is not None else out)
    # one writer per directory (an out that is a file is refused there)
    with exclusive(out, name="out") if tmp is None else contextlib.nullcontext():
        from .groundtruth import ground_truth

        ground_truth(suite, workers=workers, tasks=table["task"].unique())  # of the tasks sampled, where missing
        store = VerdictStore(out / "verdicts.sqlite")
        try:
            todo, testsets = _todo(store, table, suite, harness, reuse)
            _say_what_is_judged_again(store, harness, len(todo))
            todo, twins, n_copied = _twins(store, todo, testsets, harness) if dedup == "behaviour" else (todo, {}, 0)
            factor = load_factor(suite, layer) if len(todo) and scheduler is None else 1.0
            judge_ = _Judge(suite, limits, factor)
            jobs = [(t, h, judge_.job(t, c))
                    for t, h, c in zip(todo["task"], todo["code_hash"], todo["code"], strict=True)]
            layer_used = _run(jobs, judge_, store, testsets, limits=limits, layer=layer, workers=workers,
                              fast_check=fast_check, scheduler=scheduler, progress=progress,
                              max_timeouts=max_timeouts, harness=harness, fresh=fresh_interpreter, twins=twins)
            results = store.get(harness, testsets, programs=set(zip(table["task"], table["code_hash"], strict=True)))
            ds = (_dataset(table, suite, results, judge_.reference_digest) if detail == "test"
                  else _sample_dataset(table, suite, results))
        finally:
            store.close()
        ds.attrs.update(suite=suite.name, suite_hash=suite.source_hash, suite_source=suite.source,
                        harness_version=harness,
                        sandbox_layer=layer_used, bayespass_version=__version__, fast_check=int(fast_check),
                        min_time_limit=limits.min_time_limit, gt_time_factor=limits.gt_time_factor,
                        memory_mb=limits.memory_mb, n_samples=len(table), load_factor=float(factor),
                        max_timeouts=-1 if max_timeouts is None else int(max_timeouts),
                        mode="fresh-interpreter" if fresh_interpreter or layer_used == "bwrap" else "zygote",
                        n_unique_programs=int(table.drop_duplicates(["task", "code_hash"]).shape[0]), dedup=dedup,
                        n_run=len(jobs), n_twins=sum(len(hs) for _, hs in twins.values()) + n_copied,
                        verdict_codes=json.dumps(VERDICTS))
        if tmp is None:
            atomic_netcdf(ds, out / "samples.nc")
        else:
            tmp.cleanup()
    return ds


def _check_args(limits, max_timeouts, detail, workers, layer, scheduler):
    """Validate execute()'s arguments before any work; return (limits, max_timeouts, workers, layer)."""
    from ..validate import check_choice

    limits = limits or Limits()
    if not isinstance(limits, Limits):
        raise TypeError(f"limits must be a bayespass.Limits; got {type(limits).__name__}")
    max_timeouts = _check_max_timeouts(max_timeouts)
    check_choice(detail, ("test", "sample"), name="detail")
    if workers is not None:
        workers = check_workers(workers)
    return limits, max_timeouts, workers, check_layer(layer) if scheduler is None else layer


def _say_what_is_judged_again(store, harness: str, n_todo: int) -> None:
    """Warn when a run directory holds results judged under another harness string, which are not used."""
    other = store.other_harnesses(harness) if n_todo else {}
    if other:
        listed = ", ".join(f"{n} under {h!r}" for h, n in sorted(other.items()))
        warnings.warn(f"{store.path} holds results judged by another bayespass harness or other timeout "
                      f"settings ({listed}); they are not used under {harness!r}, so {n_todo} program(s) run now "
                      f"(the harness versions are listed at bayespass.execution.sandbox.HARNESS_VERSION)",
                      UserWarning, stacklevel=3)


def _todo(store, table, suite, harness, reuse):
    """Record the samples in the store, import reusable results; return the programs still to run."""
    extra = [json.dumps({k: v for k, v in r.items() if k in ("mean_logprob", "n_tokens", "correct_true")},
                        default=float) for r in table.to_dict("records")]
    store.add_samples(list(zip(table["config"], table["task"], table["sample"].astype(int),
                               table["code_hash"], extra, strict=True)))
    testsets = {t: suite.testset_hash(t) for t in table["task"].unique()}
    for other in ([reuse] if isinstance(reuse, str | os.PathLike) else reuse):
        other = Path(other)
        store.import_results(other / "verdicts.sqlite" if other.is_dir() else other, harness, testsets)
    done = store.done(testsets, harness)
    todo = table.drop_duplicates(["task", "code_hash"])
    return todo[[(t, h) not in done for t, h in zip(todo["task"], todo["code_hash"], strict=True)]], testsets


def _twins(store, todo: pd.DataFrame, testsets: dict, harness: str) -> tuple[pd.DataFrame, dict, int]:
    """Keep one program per (task, behaviour key); copy the results of twins judged before.

    Returns the programs to run, ``{(task, code_hash): (key, [twin code hashes])}`` for the kept ones, and the
    number of programs given the stored results of a twin.
    """
    done = store.twins_done(testsets, harness) if len(todo) else {}
    keep, kept, copies = [], {}, {}
    for t, h, c in zip(todo["task"], todo["code_hash"], todo["code"], strict=True):
        k = behaviour_key(c)
        if k is not None and (t, k) in done:
            copies.setdefault((t, done[t, k]), []).append(h)
        elif k is not None and (t, k) in kept:
            kept[t, k][1].append(h)
        elif k is not None:
            kept[t, k] = (h, [])
        keep.append(k is None or kept.get((t, k), ("",))[0] == h)
    for (t, source), targets in copies.items():
        store.copy(t, source, targets, testsets[t], harness)
    twins = {(t, h): (k, hs) for (t, k), (h, hs) in kept.items()}
    return todo[np.array(keep, bool)], twins, sum(map(len, copies.values()))


def _run(jobs, judge_, store, testsets, *, limits, layer, workers, fast_check, scheduler, progress,
         max_timeouts=None, harness=HARNESS_VERSION, fresh=False, twins=None) -> str:
    bar = _progress(len(jobs), progress)
    twins = twins or {}

    def record(task, h, scored):
        key, hs = twins.get((task, h), (None, ()))
        store.put(task, h, testsets[task], harness, *scored, twins=hs, bkey=key)
        bar.update(1)

    try:
        if scheduler is not None:
            return _run_dask(jobs, judge_, record, layer=layer, scheduler=scheduler, max_timeouts=max_timeouts,
                             fresh=fresh, fast_check=fast_check)
        pool = SlotPool(workers, limits=limits, layer=layer, fresh=fresh)
        try:
            pool.map(lambda sb, item: _judged_run(sb, judge_, item[0], item[2], fast_check, max_timeouts), jobs,
                     on_done=lambda item, outs: record(item[0], item[1], judge_.score(item[0], outs)))
        finally:
            pool.close()
        return pool.layer
    finally:
        bar.close()


def _batches(jobs: list, n_workers: int):
    """Yield ``(task, batch)``: up to 8 programs of one task, fewer as the work left shrinks.

    Batches are cut when they are submitted, at ``ceil(left / (32 * n_workers))`` programs (at most 8), so
    the last ``32 * n_workers`` go one at a time: a worker is not left alone with a long batch of a slow task while
    the others idle (with batches of 8 throughout, the last 1% of a real MBPP run took 15% of its time).
    """
    todo = deque(sorted(jobs, key=lambda j: j[0]))  # grouped by task: a task's tests travel once
    while todo:
        size = max(1, min(8, -(-len(todo) // (32 * n_workers))))
        task, batch = todo[0][0], []
        while todo and len(batch) < size and todo[0][0] == task:
            batch.append(todo.popleft())
        yield task, batch


def _dask_client(scheduler):
    """Return a client of ``scheduler`` (an address or a Client) and its number of workers (at least 1).

    Says when the scheduler cannot be reached (an error) or has no workers yet (a warning: the run waits for one).
    """
    from dask.distributed import Client

    try:
        client = scheduler if isinstance(scheduler, Client) else Client(scheduler)
    except OSError as err:  # distributed's "Timed out trying to connect", a refused or unresolvable address
        raise ConnectionError(f"scheduler={scheduler!r}: cannot reach the Dask scheduler ({err}); start one there "
                              f"('dask scheduler') with workers ('dask worker {scheduler} --nthreads 1'), or leave "
                              "the scheduler out to run in local sandbox slots") from None
    n_workers = len(client.scheduler_info()["workers"])
    if not n_workers:  # the run waits for them, its bar at 0 until one joins
        warnings.warn(f"the Dask scheduler {client.scheduler.address} has no workers yet: the programs wait until one "
                      f"joins ('dask worker {client.scheduler.address} --nthreads 1')", UserWarning, stacklevel=4)
    return client, max(1, n_workers)


def _run_dask(jobs, judge_, record, *, layer, scheduler, max_timeouts=None, fresh=False, fast_check=False) -> str:
    """Stream small batches of programs through a Dask cluster, a bounded number in flight.

    A batch carries its programs, and depends on a Dask task holding its task's tests and expected outputs
    (sent once per task); the worker runs and judges the programs and sends back verdicts and digests,
    which are committed to the store as they arrive. So an interrupted run resumes, and a lost worker costs
    only its batches in flight, which Dask re-runs elsewhere.
    """
    from dask.distributed import as_completed

    client, n_workers = _dask_client(scheduler)
    try:
        left = Counter(t for t, _, _ in jobs)  # programs of each task not yet recorded
        tests, pending, done, todo = {}, {}, as_completed(), _batches(jobs, n_workers)

        def submit() -> None:
            task, batch = next(todo, (None, None))
            if batch is None:
                return
            if task not in tests:
                # the task's tests go to the cluster once, as a task of their own (recomputed from the
                # scheduler's copy if the worker holding them is lost), not with every batch of that task
                tests[task] = client.submit(_tests_of, judge_.subset([task]), pure=False)
            fut = client.submit(_remote_batch, tests[task], [(t, j["code"]) for t, _, j in batch], layer,
                                max_timeouts, fresh, fast_check, pure=False)
            pending[fut] = task, batch
            done.add(fut)

        with warnings.catch_warnings():  # a task's tests above 10 MB (MBPP+ inputs): sent once, on purpose
            warnings.filterwarnings("ignore", "Sending large graph", UserWarning)
            for _ in range(4 * n_workers):
                submit()
            for fut in done:
                task, batch = pending.pop(fut)
                for (_, h, _), scored in zip(batch, fut.result(), strict=True):
                    record(task, h, scored)
                fut.release()
                left[task] -= len(batch)
                if not left[task]:
                    tests.pop(task).release()
                submit()
        return layer if layer != "auto" else "auto (per dask worker)"
    finally:
        if client is not scheduler:
            client.close()


#: numeric per-sample fields carried from the sample records into the dataset
_EXTRAS = ("mean_logprob", "n_tokens", "correct_true")


def _config_coords(table: pd.DataFrame, configs: list) -> dict:
    """``model`` and ``temperature`` per config where some config's records carry them.

    A config whose records carry none (a file named without a temperature beside files named with one) is its own
    model at an unknown temperature (NaN).
    """
    out = {}
    first = table.drop_duplicates("config").set_index("config")
    if "model" in first and first["model"].notna().any():
        out["model"] = ("config", [str(first.at[c, "model"]) if pd.notna(first.at[c, "model"]) else str(c)
                                   for c in configs])
    if "temperature" in first:
        temps = pd.to_numeric(first["temperature"], errors="coerce")
        if temps.notna().any():
            out["temperature"] = ("config", [float(temps.at[c]) for c in configs])
    return out


def _logprob_note(lp, exists) -> dict:
    """``{"mean_logprob_note": ...}`` when some or all samples lack a mean token log-probability."""
    if lp is None:
        return {"mean_logprob_note": "no sample carries a mean token log-probability (the coder or server "
                                     "returned none): gating's logprob baseline is skipped"}
    missing = int(np.isnan(lp[exists]).sum())
    if missing:
        return {"mean_logprob_note": f"{missing} of {int(exists.sum())} samples carry no mean token "
                                     "log-probability (the coder or server returned none)"}
    return {}


def _dataset(table: pd.DataFrame, suite, results: dict, reference_digest) -> xr.Dataset:
    configs = list(dict.fromkeys(table["config"]))
    in_table = set(table["task"])
    tasks = [t for t in suite.tasks if t in in_table]
    n_samp = int(table["sample"].max()) + 1
    n_test = max(len(suite.expected[t]["values"]) for t in tasks)
    ci = {c: i for i, c in enumerate(configs)}
    ti = {t: i for i, t in enumerate(tasks)}
    shape = (len(configs), len(tasks), n_samp, n_test)
    verdict = np.full(shape, VERDICTS["absent"], np.int8)
    dig = np.zeros(shape, np.int64)
    dur = np.full(shape, np.nan, np.float32)
    flags = np.zeros(shape, np.int8)
    exists = np.zeros(shape[:3], bool)
    program = np.zeros(shape[:3], np.int64)
    extras = {k: np.full(shape[:3], np.nan) for k in _EXTRAS if k in table.columns}
    for row, (cfg, task, s, h) in enumerate(zip(table["config"], table["task"], table["sample"], table["code_hash"],
                                                strict=True)):
        key = (task, h)
        idx = (ci[cfg], ti[task], int(s))
        exists[idx] = True
        program[idx] = int(h[:15], 16)
        for k, arr in extras.items():
            val = table[k].iat[row]
            if val is not None and not (isinstance(val, float) and np.isnan(val)):
                arr[idx] = float(val)
        n = len(suite.expected[task]["values"])
        if key in results:
            v, d, u, f = results[key]
            verdict[idx][:n], dig[idx][:n], dur[idx][:n], flags[idx][:n] = v, d, u, f
        else:
            verdict[idx][:n] = VERDICTS["not_run"]
    is_plus = np.zeros((len(tasks), n_test), np.int8) - 1
    ref = np.zeros((len(tasks), n_test), np.int64)
    for t in tasks:
        n, nb = len(suite.expected[t]["values"]), suite.expected[t]["n_base"]
        is_plus[ti[t], :nb], is_plus[ti[t], nb:n] = 0, 1
        ref[ti[t], :n] = [reference_digest(t, i) for i in range(n)]
    notes = _logprob_note(extras.get("mean_logprob"), exists)
    present = verdict != VERDICTS["absent"]
    passed = (verdict == VERDICTS["pass"]) | ~present
    base_mask = (is_plus == 0)[None, :, None, :]
    dims = ("config", "task", "sample", "test")
    return xr.Dataset(
        {"verdict": (dims, verdict), "digest": (dims, dig), "duration": (dims, dur),
         "retried": (dims, (flags & 1).astype(bool)), "presumed": (dims, (flags & 2).astype(bool)),
         "exists": (dims[:3], exists), "program": (dims[:3], program),
         **{k: (dims[:3], v) for k, v in extras.items()},
         "correct": (dims[:3], exists & passed.all(-1)),
         "base_correct": (dims[:3], exists & (passed | ~base_mask).all(-1)),
         "is_plus": (("task", "test"), is_plus), "reference_digest": (("task", "test"), ref)},
        coords={"config": configs, "task": tasks, "sample": np.arange(n_samp), "test": np.arange(n_test),
                **_config_coords(table, configs)}, attrs=notes)


def _sample_dataset(table: pd.DataFrame, suite, results: dict) -> xr.Dataset:
    """Per-sample summary (no test dimension): for runs too large to keep every verdict."""
    configs = list(dict.fromkeys(table["config"]))
    in_table = set(table["task"])
    tasks = [t for t in suite.tasks if t in in_table]
    n_samp = int(table["sample"].max()) + 1
    ci = {c: i for i, c in enumerate(configs)}
    ti = {t: i for i, t in enumerate(tasks)}
    shape = (len(configs), len(tasks), n_samp)
    summary = {}
    for (task, h), (v, _, _, f) in results.items():
        nb = suite.expected[task]["n_base"]
        ok = v == VERDICTS["pass"]
        summary[task, h] = (bool(ok.all()), bool(ok[:nb].all()), int((v == VERDICTS["timeout"]).sum()),
                            int(((f & 2) > 0).sum()), int(((f & 1) > 0).sum()))
    arrays = {k: np.zeros(shape, dt) for k, dt in (("exists", bool), ("correct", bool), ("base_correct", bool),
                                                   ("n_timeout", np.int32), ("n_presumed", np.int32),
                                                   ("n_retried", np.int32), ("executed", bool))}
    program = np.zeros(shape, np.int64)
    for cfg, task, smp, h in zip(table["config"], table["task"], table["sample"], table["code_hash"], strict=True):
        idx = (ci[cfg], ti[task], int(smp))
        arrays["exists"][idx] = True
        program[idx] = int(h[:15], 16)
        if (task, h) in summary:
            arrays["executed"][idx] = True
            for k, val in zip(("correct", "base_correct", "n_timeout", "n_presumed", "n_retried"),
                              summary[task, h], strict=True):
                arrays[k][idx] = val
    dims = ("config", "task", "sample")
    return xr.Dataset({k: (dims, a) for k, a in arrays.items()} | {"program": (dims, program)},
                      coords={"config": configs, "task": tasks, "sample": np.arange(n_samp),
                              **_config_coords(table, configs)})


def to_counts(samples_ds: xr.Dataset, *, correctness: str = "plus", passed: str | None = None) -> xr.Dataset:
    """Reduce an executed samples dataset to a counts dataset (``n``, ``c`` per config x task).

    ``correctness="plus"``: all tests pass; ``"base"``: all base tests pass.  Results judged elsewhere count too:
    a pandas DataFrame of one row per sample (``task`` or ``task_id``, a pass column named by ``passed`` or one
    of ``passed, correct, pass, is_correct, success, status``, and ``config`` or ``model``/``temperature``/
    ``benchmark``), or a boolean (0/1, NaN = not drawn) ``xarray.DataArray`` over ``(config,) task x sample``.

    Examples
    --------
    >>> import pandas as pd, bayespass as bp
    >>> df = pd.DataFrame({"task": ["t0", "t0", "t1"], "passed": [True, False, True]})
    >>> bp.to_counts(df)[["n", "c"]].to_dataframe()[["n", "c"]].values.tolist()
    [[2, 1], [1, 1]]
    """
    from ..data.io import samples_to_counts

    return samples_to_counts(samples_ds, correctness, passed)
