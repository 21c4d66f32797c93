"""Trace one execution of real MBPP+ samples: when each program finished, and how busy the CPU was.

Shows whether a run ends with one core idle while a worker finishes a long batch (the tail that kept
Dask's 2-worker run below 2x its 1-worker run). The workload is ``bench_execute.py --real 3 --tasks 400
--k 10`` (10,920 samples, 2,442 distinct programs), with the default stopping rule for looping programs::

    python benchmarks/trace_execute.py dask2      # or dask1, local (2 sandbox slots)

Run it with ``PYTHONPATH=OLD/src`` to trace another tree of the code (``git worktree add OLD COMMIT``).
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_execute as be  # noqa: E402

from bayespass.execution import engine  # noqa: E402


def busy_sampler(out: list, stop: threading.Event, every: float = 2.0) -> None:
    """Append ``(time, busy fraction of all CPUs)`` every ``every`` seconds until ``stop`` is set."""
    def read():
        v = list(map(int, open("/proc/stat").readline().split()[1:]))
        return sum(v), v[3] + v[4]

    a = read()
    while not stop.wait(every):
        b = read()
        out.append((time.perf_counter(), 1 - (b[1] - a[1]) / max(1, b[0] - a[0])))
        a = b


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["local", "dask1", "dask2"])
    args = ap.parse_args()
    suite, samples, _ = be.real(3, 400, 10)
    stamps: list = []

    class Bar:  # the engine's progress bar, replaced by a recorder of completion times
        def update(self, n):
            stamps.append(time.perf_counter())

        def close(self):
            pass

    engine._progress = lambda total, enabled: Bar()
    cpu, stop = [], threading.Event()
    threading.Thread(target=busy_sampler, args=(cpu, stop), daemon=True).start()
    t0 = time.perf_counter()
    if args.mode == "local":
        t, _ = be.run_bayespass(suite, samples, workers=2, max_timeouts="default")
    else:
        t, _ = be.run_dask(suite, samples, int(args.mode[-1]), max_timeouts="default")
    stop.set()
    print(f"{args.mode}: {t:.1f} s, {len(stamps)} programs")
    for q in (0.5, 0.9, 0.99, 1.0):
        print(f"  {q:.0%} of programs done at {stamps[int(q * (len(stamps) - 1))] - t0:.1f} s")
    tail = [f"{ts - t0:.0f}s:{u:.2f}" for ts, u in cpu if ts > stamps[-1] - 30]
    print(f"  time from 99% to 100%: {stamps[-1] - stamps[int(0.99 * (len(stamps) - 1))]:.1f} s; CPU busy "
          f"fraction over the last 30 s: {' '.join(tail)}; mean over the run {np.mean([u for _, u in cpu]):.2f}")


if __name__ == "__main__":
    main()
