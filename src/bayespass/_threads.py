"""Threads for NumPy-heavy loops: NumPy releases the GIL inside its array operations."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

#: one pool per number of workers, kept between calls: the HMC of ``shared`` maps over its chains ~7,000 times
#: per fit, and starting two threads per call cost 8 of its 122 s (34 configs x 378 tasks, 50 samples each)
_POOLS: dict[int, ThreadPoolExecutor] = {}
_LOCK = threading.Lock()
_LOCAL = threading.local()


def _mark_worker() -> None:
    _LOCAL.worker = True


def _forget_pools() -> None:  # a forked child has the pools' objects but not their threads
    _POOLS.clear()


os.register_at_fork(after_in_child=_forget_pools)


def _pool(workers: int) -> ThreadPoolExecutor:
    with _LOCK:
        pool = _POOLS.get(workers)
        if pool is None:
            pool = _POOLS[workers] = ThreadPoolExecutor(workers, thread_name_prefix="bayespass",
                                                        initializer=_mark_worker)
        return pool


def thread_map(fn: Callable[[Any], Any], items: Iterable, workers: int | None = None) -> list:
    """Return ``[fn(x) for x in items]``, computed in ``workers`` threads (``rcParams["eb.cores"]`` by default).

    Only for functions whose work is in large NumPy operations and that write no shared state but their
    own outputs; the results (and any random draws, which must come from per-item generators) do not
    depend on the number of threads.  The threads are kept for the next call; a call made from one of them
    (nested) gets threads of its own, so it never waits on a pool that its caller occupies.
    """
    items = list(items)
    if workers is None:
        from .defaults import rcParams

        workers = int(rcParams["eb.cores"])
    if workers <= 1 or len(items) < 2:
        return [fn(x) for x in items]
    if getattr(_LOCAL, "worker", False):
        with ThreadPoolExecutor(min(workers, len(items))) as pool:
            return list(pool.map(fn, items))
    return list(_pool(workers).map(fn, items))
