"""Harness 11's type rule on the real MBPP programs: an ``int`` near an expected ``float`` fails, as under evalplus.

evalplus checks ``type(out) == type(exp)`` before its float tolerance, so a program that returns
``square_Sum``'s exact integer where MBPP+ expects the canonical solution's float (``1.333335333334e18``) fails
there; bayespass passed it until harness 11 (``benchmarks/agreement_real.py`` found 14 such programs among 6,058
drawn at random). Only a value judged with a tolerance can change verdict: this script takes every real program
of ``../shared/data/real/difftrust_mbpp/`` on an MBPP+ task whose expected values include a plain float (or an
int under the task's own tolerance), runs each once, and judges every test by both rules (the supervisor's judge
is wrapped: where today's rule fails a value, the old one is applied to it too). It prints the programs and
samples whose verdict changed, per config, and checks each changed program against evalplus's
``untrusted_check``.

``--patch-counts`` subtracts the change from ``data/real_mbpp/counts.csv`` (executed with the old rule) cell by
cell and says so in its README.

Usage:
    python benchmarks/float_type_rule.py [--workers 2] [--patch-counts] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import pandas as pd  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from agreement_real import run_evalplus  # noqa: E402
from real_mbpp import MBPP_PLUS, add_to_counts, config_files, read_config, readme_section  # noqa: E402


def tolerance_tasks(suite) -> list[str]:
    """Tasks where a value is judged with a tolerance and its type matters: a plain float expected, or an int
    under the task's own ``atol`` (lists of floats already needed their own container type)."""
    from bayespass.execution.engine import decode

    out = []
    for tid, t in suite.tasks.items():
        vals = [decode(v) for v in suite.expected[tid]["values"]]
        if any(type(v) is float for v in vals) or (t.atol and any(type(v) is int for v in vals)):
            out.append(tid)
    return out


def old_rule_passes(out, exp, t) -> bool:
    """Whether harness 10's rule (the tolerance without the type check) passes a value today's rule failed."""
    from bayespass.data.suites import SET_EQ
    from bayespass.execution import judge

    if t.entry_point in SET_EQ or t.entry_point in ("find_zero", "are_equivalent"):
        return False
    atol = t.atol or (1e-6 if judge._is_floats(exp) else 0.0)
    try:
        return bool(atol) and judge._numeric_tree(exp) and type(out) is not type(exp) and judge._close(out, exp, atol)
    except (TypeError, ValueError, OverflowError, RecursionError):
        return False


def run_both_rules(suite, samples: list[dict], workers: int):
    """Execute ``samples`` once (every distinct text run: no twins), judging by both rules.

    Returns (seconds, the samples dataset, {(task, code): (new verdicts, old-rule pass flags)}).
    """
    from bayespass.execution import engine

    local = threading.local()
    record: dict = {}
    keys: dict = {}  # id of a run's outcome list -> its program (the outcomes left unjudged are judged later)
    orig_run, orig_judged, orig_score = engine._judged_run, engine._Judge.judged, engine._Judge.score

    def judged_run(sb, judge_, task, job, fast_check, max_timeouts):
        local.key = (task, job["code"])
        outs = orig_run(sb, judge_, task, job, fast_check, max_timeouts)
        keys[id(outs)] = (local.key, outs)
        return outs

    def score(self, task_id, outcomes):
        local.key = keys.pop(id(outcomes))[0]
        return orig_score(self, task_id, outcomes)

    def judged(self, task_id, i, o):
        value, status, exact_only = o.value, o.status, o.exact_only
        o = orig_judged(self, task_id, i, o)
        old = o.verdict == "pass"
        if not old and status == "value" and not exact_only and not isinstance(value, dict):
            try:
                out = engine.decode(value)
            except (ValueError, TypeError, RecursionError, OverflowError):
                pass
            else:
                old = old_rule_passes(out, self.expected(task_id)[i], self.suite.tasks[task_id])
        new_v, old_ok = record.setdefault(local.key, ({}, {}))
        new_v[i], old_ok[i] = o.verdict, old
        return o

    engine._judged_run, engine._Judge.judged, engine._Judge.score = judged_run, judged, score
    try:
        t0 = time.perf_counter()
        ds = engine.execute(samples, suite, workers=workers, detail="sample", dedup="text", progress=True)
        return time.perf_counter() - t0, ds, record
    finally:
        engine._judged_run, engine._Judge.judged, engine._Judge.score = orig_run, orig_judged, orig_score


def main() -> None:
    import bayespass as bp

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--patch-counts", action="store_true", help="subtract the change from data/real_mbpp/counts.csv")
    ap.add_argument("--evalplus-max", type=int, default=40,
                    help="check this many of the changed programs (drawn at random) with evalplus (0: none)")
    ap.add_argument("--tasks", default="", help="only these of the tasks (comma-separated ids)")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    suite = bp.load_suite("mbpp+", MBPP_PLUS)
    tasks = tolerance_tasks(suite)
    if args.tasks:
        tasks = [t for t in tasks if t in args.tasks.split(",")]
    samples = [r for p in config_files("all") for r in read_config(p, set(tasks))[0]]
    print(f"{len(tasks)} tasks judged with a tolerance; {len(samples)} real samples on them", flush=True)
    seconds, ds, record = run_both_rules(suite, samples, args.workers)
    rows, changed = [], {}
    for r in samples:
        task = r["task_id"]
        key = (task, suite.program(task, solution=r["solution"]))
        new_v, old_ok = record[key]
        nb = suite.expected[task]["n_base"]
        n = len(new_v)
        new = [new_v[i] == "pass" for i in range(n)]
        old = [old_ok[i] for i in range(n)]
        row = {"model": r["model"], "temperature": r["temperature"], "task": task,
               "new": all(new), "old": all(old), "new_base": all(new[:nb]), "old_base": all(old[:nb])}
        rows.append(row)
        if row["new"] != row["old"] or row["new_base"] != row["old_base"]:
            changed[key] = r
    df = pd.DataFrame(rows)
    check = int(ds.correct.sum())
    if check != int(df.new.sum()):
        raise SystemExit(f"the wrapped judge saw {int(df.new.sum())} correct samples, the dataset {check}")
    print(f"executed {len(record)} programs in {seconds:.0f} s; correct samples by the old rule "
          f"{int(df.old.sum())}, by today's {int(df.new.sum())}; programs whose verdict changed: {len(changed)}")
    key = ["model", "temperature", "task"]
    delta = df[key].assign(dc=df.new.astype(int) - df.old.astype(int),
                           dcb=df.new_base.astype(int) - df.old_base.astype(int), dt=0)
    delta = delta.groupby(key, as_index=False).sum()
    by_cfg = delta.groupby(["model", "temperature"])[["dc", "dcb"]].sum()
    by_task = delta.groupby("task")[["dc", "dcb"]].sum()
    print(by_cfg[by_cfg.dc != 0].to_string())
    print(by_task[(by_task.dc != 0) | (by_task.dcb != 0)].to_string())
    # evalplus on every program whose verdict changed
    recs = list(changed.items())
    if len(recs) > args.evalplus_max:  # evalplus runs a looping program's every test to its limit (60 s at most)
        import random
        recs = random.Random(0).sample(recs, args.evalplus_max)
    _, ep = run_evalplus(suite, [k for k, _ in recs], args.workers)
    ours = {k: all(v == "pass" for v in record[k][0].values()) for k, _ in recs}
    agree = sum(ours[k] == (stat == "pass") for (k, _), (stat, _, _) in zip(recs, ep, strict=True))
    agree_old = sum(all(record[k][1].values()) == (s == "pass") for (k, _), (s, _, _) in zip(recs, ep, strict=True))
    print(f"evalplus on {len(recs)} of the {len(changed)} changed programs: today's verdict agrees on {agree}, "
          f"the old rule's on {agree_old}")
    out = {"tasks": len(tasks), "samples": len(samples), "programs": len(record), "seconds": round(seconds, 1),
           "correct_old": int(df.old.sum()), "correct_new": int(df.new.sum()),
           "correct_base_old": int(df.old_base.sum()), "correct_base_new": int(df.new_base.sum()),
           "changed_programs": len(changed), "evalplus_checked": len(recs), "evalplus_agrees_with_new": agree,
           "cells_changed": int(((delta.dc != 0) | (delta.dcb != 0)).sum()),
           "by_task": by_task[(by_task.dc != 0) | (by_task.dcb != 0)].reset_index().to_dict("records"),
           "by_config": by_cfg[(by_cfg.dc != 0) | (by_cfg.dcb != 0)].reset_index().to_dict("records")}
    print(json.dumps({k: v for k, v in out.items() if k not in ("by_task", "by_config")}, indent=1))
    if args.patch_counts:
        n_cells = add_to_counts(delta)
        readme_section("float type", (
            "Harness 11 judges a value with a float tolerance only when it has the expected value's type, as "
            "evalplus does (`type(out) == type(exp)` before `allclose`): an `int` near an expected `float` fails. "
            f"`python benchmarks/float_type_rule.py --patch-counts` judged the {len(samples):,} samples here on the "
            f"{len(tasks)} tasks with plain float expected values (or an int under the task's tolerance) by both "
            f"rules and added the difference to {n_cells} cells of `counts.csv`: "
            f"{out['correct_new'] - out['correct_old']:+d} correct, "
            f"{out['correct_base_new'] - out['correct_base_old']:+d} correct on the base tests (on "
            f"{', '.join(r['task'] for r in out['by_task'])})."))
        print(f"patched {n_cells} cells")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
