"""Wall time of a program that never returns, with the default stopping rule (issue 19's target: no program
costs more than ~10x its per-test time limit by default).

The tasks are the MBPP+ tasks with the most tests or the slowest ground truth of the real workload.

Run: python benchmarks/loop_cost.py   (needs ../shared/data/evalplus/MbppPlus.jsonl.gz)
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

import bayespass as bp
from bayespass.execution import engine

SHARED = Path(__file__).resolve().parents[2] / "shared/data/evalplus/MbppPlus.jsonl.gz"
TASKS = ("Mbpp/765", "Mbpp/739", "Mbpp/300", "Mbpp/2", "Mbpp/599", "Mbpp/239")


def main() -> None:
    """Time one looping program per task, one sandbox slot, and print it against the task's limits."""
    if not SHARED.exists():
        sys.exit(f"{SHARED} is absent")
    suite = bp.load_suite("mbpp+", SHARED)
    lim = bp.Limits()
    print("| task | tests | per-test limit (max / median) | wall of the looping program | x its largest limit |"
          " tests run to a timeout | presumed |")
    print("|---|---|---|---|---|---|---|")
    for t in TASKS:
        task = suite.tasks[t]
        args = ", ".join(f"a{i}" for i in range(len(task.inputs[0])))
        loop = f"def {task.entry_point}({args}):\n    while True:\n        pass\n"
        t0 = time.perf_counter()
        ds = engine.execute([{"task_id": t, "solution": loop, "config": "loop"}], suite, workers=1, progress=False)
        wall = time.perf_counter() - t0
        v = ds.verdict.sel(task=t).values[0, 0]
        presumed = int(np.asarray(ds.presumed.sel(task=t).values[0, 0], bool).sum())
        limits = [lim.time_limit(x) for x in suite.expected[t]["times"]]
        n = int((v >= 0).sum())
        print(f"| {t} | {n} | {max(limits):.2f} / {np.median(limits):.2f} s | {wall:.2f} s | "
              f"{wall / max(limits):.1f} | {n - presumed} | {presumed} |", flush=True)


if __name__ == "__main__":
    main()
