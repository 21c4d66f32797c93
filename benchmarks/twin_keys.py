"""How many of the real MBPP programs the behavioural-twin key leaves to run, and what the groups it forms did
when their members ran separately.

Reads every real generation (../shared/data/real/difftrust_mbpp), keys each distinct program with
``bayespass.execution.twins.behaviour_key`` and prints the number of programs to run (one per task and key,
plus every program without a key). With ``--store`` (a ``verdicts.sqlite`` of an earlier whole-set run) it
also sums the stored test time of the programs that would run, and lists every group of the new key whose
members have different stored verdicts (members that ran separately under an earlier key).

Usage:
    python benchmarks/twin_keys.py [--store runs/real-mbpp/verdicts.sqlite]
"""

from __future__ import annotations

import argparse
import collections
import sqlite3
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from real_mbpp import MBPP_PLUS, REAL, config_files, read_config  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--store", default=None, help="verdicts.sqlite of an earlier whole-set run")
    args = ap.parse_args()
    if not REAL.exists():
        raise SystemExit(f"{REAL} is absent: the real generations are not on this machine")
    import bayespass as bp
    from bayespass.execution import engine
    from bayespass.execution.twins import behaviour_key

    suite = bp.load_suite("mbpp+", MBPP_PLUS, expected=False)
    recs = [r for p in config_files("all") for r in read_config(p, set(suite.tasks))[0]]
    table = engine._prepare(suite, engine.read_samples(recs))
    progs = table.drop_duplicates(["task", "code_hash"])
    t0 = time.perf_counter()
    keys = [behaviour_key(c) for c in progs["code"]]
    dt = time.perf_counter() - t0
    groups = collections.defaultdict(list)
    for t, h, k in zip(progs["task"], progs["code_hash"], keys, strict=True):
        groups[t, k if k is not None else "text:" + h].append(h)
    print(f"{len(table)} samples, {len(progs)} distinct programs, {sum(k is None for k in keys)} without a key; "
          f"{len(groups)} to run; key {dt / len(progs) * 1e3:.2f} ms per program")
    if args.store is None:
        return
    db = sqlite3.connect(args.store)
    stored = {(t, h): (np.frombuffer(v, np.int8), float(np.nansum(np.frombuffer(d, np.float32))))
              for t, h, v, d in db.execute("SELECT task, code_hash, verdicts, durations FROM results")}
    print(f"stored test time of the programs that would run: "
          f"{sum(stored[t, hs[0]][1] for (t, _), hs in groups.items() if (t, hs[0]) in stored):.0f} s")
    n_multi = n_diff = 0
    for (t, k), hs in groups.items():
        vs = [stored[t, h][0] for h in hs if (t, h) in stored]
        if len(vs) < 2 or k.startswith("text:"):
            continue
        n_multi += 1
        if any((v != vs[0]).any() for v in vs[1:]):
            n_diff += 1
            kinds = sorted({tuple(sorted({int(a), int(b)}))
                            for v in vs[1:] for a, b in zip(v, vs[0], strict=True) if a != b})
            print(f"  {t}: {len(vs)} members, verdict pairs that differ {kinds} (1 pass, 2 fail, 3 error, 4 timeout)")
    print(f"{n_multi} groups with more than one stored member, {n_diff} with different stored verdicts")


if __name__ == "__main__":
    main()
