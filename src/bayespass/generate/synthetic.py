"""A coder with known truth: no weights, real programs, real execution.

For each task a pool of *wrong* programs (single-site AST mutants of the
canonical solution, kept only if they fail at least one gold-half test when
executed, grouped by behaviour = digest vector over all tests) and of
*correct* variants (renamed, reformatted, no-op edits; verified to pass every
test).  Each task gets a true success probability ``p_i`` from a ZOIB prior
and a wrong-behaviour distribution that is concentrated ("stable-wrong": one
behaviour takes ``dominance`` of the mass) with probability ``stable_wrong``
or else diffuse.  Temperature T flattens both: ``logit p_T = logit p / T``
(boundary values stay) and ``w_T ∝ w^(1/T)``.  Sampling K programs per task
is a draw from this mixture; each sample may carry a pseudo mean token
log-probability that is informative but noisy about correctness.  Each task's
samples come from a random stream of its own, seeded by ``(seed, temperature,
task_id)`` as ``HFCoder``'s are, so that tasks are independent however they
are asked for.
"""

from __future__ import annotations

import json
import zlib

import numpy as np
import xarray as xr
from scipy.special import expit, logit

from ..data.suites import read_cached, write_cached
from ..simulate import draw_zoib
from ..validate import first_of
from .base import Coder
from .mutants import mutants, variants

__all__ = ["SyntheticCoder", "build_pools", "pool_dir"]


def _pool_candidates(suite, max_mutants, seed, tasks=None):
    recs = []
    for tid, task in suite.tasks.items():
        if tasks is not None and tid not in tasks:
            continue
        prog = task.reference_program
        for code in variants(prog, task.entry_point):
            recs.append({"task_id": tid, "solution": code, "config": "variant"})
        for code in mutants(prog, task.entry_point, max_n=max_mutants, seed=seed):
            recs.append({"task_id": tid, "solution": code, "config": "mutant"})
    return recs


def _subset_tag(tasks) -> str:
    if tasks is None:
        return ""
    import hashlib

    return "-t" + hashlib.sha256("\n".join(sorted(tasks)).encode()).hexdigest()[:10]


def pool_dir(suite, max_mutants: int = 20, seed: int = 0, tasks=None):
    """Run directory where the pool's programs were executed (reusable by later runs)."""
    from ..data.suites import cache_dir
    from ..execution.sandbox import HARNESS_VERSION

    # the harness version: a later run reuses the pool's verdicts only when they were judged alike
    return cache_dir() / (f"pools-v2-h{HARNESS_VERSION}-{suite.name}-{suite.source_hash[:16]}-m{max_mutants}-s{seed}"
                          f"{_subset_tag(tasks)}")


def build_pools(suite, *, max_mutants: int = 20, seed: int = 0, workers=None, progress=False, tasks=None) -> dict:
    """Execute candidate programs once and return per-task pools (cached under the cache dir).

    ``tasks`` restricts the pools to a subset of the suite (a separate cache entry).
    """
    from ..execution.engine import execute

    tasks = None if tasks is None else sorted(set(tasks))
    run = pool_dir(suite, max_mutants, seed, tasks)
    path = run / "pools.json"
    if (pools := read_cached(path)) is not None:
        return pools
    recs = _pool_candidates(suite, max_mutants, seed, tasks)
    ds = execute(recs, suite, out=run, workers=workers, progress=progress)
    pools = {}
    for cfg in ("variant", "mutant"):
        sub = [r for r in recs if r["config"] == cfg]
        idx = {}
        for r in sub:
            idx.setdefault(r["task_id"], []).append(r["solution"])
        for tid, codes in idx.items():
            entry = pools.setdefault(tid, {"correct": [], "wrong": {}})
            _, gold = suite.split(tid)
            for s, code in enumerate(codes):
                cell = ds.sel(config=cfg, task=tid, sample=s)
                if cfg == "variant":
                    if bool(cell.correct):
                        entry["correct"].append(code)
                    continue
                v = cell.verdict.values
                if np.all(v[gold] == 1):
                    continue  # not wrong on the gold half: not a usable mutant
                key = str(hash(cell.digest.values[v >= 0].tobytes()))
                entry["wrong"].setdefault(key, []).append(code)
    out = {tid: {"correct": p["correct"], "wrong": list(p["wrong"].values())} for tid, p in pools.items()}
    write_cached(path, json.dumps(out))  # whole or not at all: a pool cut short by Ctrl-C is not read back
    return out


def _task_key(task_id: str) -> int:
    """Stable 32-bit integer of a task id (a seed's entropy; ``hash`` changes between processes)."""
    return zlib.crc32(task_id.encode())


class SyntheticCoder(Coder):
    """Synthetic code model with known per-task truth (see the module docstring).

    Parameters
    ----------
    suite : Suite
    prior : tuple
        ZOIB prior ``(a, b, pi0, pi1)`` of the per-task success probability at T = 1.
    stable_wrong : float
        Probability that a task's wrong answers concentrate on one behaviour.
    dominance : float
        Mass of the dominant wrong behaviour in stable-wrong tasks.
    logprob_signal : float
        Mean gap of the pseudo mean-token-logprob between correct and wrong samples.
    seed : int
        Seed of the truth (p_i and wrong-behaviour weights).
    tasks : sequence of str, optional
        Restrict the coder to these tasks (smaller pools to build).
    """

    name = "synthetic"

    def __init__(self, suite, *, prior=(0.8, 0.6, 0.1, 0.15), stable_wrong: float = 0.3,
                 dominance: float = 0.7, logprob_signal: float = 0.1, max_mutants: int = 20,
                 seed: int = 0, workers=None, progress: bool = False, tasks=None):
        self.suite = suite
        if tasks is not None:
            unknown = sorted(set(tasks) - set(suite.tasks))
            if unknown:
                raise ValueError(f"tasks not in suite {suite.name!r}: {first_of(unknown)}")
            tasks = sorted(set(tasks))
        self.pools = build_pools(suite, max_mutants=max_mutants, seed=seed, workers=workers, progress=progress,
                                 tasks=tasks)
        self.run_dir = pool_dir(suite, max_mutants, seed, tasks)
        self.tasks = [t for t in suite.tasks if self.pools.get(t, {}).get("correct")]
        g = np.random.default_rng(seed)
        self.p_base = draw_zoib(len(self.tasks), *prior, seed=g)
        self.weights = []
        for t in self.tasks:
            n_w = len(self.pools[t]["wrong"])
            if n_w == 0:
                self.weights.append(np.zeros(0))
                continue
            if g.random() < stable_wrong and n_w > 1:
                w = np.full(n_w, (1 - dominance) / (n_w - 1))
                w[g.integers(n_w)] = dominance
            else:
                w = g.dirichlet(np.ones(n_w))
            self.weights.append(w)
        self.logprob_signal = logprob_signal
        self.seed = seed

    def truth(self, temperature: float) -> xr.Dataset:
        """Return the true per-task success probability ``p_true`` at a temperature."""
        p = self.p_base
        with np.errstate(divide="ignore"):
            p_t = np.where((p > 0) & (p < 1), expit(logit(np.clip(p, 1e-12, 1 - 1e-12)) / temperature), p)
        return xr.Dataset({"p_true": ("task", p_t)}, coords={"task": self.tasks},
                          attrs={"temperature": temperature, "seed": self.seed})

    def generate(self, suite=None, k: int = 10, *, temperature: float = 0.8, seed: int = 0, tasks=None,
                 model: str = "synthetic") -> list[dict]:
        """``k`` samples per task as evalplus records, with the truth of each sample attached."""
        if temperature <= 0:
            raise ValueError(f"temperature must be > 0; got {temperature!r}")
        if k < 1:
            raise ValueError(f"k must be >= 1; got {k!r}")
        p_t = self.truth(temperature)["p_true"].values
        recs = []
        wanted = set(tasks) if tasks is not None else None
        for i, t in enumerate(self.tasks):
            if wanted is not None and t not in wanted:
                continue
            # a stream per task, as HFCoder's: a task's samples do not depend on which tasks are asked for with
            # it (one stream for the call made a task's j-th sample pass together with every other task's
            # j-th, wherever it was asked for one task at a time: --until-width rounds, `bayespass generate`)
            g = np.random.default_rng([seed, int(temperature * 1000), _task_key(t)])
            pool, w = self.pools[t], self.weights[i]
            if w.size:
                w_t = w ** (1 / temperature)
                w_t = w_t / w_t.sum()
            for _ in range(k):
                ok = (g.random() < p_t[i]) or w.size == 0
                if ok:
                    code, beh = pool["correct"][g.integers(len(pool["correct"]))], -1
                else:
                    beh = int(g.choice(w.size, p=w_t))
                    cluster = pool["wrong"][beh]
                    code = cluster[g.integers(len(cluster))]
                lp = -0.3 - (0 if ok else self.logprob_signal) + 0.15 * g.standard_normal()
                recs.append({"task_id": t, "solution": code, "model": model, "temperature": temperature,
                             "correct_true": bool(ok), "behaviour": beh, "mean_logprob": float(lp)})
        return recs
