"""Loading a suite with its cached expected outputs, and a small run on it: this code against another.

    python benchmarks/bench_suite_load.py --old-src /tmp/old/src [--suites humaneval+,mbpp+] [--repeat 3]
        [--single-cache DIR]

Each measurement is a fresh process (``python -c``-style child of this script), alternating old and new
code, with a private copy of the cache for each: the old code reads the single-file layout, the new one
the index and values file (converted once, untimed, before the first measurement).  Per suite: seconds
of ``load_suite`` (cache present), the process's peak RSS after it, and the seconds of a run of the
canonical solutions of the first 5 tasks (``bp.execute``, 2 slots), which reads those tasks' values only.
Prints a markdown table of medians and the ratios old / new.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data" / "evalplus"
FILES = {"humaneval+": DATA / "HumanEvalPlus.jsonl.gz", "mbpp+": DATA / "MbppPlus.jsonl.gz"}

CHILD = r"""
import json, os, resource, sys, tempfile, time
import bayespass as bp
name, path = sys.argv[1], sys.argv[2]
t0 = time.perf_counter()
suite = bp.load_suite(name, path)
load_s = time.perf_counter() - t0
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
tids = list(suite.tasks)[:5]
samples = [{"task_id": t, "solution": suite.tasks[t].reference_program, "config": "gt"} for t in tids]
t0 = time.perf_counter()
with tempfile.TemporaryDirectory() as out:
    ds = bp.execute(samples, suite, out=out, workers=2, progress=False)
run_s = time.perf_counter() - t0
print(json.dumps({"load_s": load_s, "rss_mb": rss, "run_s": run_s, "correct": int(ds.correct.sum())}))
"""


def measure(name: str, src: Path, cache: Path) -> dict:
    """One fresh process: load ``name`` from ``cache`` with the code in ``src``; its timings."""
    env = dict(os.environ, PYTHONPATH=str(src), BAYESPASS_CACHE=str(cache), OPENBLAS_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", CHILD, name, str(FILES[name])], env=env, check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--old-src", required=True, help="src/ of the code to compare with (git worktree)")
    ap.add_argument("--suites", default="humaneval+,mbpp+")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--single-cache", help="folder holding single-file caches (default: bayespass's cache folder)")
    args = ap.parse_args()
    from bayespass.data.suites import cache_dir

    new_src, old_src = REPO / "src", Path(args.old_src)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        old_cache, new_cache = Path(tmp) / "old", Path(tmp) / "new"
        for d in (old_cache, new_cache):
            d.mkdir(mode=0o700)
        for name in args.suites.split(","):
            olds = list(Path(args.single_cache or cache_dir()).glob(f"expected-{name}-*-t2.json"))
            if not olds:
                raise SystemExit(f"no single-file cache of {name} there: run the old code once (or --single-cache)")
            for d in (old_cache, new_cache):
                shutil.copy(olds[0], d / olds[0].name)
            measure(name, new_src, new_cache)  # converts the new copy (untimed)
            runs = {"old": [], "new": []}
            for _ in range(args.repeat):
                runs["old"].append(measure(name, old_src, old_cache))
                runs["new"].append(measure(name, new_src, new_cache))
            med = {k: {m: statistics.median(r[m] for r in v) for m in ("load_s", "rss_mb", "run_s")}
                   for k, v in runs.items()}
            assert runs["old"][0]["correct"] == runs["new"][0]["correct"], runs
            rows.append((name, med, runs["new"][0]["correct"]))
    print("| suite | code | load_suite (s) | peak RSS (MB) | 5-task run (s) |\n|---|---|---|---|---|")
    for name, med, correct in rows:
        for k in ("old", "new"):
            m = med[k]
            print(f"| {name} | {k} | {m['load_s']:.2f} | {m['rss_mb']:.0f} | {m['run_s']:.2f} |")
        o, n = med["old"], med["new"]
        print(f"| {name} | old / new | {o['load_s'] / n['load_s']:.1f}x | {o['rss_mb'] / n['rss_mb']:.1f}x | "
              f"{o['run_s'] / n['run_s']:.2f}x ({correct} of 5 canonical programs correct in both) |")


if __name__ == "__main__":
    main()
