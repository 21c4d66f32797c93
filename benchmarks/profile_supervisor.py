"""Where one slot's time goes per real program: the candidate's tests, the zygote, the supervisor's judging.

Runs distinct real MBPP+ programs of one config (the six slow tasks left out) one after another through
one sandbox slot in this process, under cProfile, and prints wall, test time and the supervisor's CPU per
program, then the profile's top entries. Run it on an idle machine::

    python benchmarks/profile_supervisor.py --programs 600
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_execute as be  # noqa: E402

from bayespass.execution import engine  # noqa: E402
from bayespass.execution.sandbox import Limits, Sandbox  # noqa: E402

SLOW = {"Mbpp/239", "Mbpp/271", "Mbpp/300", "Mbpp/603", "Mbpp/630", "Mbpp/739", "Mbpp/765"}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--programs", type=int, default=600)
    ap.add_argument("--top", type=int, default=15)
    args = ap.parse_args()
    suite, samples, _ = be.real(1, 400, 10)
    table = engine._prepare(suite, engine.read_samples(samples))
    progs = table.drop_duplicates(["task", "code_hash"])
    progs = progs[~progs.task.isin(SLOW)].head(args.programs)
    judge_ = engine._Judge(suite, Limits())
    jobs = [(t, judge_.job(t, c)) for t, c in zip(progs.task, progs.code, strict=True)]
    for t, _ in jobs:  # expected values decoded before timing (once per task in a real run)
        judge_.expected(t)
    sb = Sandbox(limits=Limits(), layer="auto", slot=0)
    try:
        for t, j in jobs[:5]:  # warm the zygote
            engine._judged_run(sb, judge_, t, j, False, 2)
        t0, c0, test_time = time.perf_counter(), time.process_time(), 0.0
        prof = cProfile.Profile()
        prof.enable()
        for t, j in jobs:
            outs = engine._judged_run(sb, judge_, t, j, False, 2)
            judge_.score(t, outs)
            test_time += sum(o.duration for o in outs if o.duration == o.duration)
        prof.disable()
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    finally:
        sb.close()
    n = len(jobs)
    print(f"{n} programs through one slot ({sb.layer}): per program {1e3 * wall / n:.1f} ms wall, "
          f"{1e3 * test_time / n:.1f} ms of test time, {1e3 * cpu / n:.1f} ms of the supervisor's CPU")
    pstats.Stats(prof).sort_stats("tottime").print_stats(args.top)


if __name__ == "__main__":
    main()
