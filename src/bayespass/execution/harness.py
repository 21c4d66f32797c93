"""A pool of sandbox slots shared by worker threads."""

from __future__ import annotations

import os
import queue
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager

from .sandbox import _UID_BASE, _UID_COUNT, Limits, Sandbox

__all__ = ["SlotPool", "check_workers"]


def check_workers(workers) -> int:
    """Return ``workers`` if it is a positive integer this host can give a sandbox uid each, else raise ValueError."""
    from ..validate import check_positive_int

    workers = check_positive_int(workers, name="workers")
    if os.getuid() == 0 and workers > _UID_COUNT:  # as root a slot claims a uid of its own (sandbox.claim_uid)
        raise ValueError(f"workers must be at most {_UID_COUNT} (each slot runs its programs as a uid of its own, "
                         f"{_UID_BASE}..{_UID_BASE + _UID_COUNT - 1}); got {workers}")
    return workers


class SlotPool:
    """A fixed set of :class:`Sandbox` slots (each with its own uid and zygote) shared by worker threads."""

    def __init__(self, workers: int | None = None, *, limits: Limits | None = None, layer: str = "auto",
                 fresh: bool = False):
        from ..defaults import rcParams

        self.workers = check_workers(workers if workers is not None else rcParams["execute.workers"])
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

    def map(self, fn: Callable, items: Iterable, *, on_done: Callable | None = None, desc: str | None = None) -> list:
        """Run ``fn(sandbox, item)`` over items with one thread per slot; results in item order.

        ``desc`` given: a progress bar so labelled, for 20 items or more (a real suite's tasks, not a toy's).
        An exception (Ctrl-C's ``KeyboardInterrupt``, an error in ``fn`` or ``on_done``) cancels the items
        not yet started: only the programs in flight, one per slot, are waited for before it propagates.
        """
        from tqdm.auto import tqdm

        items = list(items)
        out = [None] * len(items)
        bar = tqdm(total=len(items), desc=desc, unit="task", disable=desc is None or len(items) < 20)

        def run(i, item):
            with self.slot() as sb:
                return i, fn(sb, item)

        pool = ThreadPoolExecutor(self.workers)
        try:
            futs = [pool.submit(run, i, it) for i, it in enumerate(items)]
            for fut in as_completed(futs):
                i, res = fut.result()
                out[i] = res
                bar.update(1)
                if on_done is not None:
                    on_done(items[i], res)
        finally:  # a plain ``with`` would run every queued item first (minutes of a real suite after Ctrl-C)
            pool.shutdown(wait=True, cancel_futures=True)
            bar.close()
        return out
