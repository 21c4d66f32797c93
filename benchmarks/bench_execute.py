"""Execution throughput: bayespass's sandbox vs evalplus's ``untrusted_check``, same samples, same run.

Two workloads:

* synthetic (default): for the first T HumanEval tasks, K programs per task
  drawn from a pool of the canonical solution, whitespace/comment variants of
  it and mutants (wrong programs), as a code model's samples look;
* ``--real N``: real generations of the first N fifty-sample configs of
  ``../shared/data/real/difftrust_mbpp/`` on MBPP+ (base + plus tests), the
  first ``--tasks`` MBPP+ tasks and the first ``--k`` samples of each.

Both sides run every test (no fast check) with the evalplus time limits
(1 s / 4x ground truth); verdict agreement is checked per sample and every
disagreement is listed.  bayespass runs on an empty store (nothing reused).
Each side is timed ``--repeat`` times (median).

``--max-timeouts``: ``none`` runs every test of a looping program to its
limit; ``default`` is bayespass's default (2, then a shared budget);
evalplus's ``untrusted_check`` stops a program at its first timeout.
``--fresh-interpreter`` also times bayespass with a fresh interpreter per
program (instead of forking from the slot's zygote).  ``--dask 1,2`` times
bayespass on a Dask ``LocalCluster`` with 1 and with 2 worker processes
instead of evalplus (the scale-out ratio).

Usage:
    python benchmarks/bench_execute.py [--tasks 40] [--k 10] [--workers 2] [--max-timeouts none|default|N]
    python benchmarks/bench_execute.py --real 3 --tasks 100 --k 10 --max-timeouts default
    python benchmarks/bench_execute.py --real 3 --tasks 200 --k 10 --dask 1,2
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

import bayespass as bp
from bayespass.execution import engine

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def pool_for(task, rng, k):
    sol = task.canonical_solution
    variants = [sol, sol.replace("\n", "\n\n", 1), sol + "\n# done\n"]
    for a, b in (("<", "<="), ("+ 1", "+ 2"), ("==", "!="), ("return ", "return None or "), ("0", "1")):
        if a in sol:
            variants.append(sol.replace(a, b, 1))
    variants.append("    return None\n")
    return [variants[i] for i in rng.integers(0, len(variants), k)]


def synthetic(n_tasks, k):
    suite = bp.load_suite("humaneval")
    rng = np.random.default_rng(0)
    samples = []
    for t, task in list(suite.tasks.items())[:n_tasks]:
        samples += [{"task_id": t, "completion": c} for c in pool_for(task, rng, k)]
    return suite, samples, "humaneval"


def real(n_configs, n_tasks, k):
    from real_mbpp import MBPP_PLUS, config_files, read_config

    suite = bp.load_suite("mbpp+", MBPP_PLUS)
    tasks = set(list(suite.tasks)[:n_tasks])
    samples = []
    for path in config_files("50")[:n_configs]:
        recs, _ = read_config(path, tasks)
        seen = {}
        for r in recs:
            if seen.setdefault(r["task_id"], 0) < k:
                seen[r["task_id"]] += 1
                samples.append(r)
    return suite, samples, "mbpp"


def evalplus_one(args):
    from evalplus.eval import PASS, untrusted_check

    dataset, code, inputs, entry, expected, atol, times = args
    stat, _ = untrusted_check(dataset, code, inputs, entry, expected, atol, times, fast_check=False)
    return stat == PASS


def median_time(fn, repeat):
    """Run ``fn() -> (seconds, result)`` ``repeat`` times; return the median time and the last result."""
    runs = [fn() for _ in range(repeat)]
    return float(np.median([t for t, _ in runs])), runs[-1][1]


def run_evalplus(suite, samples, dataset, workers):
    table = engine._prepare(suite, engine.read_samples(samples))
    jobs = []
    for task, code in zip(table.task, table.code, strict=True):
        t, e = suite.tasks[task], suite.expected[task]
        jobs.append((dataset, code, t.inputs, t.entry_point, [engine.decode(v) for v in e["values"]], t.atol,
                     e["times"]))
    t0 = time.perf_counter()
    with ProcessPoolExecutor(workers) as ex:
        verdicts = list(ex.map(evalplus_one, jobs))
    return time.perf_counter() - t0, (verdicts, table)


def run_bayespass(suite, samples, **kw):
    t0 = time.perf_counter()
    ds = engine.execute(samples, suite, progress=False, **kw)
    return time.perf_counter() - t0, ds


def run_dask(suite, samples, n_workers, **kw):
    from dask.distributed import Client, LocalCluster

    with LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, dashboard_address=None) as c, \
            Client(c) as client:
        client.wait_for_workers(n_workers)
        return run_bayespass(suite, samples, scheduler=client, **kw)


def verdict_diff(a, b):
    """Describe where two runs' verdicts differ (timeouts near the limit are the usual cause)."""
    diff = (a.verdict != b.verdict) & (a.verdict >= 0)
    if not bool(diff.any()):
        return "identical verdicts"
    pairs = sorted({(int(x), int(y)) for x, y in zip(a.verdict.values[diff.values], b.verdict.values[diff.values],
                                                     strict=True)})
    n_correct = int((a.correct != b.correct).sum())
    tasks = sorted(set(a.task.values[diff.any(("config", "sample", "test")).values]))
    return (f"{int(diff.sum())} test verdicts differ (codes {pairs}, see attrs verdict_codes) in tasks {tasks}; "
            f"samples whose correctness differs: {n_correct}")


def disagreements(ds, table, ep, skip=("HumanEval/32",)):
    ours = [bool(ds.correct.sel(config=c, task=t, sample=s)) for c, t, s in
            zip(table.config, table.task, table["sample"], strict=True)]
    rows = [(c, t, s, a, b) for c, t, s, a, b in zip(table.config, table.task, table["sample"], ours, ep, strict=True)
            if a != b]
    agree = np.mean([a == b for a, b, t in zip(ours, ep, table.task, strict=True) if t not in skip])
    return agree, rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=40)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--real", type=int, default=0, help="real MBPP generations of this many configs")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--max-timeouts", default="none", help="none | default | N")
    ap.add_argument("--fresh-interpreter", action="store_true", help="also time fresh-interpreter mode")
    ap.add_argument("--repeat", type=int, default=3, help="time each side this many times (median)")
    ap.add_argument("--dask", default="", help="e.g. 1,2: time Dask LocalClusters instead of evalplus")
    args = ap.parse_args()
    v = args.max_timeouts.lower()
    mt = None if v == "none" else "default" if v == "default" else int(v)
    suite, samples, dataset = real(args.real, args.tasks, args.k) if args.real else synthetic(args.tasks, args.k)
    n = len(samples)
    t_bp, ds = median_time(lambda: run_bayespass(suite, samples, workers=args.workers, max_timeouts=mt), args.repeat)
    print(f"workload: {n} samples, {ds.attrs['n_unique_programs']} distinct programs, "
          f"{'real MBPP+ (' + str(args.real) + ' configs)' if args.real else 'synthetic HumanEval'}; "
          f"layer {ds.attrs['sandbox_layer']}, mode {ds.attrs['mode']}, max_timeouts={mt}\n")
    print(f"bayespass ({ds.attrs['mode']}, {args.workers} slots): {t_bp:.1f} s, {n / t_bp:.1f} samples/s, "
          f"{ds.attrs['n_unique_programs'] / t_bp:.1f} distinct programs/s")
    if args.fresh_interpreter:
        t_fr, ds_fr = median_time(lambda: run_bayespass(suite, samples, workers=args.workers, max_timeouts=mt,
                                                        fresh_interpreter=True), args.repeat)
        print(f"bayespass (fresh-interpreter): {t_fr:.1f} s, {n / t_fr:.1f} samples/s; zygote/fresh speed-up "
              f"{t_fr / t_bp:.2f}x; {verdict_diff(ds, ds_fr)}")
    if args.dask:
        times = {}
        for w in [int(x) for x in args.dask.split(",")]:
            times[w], ds_d = median_time(lambda w=w: run_dask(suite, samples, w, max_timeouts=mt), args.repeat)
            print(f"bayespass on Dask LocalCluster, {w} worker(s): {times[w]:.1f} s, {n / times[w]:.1f} samples/s; "
                  f"{verdict_diff(ds, ds_d)}")
        ws = sorted(times)
        print(f"Dask {ws[-1]} vs {ws[0]} worker(s): {times[ws[0]] / times[ws[-1]]:.2f}x")
        return
    t_ep, (ep, table) = median_time(lambda: run_evalplus(suite, samples, dataset, args.workers), args.repeat)
    agree, rows = disagreements(ds, table, ep)
    print(f"evalplus untrusted_check ({args.workers} processes): {t_ep:.1f} s, {n / t_ep:.1f} samples/s\n")
    print("| samples | distinct programs | workers | bayespass (samples/s) | evalplus (samples/s) | speed-up | "
          f"verdict agreement |\n|---|---|---|---|---|---|---|\n| {n} | {ds.attrs['n_unique_programs']} | "
          f"{args.workers} | {n / t_bp:.1f} | {n / t_ep:.1f} | {t_ep / t_bp:.1f}x | {agree:.4f} |")
    print(f"\ndisagreements ({len(rows)}): config, task, sample, bayespass correct, evalplus correct")
    for r in rows:
        print("  ", *r)


if __name__ == "__main__":
    main()
