"""Estimate the time to execute the whole real MBPP set from a random sample of its distinct programs.

The whole set (all 34 configs of ``../shared/data/real/difftrust_mbpp`` on MBPP+'s tasks, every test) takes
hours on 2 cores, so it is rarely re-timed end to end. A program's cost does not depend on which other
programs run, so the time of a uniform random fraction ``f`` of the distinct programs, divided by ``f``,
estimates the whole set's (apart from per-task fixed costs, paid once in both, which this over-counts by
``1/f``). Reports the estimate with a bootstrap interval over the sampled programs' own times::

    python benchmarks/whole_set_estimate.py --fraction 0.03 --seed 0
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from real_mbpp import MBPP_PLUS, config_files, read_config  # noqa: E402


def main() -> None:
    import bayespass as bp
    from bayespass.execution import engine

    ap = argparse.ArgumentParser()
    ap.add_argument("--fraction", type=float, default=0.03)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--max-timeouts", default="default", help="default | none | N (see execute's max_timeouts)")
    args = ap.parse_args()
    mt = {"default": "default", "none": None}.get(args.max_timeouts.lower(), None)
    mt = int(args.max_timeouts) if args.max_timeouts.isdigit() else mt
    suite = bp.load_suite("mbpp+", MBPP_PLUS)
    t_read = time.perf_counter()
    recs = [r for path in config_files("all") for r in read_config(path, set(suite.tasks))[0]]
    table = engine._prepare(suite, engine.read_samples(recs))
    t_read = time.perf_counter() - t_read
    programs = table.drop_duplicates(["task", "code_hash"])
    pick = np.random.default_rng(args.seed).random(len(programs)) < args.fraction
    sample = programs[pick]
    print(f"whole set: {len(table)} samples, {len(programs)} distinct programs (task, normalised text); "
          f"sampled {len(sample)} ({args.fraction:.1%}, seed {args.seed}, max_timeouts={mt}); reading and "
          f"normalising every sample took {t_read:.0f} s (paid once by a whole-set run, not included below)")
    with tempfile.TemporaryDirectory() as out:
        t0 = time.perf_counter()
        engine.execute(sample[["task", "code"]].rename(columns={"task": "task_id", "code": "solution"})
                       .to_dict("records"), suite, out=out, workers=args.workers, detail="sample",
                       max_timeouts=mt, progress=True)
        dt = time.perf_counter() - t0
        db = sqlite3.connect(os.path.join(out, "verdicts.sqlite"))
        rows = [(np.frombuffer(v, np.int8), np.frombuffer(u, np.float32)) for v, u in
                db.execute("SELECT verdicts, durations FROM results")]
        db.close()
    per = np.array([float(np.nansum(u)) for _, u in rows])
    in_timeouts = sum(float(np.nansum(u[v == 4])) for v, u in rows)  # 4: timeout
    looping = sum(bool((v == 4).any()) for v, _ in rows)
    print(f"of the test time, {in_timeouts:.0f} s in tests that timed out ({looping} programs with a timeout)")
    est = dt / args.fraction
    boot = [per[np.random.default_rng(i).integers(0, len(per), len(per))].sum() / per.sum()
            for i in range(1000)]
    lo, hi = np.quantile(boot, [0.05, 0.95])
    print(f"sample: {dt:.0f} s wall on {args.workers} slots; test time {per.sum():.0f} s "
          f"(median program {1e3 * np.median(per):.1f} ms, slowest {per.max():.1f} s)")
    print(f"estimated whole set: {est / 60:.0f} min (90% interval from resampling the programs: "
          f"{lo * est / 60:.0f}-{hi * est / 60:.0f} min)")


if __name__ == "__main__":
    main()
