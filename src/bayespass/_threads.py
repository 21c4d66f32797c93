"""Threads for NumPy-heavy loops: NumPy releases the GIL inside its array operations."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any


def thread_map(fn: Callable[[Any], Any], items: Iterable, workers: int | None = None) -> list:
    """Return ``[fn(x) for x in items]``, computed in ``workers`` threads (``rcParams["eb.cores"]`` by default).

    Only for functions whose work is in large NumPy operations and that write no shared state but their
    own outputs; the results (and any random draws, which must come from per-item generators) do not
    depend on the number of threads.
    """
    items = list(items)
    if workers is None:
        from .defaults import rcParams

        workers = int(rcParams["eb.cores"])
    if workers <= 1 or len(items) < 2:
        return [fn(x) for x in items]
    with ThreadPoolExecutor(min(workers, len(items))) as pool:
        return list(pool.map(fn, items))
