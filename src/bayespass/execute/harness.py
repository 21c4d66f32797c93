"""Ground truth in the sandbox: recorded inputs, expected outputs of canonical solutions, load factor."""

from __future__ import annotations

import os
import queue
import statistics
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager

from .child import decode, encode
from .sandbox import Limits, Sandbox

__all__ = ["SlotPool", "expected_outputs", "measure_speed", "load_factor"]

_GT_TIME = 20.0  # generous wall limit for trusted canonical solutions
#: statuses of a ground-truth test that a re-run may fix (never cached as dropped)
TRANSIENT = ("timeout", "crash")


class SlotPool:
    """A fixed set of :class:`Sandbox` slots (each with its own uid and zygote) shared by worker threads."""

    def __init__(self, workers: int | None = None, *, limits: Limits | None = None, layer: str = "auto",
                 fresh: bool = False):
        from ..defaults import rcParams
        from ..validate import check_positive_int

        self.workers = check_positive_int(workers if workers is not None else rcParams["execute.workers"],
                                          name="workers")
        self._free: queue.Queue = queue.Queue()
        self._all = [Sandbox(limits=limits or Limits(), layer=layer, slot=slot, fresh=fresh)
                     for slot in range(self.workers)]
        for sb in self._all:
            self._free.put(sb)
        self.layer = self._all[0].layer

    def close(self) -> None:
        """Stop every slot's zygote and give the uids back."""
        for sb in self._all:
            sb.close()

    def __enter__(self) -> SlotPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @contextmanager
    def slot(self):
        """Borrow a sandbox slot."""
        sb = self._free.get()
        try:
            yield sb
        finally:
            self._free.put(sb)

    def map(self, fn: Callable, items: Iterable, *, on_done: Callable | None = None) -> list:
        """Run ``fn(sandbox, item)`` over items with one thread per slot; results in item order."""
        items = list(items)
        out = [None] * len(items)

        def run(i, item):
            with self.slot() as sb:
                return i, fn(sb, item)

        with ThreadPoolExecutor(self.workers) as pool:
            futs = [pool.submit(run, i, it) for i, it in enumerate(items)]
            for fut in as_completed(futs):
                i, res = fut.result()
                out[i] = res
                if on_done is not None:
                    on_done(items[i], res)
        return out


def _gt_run(sb: Sandbox, program: str, entry: str, tagged: list, **kw) -> list:
    """Run a trusted program; tests that time out or crash get one more try in a fresh child."""
    outs = sb.run(program, entry, tagged, [_GT_TIME] * len(tagged), **kw)
    again = [i for i, o in enumerate(outs) if o.status in TRANSIENT]
    if again:
        redo = sb.run(program, entry, [tagged[i] for i in again], [_GT_TIME] * len(again), **kw)
        for i, o in zip(again, redo, strict=True):
            outs[i] = o
    return outs


def _task_expected(sb: Sandbox, task) -> dict:
    from ..data.suites import recorder_program

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


def expected_outputs(suite, *, workers: int | None = None, layer: str = "auto") -> dict:
    """Return expected tagged outputs and ground-truth times for every task of ``suite``.

    Inputs on which the canonical solution raises are dropped and listed under
    ``"dropped"``; those on which it still times out or crashes after a re-run
    are listed under ``"transient"`` too (the caller must not cache them).
    Times are the wall-clock time from the call to the last byte of the result,
    as the supervisor measures candidates.
    """
    with SlotPool(workers or min(4, os.cpu_count() or 1), layer=layer,
                  limits=Limits(cpu_s=600, load_time_limit=30.0, retry_factor=3.0)) as pool:
        tasks = list(suite.tasks.values())
        results = pool.map(_task_expected, tasks)
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
            _SPEED[layer] = (time.monotonic(), now)
    return float(min(8.0, max(1.0, now / ref))) if now == now else 1.0
