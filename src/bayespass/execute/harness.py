"""Ground truth in the sandbox: recorded inputs and expected outputs of canonical solutions."""

from __future__ import annotations

import os
import queue
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager

from .child import decode, encode
from .sandbox import Limits, Sandbox

__all__ = ["SlotPool", "expected_outputs"]

_GT_TIME = 20.0  # generous wall limit for trusted canonical solutions


class SlotPool:
    """A fixed set of :class:`Sandbox` slots (distinct uids) shared by worker threads."""

    def __init__(self, workers: int | None = None, *, limits: Limits | None = None, layer: str = "auto"):
        from ..defaults import rcParams

        self.workers = int(workers or rcParams["execute.workers"])
        if self.workers < 1:
            raise ValueError(f"workers must be >= 1; got {workers!r}")
        self._free: queue.Queue = queue.Queue()
        for slot in range(self.workers):
            self._free.put(Sandbox(limits=limits or Limits(), layer=layer, slot=slot))
        first = self._free.get()
        self.layer = first.layer
        self._free.put(first)

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


def _task_expected(sb: Sandbox, task) -> dict:
    from ..data.suites import recorder_program

    inputs = task.inputs
    n_base = task.n_base
    if not inputs and task.test_code:  # HumanEval: record the inputs its check() uses
        rec = sb.run(recorder_program(task), "__bp_record__", [encode(())], [_GT_TIME])[0]
        if rec.status != "value":
            raise RuntimeError(f"recording the tests of {task.task_id} failed: {rec.status} {rec.error}")
        inputs = decode(rec.value)
        n_base = len(inputs)
    tagged = [encode(tuple(a)) for a in inputs]
    outs = sb.run(task.reference_program, task.entry_point, tagged, [_GT_TIME] * len(tagged),
                  output_not_none=task.output_not_none)
    keep = [i for i, o in enumerate(outs) if o.status == "value"]
    return {"inputs": [tagged[i] for i in keep], "values": [outs[i].value for i in keep],
            "times": [outs[i].duration for i in keep], "n_base": sum(1 for i in keep if i < n_base),
            "dropped": [i for i in range(len(outs)) if i not in keep]}


def expected_outputs(suite, *, workers: int | None = None, layer: str = "auto") -> dict:
    """Return expected tagged outputs and ground-truth times for every task of ``suite``.

    Inputs on which the canonical solution itself does not return a value
    (rare) are dropped and listed under ``"dropped"``.
    """
    pool = SlotPool(workers or min(4, os.cpu_count() or 1), layer=layer,
                    limits=Limits(cpu_s=600, load_time_limit=30.0, encode_time_limit=300.0))
    tasks = list(suite.tasks.values())
    results = pool.map(_task_expected, tasks)
    return {t.task_id: r for t, r in zip(tasks, results, strict=True)}
