"""What the default stopping rule for non-terminating programs changes, measured on the real MBPP set.

By default (``rcParams["execute.max_timeouts"]``) a program's tests after its first few timeouts share one
budget and what does not finish in it is recorded as a *presumed* timeout.  Correctness cannot change
(a program with a real timeout already fails), but the per-test verdicts and digests of those tests, and
with them the behaviour clusters that gating and the reliability level use, can.  This script measures
how often, on the real MBPP generations already executed by ``benchmarks/real_mbpp.py``:

1. from the store (``runs/real-mbpp/verdicts.sqlite``) it lists every (config, task) cell with a program
   whose tests were presumed, and estimates what running those tests to their limit would cost;
2. it draws cells at random (``--seed``) until ``--budget-min`` minutes of estimated exhaustive running
   are spent (cells costing more than a third of the budget are skipped and counted, so the sample leans
   to cheaper cells: said in the output);
3. it executes all samples of the drawn cells with the default, with ``max_timeouts=None`` (every test to
   its limit) and, with ``--old-rule``, with the rule before the twenty-first session (2 timeouts, then one
   shared budget that the first looping test spends), and compares each with the exhaustive run: per sample
   the correctness, the per-test verdicts of the presumed tests, and per cell the behaviour clusters
   (``signature="verdict"`` and ``"digest"``): the partition of the samples, the share of the largest
   cluster, and whether its representative is correct.

Usage:
    python benchmarks/presumed_timeouts.py [--budget-min 20] [--seed 0] [--workers 2] [--old-rule]
                                           [--store runs/real-mbpp/verdicts.sqlite] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import time
from collections import defaultdict
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from real_mbpp import MBPP_PLUS, REPO, config_files, parse_name, read_config  # noqa: E402

STORE = REPO / "runs" / "real-mbpp" / "verdicts.sqlite"
TIMEOUT = 4  # bayespass.execution.judge.VERDICTS["timeout"]


def affected_cells(store: Path) -> dict:
    """{(config, task): estimated seconds to run its presumed tests} from the store."""
    db = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    cost = {}
    for task, h, v, u, f in db.execute("SELECT task, code_hash, verdicts, durations, flags FROM results"):
        if f is None:
            continue
        flags = np.frombuffer(f, np.int8)
        presumed = (flags & 2) > 0
        if presumed.any():
            real = (np.frombuffer(v, np.int8) == TIMEOUT) & ~presumed
            dur = np.frombuffer(u, np.float32)[real]
            cost[task, h] = float(presumed.sum()) * float(np.nanmax(dur) if dur.size else 1.0)
    progs = defaultdict(set)
    for conf, task, h in db.execute("SELECT config, task, code_hash FROM samples"):
        if (task, h) in cost:
            progs[conf, task].add(h)
    return {cell: sum(cost[cell[1], h] for h in hs) for cell, hs in progs.items()}


def draw(cells: dict, budget_s: float, seed: int) -> tuple[list, int]:
    """Random cells whose estimated costs fit the budget; and how many were too costly to draw."""
    rng = np.random.default_rng(seed)
    keys = sorted(cells)
    chosen, used, too_big = [], 0.0, 0
    for i in rng.permutation(len(keys)):
        c = cells[keys[i]]
        if c > budget_s / 3:
            too_big += 1
        elif used + c <= budget_s:
            chosen.append(keys[i])
            used += c
    return chosen, too_big


def records(chosen: list, tasks: set) -> list[dict]:
    """All samples of the chosen cells, from the real generation files."""
    want = defaultdict(set)
    for conf, task in chosen:
        want[conf].add(task)
    recs = []
    for path in config_files("all"):
        model, temp = parse_name(path)
        conf = f"{model}|T={temp:g}"
        if conf in want:
            recs += [r for r in read_config(path, tasks)[0] if r["task_id"] in want[conf]]
    return recs


def compare(default, full, chosen: list) -> dict:
    """Per-sample and per-cell differences between the default and the exhaustive run."""
    from bayespass.stats.behaviour import behaviour

    out = {"cells": len(chosen), "samples": int(default.exists.sum())}
    out["correct_changed"] = int((default.correct != full.correct).where(default.exists, False).sum())
    presumed = default.presumed & default.exists
    out["presumed_tests"] = int(presumed.sum())
    out["presumed_tests_not_timeout_when_run"] = int((presumed & (full.verdict != TIMEOUT)).sum())
    out["samples_with_presumed"] = int(presumed.any("test").sum())
    out["samples_verdicts_changed"] = int(((default.verdict != full.verdict) & default.exists).any("test").sum())
    for sig in ("verdict", "digest"):
        a, b = behaviour(default, signature=sig), behaviour(full, signature=sig)
        changed, fmax, dom = 0, 0, 0
        for conf, task in chosen:
            ca = a.cluster.sel(config=conf, task=task).values
            cb = b.cluster.sel(config=conf, task=task).values
            keep = ca >= 0
            pairs = set(zip(ca[keep], cb[keep], strict=True))
            changed += not (len(pairs) == len(set(ca[keep])) == len(set(cb[keep])))
            fmax += not np.isclose(float(a.f_max.sel(config=conf, task=task)), float(b.f_max.sel(config=conf,
                                                                                                  task=task)))
            dom += bool(a.dominant_correct.sel(config=conf, task=task)) != bool(
                b.dominant_correct.sel(config=conf, task=task))
        out[f"{sig}_partition_changed"], out[f"{sig}_fmax_changed"], out[f"{sig}_dominant_correct_changed"] = \
            changed, fmax, dom
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget-min", type=float, default=20.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=REPO / "runs" / "presumed-timeouts")
    ap.add_argument("--store", type=Path, default=STORE, help="verdict store of a real run with presumed tests")
    ap.add_argument("--old-rule", action="store_true", help="also run the rule before: 2 timeouts, one budget")
    a = ap.parse_args()
    if not a.store.exists():
        sys.exit(f"{a.store} is missing: run benchmarks/real_mbpp.py first")
    import bayespass as bp

    cells = affected_cells(a.store)
    chosen, too_big = draw(cells, 60 * a.budget_min, a.seed)
    print(f"{len(cells)} cells (config x task) have a program with presumed timeouts; drew {len(chosen)} "
          f"(estimated {sum(cells[c] for c in chosen) / 60:.1f} min exhaustive); {too_big} cells cost more "
          f"than a third of the budget and were not drawn")
    suite = bp.load_suite("mbpp+", MBPP_PLUS)
    recs = records(chosen, set(suite.tasks))
    runs, secs = {}, {}
    modes = [("default", "default", bp.Limits()), ("exhaustive", None, bp.Limits())]
    if a.old_rule:  # a budget_step as long as the budget: the first looping test in it spends it all
        modes.insert(1, ("old rule", 2, bp.Limits(budget_step=bp.Limits().timeout_budget)))
    for name, mt, lim in modes:  # resumable: the stores are kept
        t0 = time.perf_counter()
        runs[name] = bp.execute(recs, suite, out=a.out / f"seed{a.seed}" / name.replace(" ", "-"),
                                workers=a.workers, max_timeouts=mt, limits=lim, progress=True)
        secs[name] = round(time.perf_counter() - t0, 1)
    res = compare(runs["default"], runs["exhaustive"], chosen)
    if a.old_rule:
        res["old_rule"] = compare(runs["old rule"], runs["exhaustive"], chosen)
    res |= {"seconds": secs, "max_timeouts_default": runs["default"].attrs.get("max_timeouts"),
            "cells_total": len(cells), "cells_too_costly": too_big, "budget_min": a.budget_min, "seed": a.seed,
            "drawn": [f"{c}/{t}" for c, t in chosen]}
    print(json.dumps(res, indent=1))
    if a.json:
        a.json.write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
