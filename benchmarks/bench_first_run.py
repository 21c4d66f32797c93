"""A first command on a few tasks of a suite, on a machine whose cache is empty: this code against another.

    python benchmarks/bench_first_run.py --old-src /tmp/old/src [--suites humaneval+,mbpp+] [--tasks 5]
        [--repeat 2]

Each measurement is a fresh process with an empty private cache (``BAYESPASS_CACHE``): the suite is read,
then the canonical solutions of its first ``--tasks`` tasks are executed as samples (``bp.execute``, 2 slots),
which first needs the suite's expected outputs.  Code before the ninety-first session
computed them for every task of the suite; this code computes those of the tasks executed.  Old and new
alternate.  Prints a markdown table of medians (seconds of the whole command, tasks in the cache after it)
and the ratio old / new.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data" / "evalplus"
FILES = {"humaneval+": DATA / "HumanEvalPlus.jsonl.gz", "mbpp+": DATA / "MbppPlus.jsonl.gz"}

CHILD = r"""
import glob, json, os, sys, tempfile, time
t0 = time.perf_counter()
import bayespass as bp
name, path, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
suite = bp.load_suite(name, path, expected=False)
samples = [{"task_id": t, "solution": suite.tasks[t].reference_program, "config": "gt"} for t in list(suite.tasks)[:n]]
with tempfile.TemporaryDirectory() as out:
    ds = bp.execute(samples, suite, out=out, workers=2, progress=False)
seconds = time.perf_counter() - t0
(index,) = glob.glob(os.path.join(os.environ["BAYESPASS_CACHE"], f"expected-{name}-*.json"))
print(json.dumps({"s": seconds, "correct": int(ds.correct.sum()), "cached": len(json.load(open(index))["tasks"])}))
"""


def measure(name: str, src: Path, tasks: int) -> dict:
    """One fresh process with an empty cache: the first ``tasks`` tasks of ``name`` with the code in ``src``."""
    with tempfile.TemporaryDirectory() as cache:
        os.chmod(cache, 0o700)
        env = dict(os.environ, PYTHONPATH=str(src), BAYESPASS_CACHE=cache, OPENBLAS_NUM_THREADS="1")
        out = subprocess.run([sys.executable, "-c", CHILD, name, str(FILES[name]), str(tasks)], env=env,
                             check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old-src", required=True, help="src/ of the code to compare with (git worktree)")
    ap.add_argument("--suites", default="humaneval+,mbpp+")
    ap.add_argument("--tasks", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    print(f"| suite | code | first execute of {args.tasks} tasks, empty cache (s) | tasks in the cache after |\n"
          "|---|---|---|---|")
    for name in args.suites.split(","):
        runs = {"old": [], "new": []}
        for _ in range(args.repeat):
            runs["old"].append(measure(name, Path(args.old_src), args.tasks))
            runs["new"].append(measure(name, REPO / "src", args.tasks))
        assert runs["old"][0]["correct"] == runs["new"][0]["correct"], runs
        med = {k: statistics.median(r["s"] for r in v) for k, v in runs.items()}
        for k in ("old", "new"):
            print(f"| {name} | {k} | {med[k]:.1f} | {runs[k][0]['cached']} |")
        print(f"| {name} | old / new | {med['old'] / med['new']:.1f}x | "
              f"({runs['new'][0]['correct']} of {args.tasks} canonical programs correct in both) |")


if __name__ == "__main__":
    main()
