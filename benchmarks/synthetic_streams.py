"""The synthetic coder's random streams: one per call (before the eighty-fourth session) against one per task.

``SyntheticCoder.generate`` drew every sample of a call from one random stream seeded by ``(seed, temperature)``.
Called for all tasks at once (``bayespass run``) that is harmless; called for one task at a time, as
``bayespass generate --model synthetic`` and the ``--until-width`` rounds do, every task's j-th sample came from
the same uniforms, so the tasks' samples passed or failed together. The coder now keeps a stream per task,
seeded by ``(seed, temperature, task_id)``, as ``HFCoder`` does.

This benchmark measures what the old streams did to the numbers a user reads, without executing anything (the
coder's own ``correct_true`` is what execution returns: ``tests/generate/test_synthetic.py`` checks that): for
each replicate seed it draws K samples per task one task at a time, both ways, fits the default (``auto`` by EB)
and records whether the 90% band of the dataset's pass@1 and pass@K holds the coder's truth, and the error of
the unbiased pass@1.

Usage: python benchmarks/synthetic_streams.py [--reps 100] [--k 5] [--temperature 0.8] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import bayespass as bp  # noqa: E402
from bayespass.generate.synthetic import SyntheticCoder  # noqa: E402


def old_generate(coder: SyntheticCoder, k: int, temperature: float, seed: int, task: str) -> list[bool]:
    """Correctness of the k samples the old ``generate(k, temperature, seed, tasks=[task])`` drew (its loop)."""
    g = np.random.default_rng([seed, int(temperature * 1000)])
    p_t = coder.truth(temperature)["p_true"].values
    i = coder.tasks.index(task)
    pool, w = coder.pools[task], coder.weights[i]
    if w.size:
        w_t = w ** (1 / temperature)
        w_t = w_t / w_t.sum()
    out = []
    for _ in range(k):
        ok = (g.random() < p_t[i]) or w.size == 0
        if ok:
            g.integers(len(pool["correct"]))
        else:
            beh = int(g.choice(w.size, p=w_t))
            g.integers(len(pool["wrong"][beh]))
        g.standard_normal()
        out.append(bool(ok))
    return out


def new_generate(coder: SyntheticCoder, k: int, temperature: float, seed: int, task: str) -> list[bool]:
    """Correctness of the k samples today's coder draws for one task."""
    return [r["correct_true"] for r in coder.generate(k=k, temperature=temperature, seed=seed, tasks=[task])]


def replicate(coder, draw, k: int, temperature: float, seed: int) -> dict:
    c = np.array([sum(draw(coder, k, temperature, seed, t)) for t in coder.tasks])
    counts = bp.make_counts(np.full((1, c.size), k), c[None], task=coder.tasks)
    p = coder.truth(temperature)["p_true"].values
    truth = {kk: float(np.mean(1 - (1 - p) ** kk)) for kk in (1, k)}
    eti = bp.passk_curve(bp.fit(counts, progressbar=False), [1, k])["eti"].isel(config=0)
    covered = {kk: bool(eti.sel(k=kk, ci_bound="lower") <= truth[kk] <= eti.sel(k=kk, ci_bound="upper"))
               for kk in (1, k)}
    return {"cover1": covered[1], f"cover{k}": covered[k], "err1": float(c.mean() / k - truth[1]),
            "width1": float(eti.sel(k=1, ci_bound="upper") - eti.sel(k=1, ci_bound="lower"))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--temperature", type=float, default=0.8)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    import warnings

    warnings.filterwarnings("ignore", category=UserWarning)
    coder = SyntheticCoder(bp.load_suite("humaneval"), seed=0)
    p = coder.truth(a.temperature)["p_true"].values
    binom_sd = float(np.sqrt(np.sum(p * (1 - p)) / a.k) / p.size)  # sd of the mean pass rate, independent samples
    out = {"tasks": len(coder.tasks), "k": a.k, "temperature": a.temperature, "reps": a.reps,
           "binomial_sd_of_pass1": binom_sd}
    t0 = time.perf_counter()
    for name, draw in (("one stream per call (before)", old_generate), ("one stream per task (now)", new_generate)):
        rows = [replicate(coder, draw, a.k, a.temperature, 1000 + s) for s in range(a.reps)]
        err = np.array([r["err1"] for r in rows])
        out[name] = {"coverage_pass1": float(np.mean([r["cover1"] for r in rows])),
                     f"coverage_pass{a.k}": float(np.mean([r[f"cover{a.k}"] for r in rows])),
                     "sd_of_pass1_error": float(err.std(ddof=1)), "mean_band_width_pass1":
                     float(np.mean([r["width1"] for r in rows]))}
        print(name, json.dumps(out[name]), f"({time.perf_counter() - t0:.0f} s)", flush=True)
    print(f"independent samples: sd of the pass@1 error {binom_sd:.4f}")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(out, fh, indent=2)


if __name__ == "__main__":
    main()
