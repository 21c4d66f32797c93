"""Type-aware mutation fuzzing of task inputs (the ``Gen`` of the incoherence method).

Seeded by each task's own inputs, as in EvalPlus: ints/floats +-1, +-10 or a
random value; bools flipped; strings get a character inserted, deleted or
replaced, or a substring truncated, extended or duplicated; lists, sets,
dicts and tuples get an element inserted (random or a copy), swapped,
duplicated or deleted; mutation recurses into nested values.  A candidate
input is kept only if the task's contract accepts it and the canonical
solution returns within its time limit without raising (checked in the
sandbox).  Deterministic for a seed.
"""

from __future__ import annotations

import copy
import json
import random
import string

import numpy as np

__all__ = ["mutate", "fuzz_inputs", "fuzz_suite", "fuzzed_suite"]

#: part of the cache key of fuzzed inputs: bump when which inputs are kept changes (2: MBPP+'s contracts go
#: inside the entry point's body; before, every MBPP+ task kept no input)
FUZZ_VERSION = 2


def _mutate_scalar(x, rng: random.Random):
    if type(x) is bool:
        return not x
    if type(x) is int:
        return rng.choice([x + 1, x - 1, x + 10, x - 10, rng.randint(-100, 100)])
    if type(x) is float:
        return rng.choice([x + 1.0, x - 1.0, x + 10.0, x - 10.0, round(rng.uniform(-100, 100), 3)])
    if type(x) is str:
        return _mutate_str(x, rng)
    return x


def _mutate_str(s: str, rng: random.Random) -> str:
    alphabet = string.ascii_letters + string.digits + " "
    i = rng.randint(0, len(s))
    op = rng.randrange(6) if s else 0
    if op == 0:
        return s[:i] + rng.choice(alphabet) + s[i:]
    j = min(len(s), i + rng.randint(1, 3))
    if op == 1:
        return s[:i] + s[i + 1:]
    if op == 2:
        return s[:i] + rng.choice(alphabet) + s[i + 1:]
    if op == 3:
        return s[: rng.randint(0, len(s))]
    if op == 4:
        return s + "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 3)))
    return s[:j] + s[i:j] + s[j:]


def _mutate_seq(xs: list, rng: random.Random) -> list:
    xs = list(xs)
    op = rng.randrange(5) if xs else 0
    if op == 0:
        new = copy.deepcopy(rng.choice(xs)) if xs else 0
        xs.insert(rng.randint(0, len(xs)), mutate(new, rng) if xs else new)
    elif op == 1 and len(xs) > 1:
        i, j = rng.sample(range(len(xs)), 2)
        xs[i], xs[j] = xs[j], xs[i]
    elif op == 2:
        i = rng.randrange(len(xs))
        xs.insert(i, copy.deepcopy(xs[i]))
    elif op == 3:
        del xs[rng.randrange(len(xs))]
    else:
        i = rng.randrange(len(xs))
        xs[i] = mutate(xs[i], rng)
    return xs


def mutate(x, rng: random.Random):
    """Return one type-preserving mutation of ``x`` (recursing into containers)."""
    if isinstance(x, list):
        return _mutate_seq(x, rng)
    if isinstance(x, tuple):
        return tuple(_mutate_seq(list(x), rng))
    if isinstance(x, set):
        return set(_mutate_seq(sorted(x, key=repr), rng))
    if isinstance(x, dict):
        items = list(x.items())
        if items and rng.random() < 0.5:
            k, v = rng.choice(items)
            return dict(x, **{k: mutate(v, rng)}) if isinstance(k, str) else {**x, k: mutate(v, rng)}
        if items and rng.random() < 0.5:
            k = rng.choice(items)[0]
            return {kk: vv for kk, vv in items if kk != k}
        new_k = mutate(rng.choice(items)[0], rng) if items else "k"
        return {**x, new_k: copy.deepcopy(rng.choice(items)[1]) if items else 0}
    return _mutate_scalar(x, rng)


def _candidates(seeds: list, n: int, rng: random.Random, budget: int) -> list:
    pool = [list(s) for s in seeds]
    seen = {json.dumps(s, default=repr) for s in pool}
    out = []
    tries = 0
    while len(out) < n and tries < budget and pool:
        tries += 1
        parent = rng.choice(pool)
        args = list(parent)
        if not args:
            break
        i = rng.randrange(len(args))
        args[i] = mutate(args[i], rng)
        key = json.dumps(args, default=repr)
        if key in seen:
            continue
        seen.add(key)
        out.append(args)
        pool.append(args)
    return out


def fuzz_inputs(task, n: int = 1000, *, seed: int = 0, sandbox=None, time_limit: float = 0.2,
                oversample: float = 1.5, max_timeouts: int = 8) -> dict:
    """Up to ``n`` valid fuzzed inputs of one task with the canonical outputs on them.

    Candidates on which the canonical solution times out are dropped; after
    ``max_timeouts`` of them the task stops (exponential-time tasks such as
    recursive Fibonacci would otherwise cost a time limit per candidate).

    Returns ``{"inputs": [...], "values": [tagged...], "times": [...], "tried": int}``.
    """
    from .child import encode
    from .sandbox import Limits, Sandbox

    rng = random.Random(f"{seed}:{task.task_id}")
    own = sandbox is None
    sb = sandbox or Sandbox(limits=Limits(cpu_s=600))
    cands = _candidates(task.inputs, int(n * oversample), rng, budget=int(20 * n * oversample))
    program = task.contracted_program
    tagged = []
    keep_c = []
    for c in cands:
        try:
            tagged.append(encode(tuple(c)))
            keep_c.append(c)
        except TypeError:
            continue
    timeouts = [0]

    def stop(i, o):
        timeouts[0] += o.status == "timeout"
        return timeouts[0] >= max_timeouts

    try:
        # retry: a timeout during which the child got less than half a CPU (load) is re-run once with a
        # larger limit before it counts, until one genuine timeout is seen (then the task is slow by nature)
        outs = sb.run(program, task.entry_point, tagged, [time_limit] * len(tagged),
                      output_not_none=task.output_not_none, stop=stop, retry=True)
    finally:
        if own:
            sb.close()
    ok = [i for i, o in enumerate(outs) if o.status == "value"][:n]
    return {"inputs": [tagged[i] for i in ok], "values": [outs[i].value for i in ok],
            "times": [outs[i].duration for i in ok], "tried": len(tagged)}


def fuzz_suite(suite, n: int = 1000, *, seed: int = 0, workers: int | None = None, use_cache: bool = True,
               tasks=None) -> dict:
    """Fuzz every task (or ``tasks``) of a suite in the sandbox (cached on disk by suite hash, n, seed, tasks)."""
    from ..data.suites import cache_dir, read_cached, write_cached
    from .groundtruth import ground_truth, load_factor
    from .harness import SlotPool
    from .sandbox import VALUES_VERSION, Limits

    ground_truth(suite, workers=workers, tasks=tasks)  # of the tasks fuzzed, where missing
    tag = ""
    if tasks is not None:
        import hashlib

        tasks = sorted(set(tasks))
        tag = "-t" + hashlib.sha256("\n".join(tasks).encode()).hexdigest()[:10]
    path = cache_dir() / (f"fuzz-{suite.name}-{suite.source_hash[:16]}-n{n}-s{seed}{tag}-h{VALUES_VERSION}"
                          f"-f{FUZZ_VERSION}.json")
    if use_cache and (cached := read_cached(path)) is not None:
        return cached
    tasks = [t for t in suite.tasks.values() if tasks is None or t.task_id in tasks]
    # on a busy machine the canonical solution is slower: scale the per-input limit as execution does, so
    # the inputs kept (and the test that needs 200 of them) do not depend on what else runs
    limit = 0.2 * load_factor(suite)
    with SlotPool(workers, limits=Limits(cpu_s=600)) as pool:
        res = pool.map(lambda sb, t: fuzz_inputs(t, n, seed=seed, sandbox=sb, time_limit=limit), tasks,
                       desc=f"fuzzing inputs of {suite.name} (once; cached)")
    out = {t.task_id: r for t, r in zip(tasks, res, strict=True)}
    write_cached(path, json.dumps(out))
    return out


def summary(fuzzed: dict, threshold: int = 200) -> dict:
    """Fraction of tasks with at least ``threshold`` valid inputs, and the median count."""
    counts = np.array([len(v["inputs"]) for v in fuzzed.values()])
    return {"tasks": len(counts), "frac_ge_threshold": float(np.mean(counts >= threshold)),
            "median_inputs": float(np.median(counts)), "min_inputs": int(counts.min())}


def fuzzed_suite(suite, n: int = 1000, *, seed: int = 0, workers: int | None = None, use_cache: bool = True,
                 tasks=None):
    """Return a :class:`Suite` whose tests are the fuzzed inputs (expected = canonical outputs on them).

    Executing samples against it (``bayespass.execute``) records every
    program's behaviour digest on the fuzzed inputs, which is what
    :func:`bayespass.stats.incoherence.incoherence` needs.
    """
    import dataclasses
    import hashlib

    from ..data.suites import Suite
    from .child import decode

    fz = fuzz_suite(suite, n, seed=seed, workers=workers, use_cache=use_cache, tasks=tasks)
    tasks, expected = {}, {}
    for tid, task in suite.tasks.items():
        res = fz.get(tid)
        if not res or not res["inputs"]:
            continue
        tasks[tid] = dataclasses.replace(task, inputs=[list(decode(x)) for x in res["inputs"]],
                                         n_base=len(res["inputs"]), test_code="")
        expected[tid] = {"inputs": res["inputs"], "values": res["values"], "times": res["times"],
                         "n_base": len(res["inputs"]), "dropped": []}
    h = hashlib.sha256(f"{suite.source_hash}:fuzz:{n}:{seed}".encode()).hexdigest()
    return Suite(f"{suite.name}:fuzz", tasks, h, expected=expected, speed_ref=suite.speed_ref)
