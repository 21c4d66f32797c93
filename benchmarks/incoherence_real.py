"""Incoherence on real generations: how much of the error an oracle-free measure sees, on real MBPP+.

For each config of the real MBPP generations (``../shared/data/real/difftrust_mbpp``), the first
``--samples`` samples of the first ``--tasks`` MBPP+ tasks are executed on ``--fuzz-n`` fuzzed inputs per
task (inputs that the task's evalplus contract and canonical solution accept), and
:func:`bayespass.incoherence` compares them with each other (incoherence I) and with the canonical
solution (error E) per task. Reported per config (``incoherence_summary``, as ``bayespass incoherence``
prints it): mean E and I; the rank correlation of I and E over tasks; the detection rate (the share of
tasks with E > 0 where I > 0, i.e. where the samples disagree among themselves and so reveal, without an
oracle, that something is wrong); the undetected error (the mean E over tasks where I = 0: every sample
agrees, and any error is shared); the zero-incoherence rate and the share of tasks where I <= 2E.

Usage:
    python benchmarks/incoherence_real.py [--configs 12] [--tasks 100] [--samples 10] [--fuzz-n 100]

Resumable: the executions are kept in ``runs/incoherence-real``.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from real_mbpp import FIFTY, MBPP_PLUS, REAL, parse_name, read_config  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def samples(n_configs: int, tasks: list[str], k: int) -> list[dict]:
    """The first ``k`` samples of each task of the first ``n_configs`` fifty-sample configs."""
    recs = []
    keep = set(tasks)
    for name in FIFTY[:n_configs]:
        path = REAL / f"MBPP__{name}.jsonl.gz"
        model, temp = parse_name(path)
        seen: dict[str, int] = {}
        for r in read_config(path, keep)[0]:
            if seen.get(r["task_id"], 0) < k:
                seen[r["task_id"]] = seen.get(r["task_id"], 0) + 1
                recs.append({"task_id": r["task_id"], "solution": r["solution"], "config": f"{model}|T={temp:g}"})
    return recs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--configs", type=int, default=12, help="the first N of the fifty-sample configs")
    ap.add_argument("--tasks", type=int, default=100, help="the first N MBPP+ tasks")
    ap.add_argument("--samples", type=int, default=10, help="samples per task and config")
    ap.add_argument("--fuzz-n", type=int, default=100, help="fuzzed inputs per task")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", default=str(REPO / "runs" / "incoherence-real"))
    args = ap.parse_args()
    import bayespass as bp
    from bayespass.execution.fuzz import fuzzed_suite

    t0 = time.perf_counter()
    suite = bp.load_suite("mbpp+", MBPP_PLUS, workers=args.workers)
    tasks = list(suite.tasks)[: args.tasks]
    fsuite = fuzzed_suite(suite, args.fuzz_n, seed=0, workers=args.workers, tasks=tasks)
    recs = [r for r in samples(args.configs, tasks, args.samples) if r["task_id"] in fsuite.tasks]
    t1 = time.perf_counter()
    fz = bp.execute(recs, fsuite, out=args.out, workers=args.workers)
    t2 = time.perf_counter()
    n_in = [len(fsuite.tasks[t].inputs) for t in fsuite.tasks]
    print(f"{len(fsuite.tasks)} of {len(tasks)} tasks kept fuzzed inputs (median {np.median(n_in):.0f} per task); "
          f"{len(recs)} samples; fuzzing {t1 - t0:.0f} s, execution {t2 - t1:.0f} s")
    from bayespass.stats.incoherence import incoherence_summary

    df = pd.DataFrame(incoherence_summary(bp.incoherence(fz)))
    print("| " + " | ".join(df.columns) + " |\n|" + "---|" * len(df.columns))
    for row in df.itertuples(index=False):
        print("| " + " | ".join(f"{v:.3f}" if isinstance(v, float) else str(v).replace("|", "\\|") for v in row)
              + " |")
    means = df.drop(columns=["config", "tasks"]).mean()
    print("\nmean over configs: " + ", ".join(f"{k} {v:.3f}" for k, v in means.items()))


if __name__ == "__main__":
    main()
