"""The supervisor's side of execution on tasks with large outputs, against another source tree, same run.

MBPP+ tasks whose expected outputs are large (Mbpp/630's are 17 MB of JSON over 123 tests) cost the
supervisor more than the candidates: building each program's job, decoding, judging and digesting its
outputs.  This times ``bayespass.execute`` on real generations of such tasks (all their distinct programs
in the first ``--configs`` fifty-sample configs of ``../shared/data/real/difftrust_mbpp/``) and on a
general subset (the first ``--tasks`` MBPP+ tasks, ``--k`` samples per task and config), with the current
source and with ``--baseline`` (a checkout's ``src``, e.g. from ``git worktree add /tmp/old HEAD~3``),
alternating, each in a fresh process on an empty store (the loaded suite frozen out of the garbage
collector's way: otherwise whether one full collection over its objects falls inside the timed call
moves a small workload's time by 0.5 s), and checks that both give the same verdicts and
the same behaviour digests for every test.

Usage:
    python benchmarks/bench_judging.py --baseline /tmp/old/src [--configs 3] [--tasks 60] [--k 5] [--repeat 2]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"
MBPP_PLUS = SHARED / "evalplus" / "MbppPlus.jsonl.gz"
sys.path.insert(0, str(REPO / "benchmarks"))

from real_mbpp import config_files  # noqa: E402

#: the MBPP+ tasks with the largest expected outputs (encoded JSON), Mbpp/255's sent as digests
LARGE = ("Mbpp/630", "Mbpp/462", "Mbpp/589", "Mbpp/603", "Mbpp/251", "Mbpp/255")

_RUN = """
import json, sys, time
import numpy as np
import bayespass as bp
samples, out = sys.argv[1], sys.argv[2]
suite = bp.load_suite("mbpp+", sys.argv[3])
import gc
gc.collect()
gc.freeze()  # the suite's millions of objects: no full collection inside the timed call, in either tree
t = time.perf_counter()
ds = bp.execute(samples, suite, out=out, workers=2, progress=False)
dt = time.perf_counter() - t
np.savez(out + "/result.npz", verdict=ds["verdict"].values, digest=ds["digest"].values,
         ref=ds["reference_digest"].values)
print(json.dumps({"seconds": dt, "programs": int(ds.attrs["n_unique_programs"])}))
"""


def workloads(n_configs: int, n_tasks: int, k: int) -> dict[str, list[dict]]:
    """Return the two workloads as evalplus-format records."""
    order = [json.loads(line)["task_id"] for line in gzip.open(MBPP_PLUS, "rt")]
    general = set(order[:n_tasks])
    large, gen = [], []
    for path in config_files("50")[:n_configs]:
        cfg = path.name[len("MBPP__"):-len(".jsonl.gz")]
        seen, per_task = set(), {}
        for line in gzip.open(path, "rt"):
            r = json.loads(line)
            t = r["task_id"]
            rec = {"task_id": t, "solution": r["solution"], "config": cfg}
            if t in LARGE and (t, r["solution"]) not in seen:
                seen.add((t, r["solution"]))
                large.append(rec)
            if t in general and per_task.get(t, 0) < k:
                per_task[t] = per_task.get(t, 0) + 1
                gen.append(rec)
    return {"large outputs": large, "general": gen}


def run_once(src: str, samples: str, out: str) -> dict:
    env = dict(os.environ, PYTHONPATH=src, OPENBLAS_NUM_THREADS="1")
    res = subprocess.run([sys.executable, "-c", _RUN, samples, out, str(MBPP_PLUS)], env=env, check=True,
                         capture_output=True, text=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> None:
    import numpy as np

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", required=True, help="another checkout's src directory")
    ap.add_argument("--configs", type=int, default=3)
    ap.add_argument("--tasks", type=int, default=60)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    if not MBPP_PLUS.exists():
        sys.exit(f"needs {MBPP_PLUS} and the real generations next to it")
    sides = {"baseline": str(Path(args.baseline).resolve()), "current": str(REPO / "src")}
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-judging-") as tmp:
        for name, recs in workloads(args.configs, args.tasks, args.k).items():
            path = Path(tmp) / f"{name.replace(' ', '_')}.jsonl"
            path.write_text("".join(json.dumps(r) + "\n" for r in recs))
            secs = {s: [] for s in sides}
            for rep in range(args.repeat):
                for side, src in sides.items():
                    out = Path(tmp) / f"{side}-{rep}-{path.stem}"
                    r = run_once(src, str(path), str(out))
                    secs[side].append(r["seconds"])
                    print(f"{name:14s} {side:8s} rep {rep}: {r['seconds']:7.1f} s ({r['programs']} programs)",
                          flush=True)
            a = np.load(Path(tmp) / f"baseline-0-{path.stem}" / "result.npz")
            b = np.load(Path(tmp) / f"current-0-{path.stem}" / "result.npz")
            same = {k: int((a[k] != b[k]).sum()) for k in ("verdict", "digest", "ref")}
            base, cur = float(np.median(secs["baseline"])), float(np.median(secs["current"]))
            rows.append((name, len(recs), r["programs"], base, cur, base / cur, same))
    print("\n| workload | samples | distinct programs | baseline (s) | current (s) | speed-up | tests whose verdict / "
          "digest / reference digest differ |\n|---|---|---|---|---|---|---|")
    for name, n, p, base, cur, ratio, same in rows:
        print(f"| {name} | {n} | {p} | {base:.1f} | {cur:.1f} | {ratio:.2f}x | "
              f"{same['verdict']} / {same['digest']} / {same['ref']} |")


if __name__ == "__main__":
    main()
