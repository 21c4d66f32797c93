"""Execution throughput: bayespass's sandbox vs evalplus's ``untrusted_check``, same samples, same run.

Samples: for the first T HumanEval tasks, K programs per task drawn from a
pool of the canonical solution, whitespace/comment variants of it and
mutants (wrong programs), as a code model's samples look (many repeats).
Both run every test (no fast check) with the evalplus time limits (1 s /
4x ground truth); verdict agreement is checked per program.

With ``--max-timeouts 1`` a program's remaining tests are presumed to time
out after its first timeout, which is how evalplus's ``untrusted_check``
ends (one process per program, killed at the first timeout).

Usage: python benchmarks/bench_execute.py [--tasks 40] [--k 10] [--workers 2] [--max-timeouts 1]
"""

from __future__ import annotations

import argparse
import os
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

import bayespass as bp
from bayespass.execution import engine


def pool_for(task, rng, k):
    sol = task.canonical_solution
    variants = [sol, sol.replace("\n", "\n\n", 1), sol + "\n# done\n"]
    for a, b in (("<", "<="), ("+ 1", "+ 2"), ("==", "!="), ("return ", "return None or "), ("0", "1")):
        if a in sol:
            variants.append(sol.replace(a, b, 1))
    variants.append("    return None\n")
    return [variants[i] for i in rng.integers(0, len(variants), k)]


def evalplus_one(args):
    from evalplus.eval import PASS, untrusted_check

    code, inputs, entry, expected, atol, times = args
    stat, _ = untrusted_check("humaneval", code, inputs, entry, expected, atol, times, fast_check=False)
    return stat == PASS


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=40)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--max-timeouts", type=int, default=None,
                    help="presume the remaining tests time out after this many (evalplus: 1)")
    args = ap.parse_args()
    suite = bp.load_suite("humaneval")
    rng = np.random.default_rng(0)
    samples = []
    for t, task in list(suite.tasks.items())[: args.tasks]:
        samples += [{"task_id": t, "completion": c} for c in pool_for(task, rng, args.k)]
    t0 = time.perf_counter()
    ds = engine.execute(samples, suite, workers=args.workers, progress=False, max_timeouts=args.max_timeouts)
    t_bp = time.perf_counter() - t0
    table = engine.read_samples(samples)
    jobs = []
    for task, rec in zip(table.task, samples, strict=True):
        t, e = suite.tasks[task], suite.expected[task]
        jobs.append((t.prompt + rec["completion"], t.inputs, t.entry_point,
                     [engine.decode(v) for v in e["values"]], t.atol, e["times"]))
    t0 = time.perf_counter()
    with ProcessPoolExecutor(args.workers) as ex:
        ep = list(ex.map(evalplus_one, jobs))
    t_ep = time.perf_counter() - t0
    ours = [bool(ds.correct.sel(config=c, task=t, sample=s)) for c, t, s in
            zip(table.config, table.task, table["sample"], strict=True)]
    agree = np.mean([a == b for a, b, t in zip(ours, ep, table.task, strict=True) if t != "HumanEval/32"])
    n = len(samples)
    print(f"| samples | distinct programs | workers | bayespass (samples/s) | evalplus (samples/s) | speed-up | "
          f"verdict agreement |\n|---|---|---|---|---|---|---|\n| {n} | {ds.attrs['n_unique_programs']} | "
          f"{args.workers} | {n / t_bp:.1f} | {n / t_ep:.1f} | {t_ep / t_bp:.1f}x | {agree:.3f} |")
    print(f"\nsandbox layer: {ds.attrs['sandbox_layer']}; bayespass {t_bp:.1f} s, evalplus {t_ep:.1f} s; "
          f"max_timeouts={args.max_timeouts}; timeouts recorded: {int((ds.verdict == 4).sum())}")


if __name__ == "__main__":
    main()
