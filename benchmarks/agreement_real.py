"""bayespass's verdicts against evalplus's on a random sample of the real MBPP programs of every config.

The throughput benchmark (``bench_execute.py --real 3``) measured agreement on 2,820 samples of three configs
only, and missed that the sandbox had no numpy (453 real programs, two configs; ``numpy_programs.py``). This
script draws ``--per-config`` records at random from each of the 34 real configs of
``../shared/data/real/difftrust_mbpp/`` (on MBPP+ tasks; as a pass@k sees them: a program a model wrote often is
drawn more often), runs each distinct (task, program) once in bayespass's sandbox and once under evalplus's
``untrusted_check`` (every test, evalplus's time limits), and prints the agreement, per config and overall, and
every disagreement with both sides' statuses: evalplus's status and first failing test, bayespass's verdict per
test. Disagreements where one side timed out are listed apart (a time limit is a measurement of a busy machine).

Usage:
    python benchmarks/agreement_real.py [--per-config 100] [--seed 0] [--workers 2] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from real_mbpp import MBPP_PLUS, config_files, read_config, sample_cells  # noqa: E402


def draw(suite, per_config: int, seed: int) -> list[dict]:
    """``per_config`` random records of every config, then one record per distinct (task, program)."""
    rng = np.random.default_rng(seed)
    tasks = set(suite.tasks)
    seen, out = set(), []
    for path in config_files("all"):
        recs, _ = read_config(path, tasks)
        idx = rng.choice(len(recs), size=min(per_config, len(recs)), replace=False)
        for i in sorted(idx):
            r = recs[i]
            key = (r["task_id"], r["solution"])
            if key not in seen:
                seen.add(key)
                out.append(r)
    return out


def evalplus_one(args):
    """evalplus's status and the index of its first failing test (-1 if none), for one program."""
    from evalplus.eval import untrusted_check

    dataset, code, inputs, entry, expected, atol, times = args
    stat, details = untrusted_check(dataset, code, inputs, entry, expected, atol, times, fast_check=False)
    details = list(details) if details is not None else []
    bad = [i for i, ok in enumerate(details) if not ok]
    return stat, (bad[0] if bad else -1), len(details)


def run_evalplus(suite, programs: list[tuple[str, str]], workers: int):
    """evalplus's ``evalplus_one`` for every (task, program text); the seconds and the results in order."""
    from bayespass.execution import engine

    jobs = []
    for task, code in programs:
        t, e = suite.tasks[task], suite.expected[task]
        jobs.append(("mbpp", code, t.inputs, t.entry_point, [engine.decode(v) for v in e["values"]], t.atol,
                     e["times"]))
    t0 = time.perf_counter()
    with ProcessPoolExecutor(workers) as ex:
        out = list(ex.map(evalplus_one, jobs, chunksize=8))
    return time.perf_counter() - t0, out


def run_bayespass(suite, samples: list[dict], workers: int):
    from bayespass.execution import engine

    t0 = time.perf_counter()
    ds = engine.execute(samples, suite, workers=workers, detail="test", progress=True)
    t = time.perf_counter() - t0
    codes = {v: k for k, v in json.loads(ds.attrs["verdict_codes"]).items()}
    rows = []
    for _, cell in sample_cells(ds, samples):
        v = [int(x) for x in cell.verdict.values if int(x) != -1]
        rows.append((bool(cell.correct), [codes[x] for x in v]))
    return t, rows


def main() -> None:
    import bayespass as bp

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--per-config", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    suite = bp.load_suite("mbpp+", MBPP_PLUS)
    samples = draw(suite, args.per_config, args.seed)
    print(f"{len(samples)} distinct programs from {len(config_files('all'))} configs", flush=True)
    t_bp, ours = run_bayespass(suite, samples, args.workers)
    print(f"bayespass {t_bp:.1f} s", flush=True)
    # the text bayespass runs
    t_ep, theirs = run_evalplus(suite, [(r["task_id"], suite.program(r["task_id"], solution=r["solution"]))
                                        for r in samples], args.workers)
    print(f"evalplus {t_ep:.1f} s", flush=True)
    per_cfg: dict = {}
    dis = []
    for r, (ok, verdicts), (stat, first_bad, _n_tests) in zip(samples, ours, theirs, strict=True):
        ep_ok = stat == "pass"
        c = per_cfg.setdefault(r["config"], Counter())
        c["programs"] += 1
        c["agree"] += ok == ep_ok
        c["pass_bayespass"] += ok
        c["pass_evalplus"] += ep_ok
        if ok != ep_ok:
            timing = stat == "timeout" or "timeout" in verdicts
            first_ours = next((i for i, v in enumerate(verdicts) if v != "pass"), -1)
            dis.append({"config": r["config"], "task": r["task_id"], "bayespass": ok, "evalplus": stat,
                        "evalplus_first_failing_test": first_bad, "bayespass_first_failing_test": first_ours,
                        "bayespass_verdict_there": verdicts[first_ours] if first_ours >= 0 else None,
                        "bayespass_verdicts": dict(Counter(verdicts)), "timing": timing,
                        "solution": r["solution"]})
    n = len(samples)
    agree = sum(c["agree"] for c in per_cfg.values())
    n_timing = sum(d["timing"] for d in dis)
    print(f"{'config':40s} {'programs':>8s} {'agree':>6s} {'pass bp':>8s} {'pass ep':>8s}")
    for cfg, c in per_cfg.items():
        print(f"{cfg:40s} {c['programs']:8d} {c['agree']:6d} {c['pass_bayespass']:8d} {c['pass_evalplus']:8d}")
    print(f"agreement {agree} / {n} ({agree / n:.4f}); disagreements {n - agree}, of which {n_timing} involve a "
          f"timeout on one side")
    for d in dis:
        print("---", {k: v for k, v in d.items() if k != "solution"})
        print(d["solution"][:1500])
    if args.json:
        args.json.write_text(json.dumps({
            "per_config": args.per_config, "seed": args.seed, "workers": args.workers, "programs": n,
            "agree": agree, "disagree": n - agree, "disagree_timing": n_timing,
            "seconds_bayespass": round(t_bp, 1), "seconds_evalplus": round(t_ep, 1),
            "by_config": {k: dict(v) for k, v in per_cfg.items()}, "disagreements": dis}, indent=1))


if __name__ == "__main__":
    main()
