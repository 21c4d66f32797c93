"""The real MBPP programs that import numpy: bayespass's verdicts against evalplus's, with and without numpy.

evalplus runs candidates in its own environment, where numpy is installed (it is one of evalplus's
dependencies), and judges with ``==``, which a numpy scalar answers as the number it holds.  Until harness 10
bayespass's sandbox had the stdlib only, so every program that imports numpy failed at its import.  This script
takes every real program of ``../shared/data/real/difftrust_mbpp/`` on an MBPP+ task whose text imports numpy,
runs it in the sandbox with numpy (as it is now) and without it (as before: ``child.PACKAGES`` bound nowhere),
and with evalplus's ``untrusted_check``, and prints how many each passes and how often bayespass agrees with
evalplus.

``--patch-counts`` adds to ``data/real_mbpp/counts.csv`` (executed with harness 8, which had no numpy) the
difference numpy makes, cell by cell (``c``, ``c_base``, ``n_timeout_samples``), and says so in its README.

Usage:
    python benchmarks/numpy_programs.py [--workers 2] [--patch-counts] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from real_mbpp import MBPP_PLUS, OUT_DATA, add_to_counts, config_files, read_config, readme_section, sample_cells  # noqa: E402

#: a line that imports numpy (at any indentation: inside a function too)
IMPORTS_NUMPY = re.compile(r"^\s*(?:import\s+numpy|from\s+numpy\b)", re.M)


def numpy_samples(tasks: set) -> list[dict]:
    """Every real record on an MBPP+ task whose program imports numpy, with its (model, temperature)."""
    out = []
    for path in config_files("all"):
        recs, _ = read_config(path, tasks)
        out += [r for r in recs if IMPORTS_NUMPY.search(r["solution"])]
    return out


def run_sandbox(suite, samples: list[dict], workers: int, *, numpy_available: bool):
    """Execute ``samples`` (no verdict store); with ``numpy_available=False`` the sandbox binds no package."""
    from bayespass.execution import engine, sandbox

    saved = sandbox._package_binds
    try:
        if not numpy_available:
            sandbox._package_binds = list
        sandbox._view.cache_clear()
        t0 = time.perf_counter()
        ds = engine.execute(samples, suite, workers=workers, detail="sample", progress=False)
        return time.perf_counter() - t0, ds
    finally:
        sandbox._package_binds = saved
        sandbox._view.cache_clear()


def per_sample(ds, samples: list[dict]) -> pd.DataFrame:
    """One row per record: its config, task, correct, base_correct, timed out (records in input order)."""
    rows = []
    for r, cell in sample_cells(ds, samples):
        rows.append({"model": r["model"], "temperature": r["temperature"], "task": r["task_id"],
                     "correct": bool(cell.correct), "base_correct": bool(cell.base_correct),
                     "timeout": bool(cell.n_timeout > 0) if "n_timeout" in cell else False})
    return pd.DataFrame(rows)


def run_evalplus(suite, samples: list[dict], workers: int):
    """evalplus's verdicts (True = pass) in the order of ``samples``, and the seconds they took."""
    from bench_execute import run_evalplus as bench_run

    t, (verdicts, table) = bench_run(suite, samples, "mbpp", workers)
    order = {}
    for i, (c, task, s) in enumerate(zip(table.config, table.task, table["sample"], strict=True)):
        order[(c, task, int(s))] = verdicts[i]
    seen: dict = {}
    out = []
    for r in samples:
        key = (r["config"], r["task_id"])
        s = seen[key] = seen.get(key, -1) + 1
        out.append(bool(order[(r["config"], r["task_id"], s)]))
    return t, out


def patch_counts(delta: pd.DataFrame, before: dict) -> int:
    """Add ``delta`` (model, temperature, task, dc, dcb, dt) to counts.csv; return the number of cells changed."""
    changed = add_to_counts(delta)
    readme_section("numpy", (
        "Harness 8's sandbox had no numpy: every program that imports it failed there, while evalplus (whose "
        "environment has numpy) runs it. Harness 10 lets candidates import numpy. "
        f"`python benchmarks/numpy_programs.py --patch-counts` ran the {before['samples']} programs here that "
        f"import numpy with and without it and added the difference to {changed} cells of `counts.csv`: "
        f"{before['dc']:+d} correct, {before['dcb']:+d} correct on the base tests, {before['dt']:+d} with a "
        "timeout."))
    return changed


def main() -> None:
    import bayespass as bp

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--patch-counts", action="store_true", help="add numpy's difference to data/real_mbpp/counts.csv")
    ap.add_argument("--no-evalplus", action="store_true", help="skip evalplus's run")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    suite = bp.load_suite("mbpp+", MBPP_PLUS)
    samples = numpy_samples(set(suite.tasks))
    print(f"{len(samples)} real programs on MBPP+ tasks import numpy")
    t_new, ds_new = run_sandbox(suite, samples, args.workers, numpy_available=True)
    t_old, ds_old = run_sandbox(suite, samples, args.workers, numpy_available=False)
    new, old = per_sample(ds_new, samples), per_sample(ds_old, samples)
    out = {"samples": len(samples), "pass_with_numpy": int(new.correct.sum()), "pass_without": int(old.correct.sum()),
           "seconds_with": round(t_new, 1), "seconds_without": round(t_old, 1)}
    if not args.no_evalplus:
        t_ep, ep = run_evalplus(suite, samples, args.workers)
        ep = np.array(ep)
        out |= {"pass_evalplus": int(ep.sum()), "seconds_evalplus": round(t_ep, 1),
                "agree_with_numpy": int((new.correct.values == ep).sum()),
                "agree_without": int((old.correct.values == ep).sum())}
    by_cfg = new.assign(old=old.correct).groupby(["model", "temperature"]).agg(
        samples=("correct", "size"), with_numpy=("correct", "sum"), without=("old", "sum"))
    print(by_cfg.to_string())
    print(json.dumps(out, indent=1))
    key = ["model", "temperature", "task"]
    delta = new[key].assign(dc=new.correct.astype(int) - old.correct.astype(int),
                            dcb=new.base_correct.astype(int) - old.base_correct.astype(int),
                            dt=new.timeout.astype(int) - old.timeout.astype(int)).groupby(key, as_index=False).sum()
    if args.patch_counts:
        tot = {"samples": len(samples), "dc": int(delta.dc.sum()), "dcb": int(delta.dcb.sum()),
               "dt": int(delta.dt.sum())}
        print(f"patched {patch_counts(delta, tot)} cells of {OUT_DATA / 'counts.csv'}: {tot}")
    if args.json:
        args.json.write_text(json.dumps(out | {"per_config": by_cfg.reset_index().to_dict("records")}, indent=1))


if __name__ == "__main__":
    main()
