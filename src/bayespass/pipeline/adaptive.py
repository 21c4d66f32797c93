"""Generation in rounds until the pass@k band is narrow enough (``bayespass run --until-width W``).

Each round tops the samples up to the current targets (one count per config and task), executes the
new ones (the verdict store makes earlier ones free), fits the main model by empirical Bayes and
measures the width of the band of dataset pass@k at ``width_k``.  It stops when every config's band
is at most ``until_width`` wide, when the samples drawn reach ``max_samples``, or when the coder has
no more samples to give (replayed samples run out: each task's are drawn in a random order fixed by
the run's seed); otherwise :func:`bayespass.allocate` says which
tasks (and configs) get the next round's samples, where they shrink the band most.

Resuming: the targets of the round in progress are in ``rounds.json`` before any of its samples are
generated, and ``samples.jsonl`` is append-only, so an interrupted run tops up to the same targets
and goes on (a generating coder draws the j-th sample of a config's task with a seed fixed by the
run's seed, the config, the task and j, so the synthetic coder gives the same samples again, and the
tasks' samples are independent whatever random streams the coder keeps).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from ..data.io import write_atomic
from ..simulate import stable_seed
from .config import GEN, make_coder, say, write_truth

if TYPE_CHECKING:  # pragma: no cover
    from ..results import Table

__all__ = ["generate_until_width", "band_width"]

ROUNDS = "rounds.json"
ADAPTIVE = ("until_width", "max_samples", "width_k", "round_size")  # settings that only steer the rounds


def band_width(idata, k: int) -> dict:
    """Return the width of the ``ci_prob`` band of dataset pass@k at ``k`` per config."""
    from ..stats.curve import passk_curve

    eti = passk_curve(idata, [int(k)])["eti"].sel(k=int(k))
    width = eti.sel(ci_bound="upper") - eti.sel(ci_bound="lower")
    return {str(c): float(w) for c, w in zip(width.config.values, width.values, strict=True)}


class _Source:
    """Where a round's samples come from: a generating coder (per temperature) or replayed samples."""

    def __init__(self, ctx):
        from ..data.counts import config_label

        cfg = ctx.cfg
        self.suite, self.seed = ctx.suite, cfg.seed
        tasks = list(ctx.suite.tasks)[: cfg.tasks] if cfg.tasks else list(ctx.suite.tasks)
        self.truth = None
        if cfg.coder == "samples":
            from ..generate.hf import ReplayCoder

            self.coder = ReplayCoder(cfg.samples, suite=ctx.suite)
            table = self.coder.table[self.coder.table["task"].isin(tasks)]
            # each task's samples in a random order fixed by the run's seed and the cell: the j-th draw is any of
            # them alike, as a new sample would be, also where the file lists them sorted (passes first)
            self.pool = {key: g.sort_values("sample").iloc[_order(cfg.seed, key, len(g))]
                         for key, g in table.groupby(["config", "task"])}
            self.cells = sorted(self.pool)
            self.temperature = {}
            return
        self.coder = make_coder(cfg, ctx.suite, tasks, ctx.echo)
        name = getattr(self.coder, "model_id", self.coder.name)
        self.temperature = {config_label(name, T, None): float(T) for T in cfg.temperatures}
        if cfg.coder == "synthetic":
            tasks = [t for t in tasks if t in set(self.coder.tasks)]
        self.cells = [(conf, t) for conf in self.temperature for t in tasks]
        self.pool = None

    def available(self, cell) -> int | None:
        """Return how many samples the source can give for a (config, task) (None: unbounded)."""
        return None if self.pool is None else len(self.pool[cell])

    def caps(self, idata):
        """Return the samples on disk per (config, task) of the fit as a DataArray (None: unbounded)."""
        if self.pool is None:
            return None
        import xarray as xr

        conf, task = idata.observed_data.config.values, idata.observed_data.task.values
        cap = [[self.available((str(a), str(b))) if (str(a), str(b)) in self.pool else 0 for b in task]
               for a in conf]
        return xr.DataArray(cap, dims=("config", "task"), coords={"config": conf, "task": task})

    def more(self, cell, have: int, more: int) -> list[dict]:
        """Return samples ``have`` .. ``have + more - 1`` of a (config, task)."""
        conf, task = cell
        if self.pool is not None:
            rows = self.pool[cell].iloc[have: have + more].to_dict("records")
            return [{k: v for k, v in r.items() if k not in ("task", "sample")
                     and not (isinstance(v, float) and v != v)} for r in rows]
        T = self.temperature[conf]
        # the j-th sample of a (config, task): a seed fixed by the run's seed, the cell and j. Fixed by the run
        # and j alone, a coder with one random stream per call drew every task's j-th sample from the same
        # uniforms, and the tasks' samples passed or failed together
        seed = stable_seed(self.seed, conf, task, have)
        if self.coder.name == "synthetic":
            return self.coder.generate(k=more, temperature=T, seed=seed, tasks=[task])
        return self.coder.generate(self.suite, more, temperature=T, seed=seed, tasks=[task])


def _order(seed: int, cell, size: int):
    """Return the order in which a (config, task)'s replayed samples are drawn (a permutation fixed by the cell)."""
    import numpy as np

    return np.random.default_rng(stable_seed(seed, cell[0], cell[1], bits=64)).permutation(size)


def _read(path: Path) -> list[dict]:
    from ..generate.hf import _intact_lines, _replace

    lines = _intact_lines(path)
    if path.exists() and "".join(lines) != path.read_text(encoding="utf-8"):
        _replace(path, lines)  # a torn last line from an interrupted write
    return [json.loads(line) for line in lines]


def _own(path: Path, targets: dict) -> list[dict]:
    """Return the samples already drawn for these cells; samples of other settings are dropped from the file."""
    from ..execution.samples_io import _config_of
    from ..generate.hf import _replace

    recs = _read(path)
    mine = [(_config_of(r, "samples"), str(r["task_id"])) in targets for r in recs]
    if not all(mine):
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        _replace(path, [line for line, keep in zip(lines, mine, strict=True) if keep])
        recs = [r for r, keep in zip(recs, mine, strict=True) if keep]
    return recs


def _top_up(source: _Source, path: Path, targets: dict, recs: list[dict]) -> list[dict]:
    """Append samples until every (config, task) has its target; return all records."""
    from ..execution.samples_io import _config_of

    have = Counter((_config_of(r, "samples"), str(r["task_id"])) for r in recs)
    with open(path, "a", encoding="utf-8") as fh:
        for cell, n in targets.items():
            if have[cell] >= n:
                continue
            new = source.more(cell, have[cell], n - have[cell])
            fh.write("".join(json.dumps({k: v for k, v in r.items() if k != "gen_time"}, default=str) + "\n"
                             for r in new))
            fh.flush()
            os.fsync(fh.fileno())
            recs.extend(new)
            have[cell] += len(new)
    return recs


def _load_rounds(out: Path, source: _Source, cfg) -> dict:
    """Return the rounds so far (targets of the round in progress), or a first round of ``k`` per task."""
    base = cfg.key(*(f for f in GEN if f not in ADAPTIVE))
    path = out / ROUNDS
    if path.exists():
        state = json.loads(path.read_text())
        if state.get("base") == base:  # same coder, tasks, temperatures...: go on from there
            state["targets"] = {tuple(key.split("\t")): n for key, n in state["targets"].items()}
            return state
    first = {cell: min(cfg.k, source.available(cell) or cfg.k) for cell in source.cells}
    return {"base": base, "targets": first, "rounds": []}


def _save_rounds(out: Path, state: dict) -> None:
    data = dict(state, targets={"\t".join(cell): int(n) for cell, n in state["targets"].items()})
    text = json.dumps(data, indent=1)
    write_atomic(out / ROUNDS, lambda tmp: tmp.write_text(text))


def generate_until_width(ctx) -> None:
    """Generate, execute and fit in rounds until the band of pass@k at ``width_k`` is ``until_width`` wide."""
    from ..data.io import samples_to_counts
    from ..defaults import rcParams
    from ..execution.engine import execute
    from ..models.fit import fit

    cfg, out = ctx.cfg, ctx.out
    source = _Source(ctx)
    state = _load_rounds(out, source, cfg)
    max_samples = cfg.max_samples or 10 * sum(state["targets"].values())
    recs = _own(out / "samples.jsonl", state["targets"])
    while True:
        _save_rounds(out, state)
        recs = _top_up(source, out / "samples.jsonl", state["targets"], recs)
        r = len(state["rounds"]) + 1
        say(ctx.echo, f"  round {r}: {len(recs)} samples; executing and fitting {ctx.main}")
        samples = execute(recs, ctx.suite, out=out, workers=cfg.workers, progress=ctx.progress, reuse=ctx.reuse)
        model = ctx.main.rsplit("-", 1)[0]
        idata = fit(samples_to_counts(samples), model, "eb", seed=cfg.seed, progressbar=False,
                    candidates=cfg.models if model == "auto" else None)
        width = band_width(idata, cfg.width_k)
        stop = _stop_reason(width, cfg.until_width, len(recs), max_samples)
        nxt = None if stop else _next_targets(idata, state["targets"], source, cfg, max_samples - len(recs))
        if nxt is None and not stop:
            stop = "the samples on disk are exhausted"
        state["rounds"].append({"round": r, "samples": len(recs), "width": width, "widest": max(width.values()),
                                "ci_prob": rcParams["stats.ci_prob"], "stop": stop})
        say(ctx.echo, f"  round {r}: widest band of pass@{cfg.width_k} {max(width.values()):.4f} "
                      f"(target {cfg.until_width:g}){'; stopping: ' + stop if stop else ''}")
        if stop:
            _save_rounds(out, state)
            _say_unreached(ctx, idata, stop)
            break
        state["targets"] = nxt
    ctx.recs = recs
    if source.coder.name == "synthetic":
        write_truth(source.coder, cfg, out)


def _say_unreached(ctx, idata, stop: str) -> None:
    """Where the target was not reached with a stacked fit, say what bringing pass@k within the samples costs."""
    import textwrap

    from ..stats.plan import identify_note

    note = None if stop == "reached" else identify_note(idata, ctx.cfg.width_k)
    if note is not None:
        say(ctx.echo, textwrap.fill(note, 110, initial_indent="  note: ", subsequent_indent="        "))


def _stop_reason(width: dict, target: float, n: int, max_samples: int) -> str | None:
    if max(width.values()) <= target:
        return "reached"
    if n >= max_samples:
        return f"max_samples ({max_samples}) drawn"
    return None


def _next_targets(idata, targets: dict, source: _Source, cfg, left: int) -> dict | None:
    """Return the next round's targets from :func:`bayespass.allocate` (None: nothing left to draw)."""
    from ..stats.plan import allocate

    budget = min(left, cfg.round_size or len(targets))
    alloc = allocate(idata, k=cfg.width_k, budget=max(budget, 1), max_n=source.caps(idata), seed=cfg.seed)
    more = alloc["n_more"].to_pandas().stack()
    nxt, added = dict(targets), 0
    for (conf, task), m in more.items():
        cell = (str(conf), str(task))
        if m <= 0 or cell not in nxt:
            continue
        cap = source.available(cell)
        new = nxt[cell] + int(m) if cap is None else min(cap, nxt[cell] + int(m))
        added += new - nxt[cell]
        nxt[cell] = new
    return nxt if added else None


def rounds_table(out: Path) -> Table | None:
    """Return the rounds of an adaptive run as a table (round, samples, widest band, stop), or None."""
    import pandas as pd

    path = Path(out) / ROUNDS
    if not path.exists():
        return None
    from ..results import Table

    rows = json.loads(path.read_text())["rounds"]
    df = pd.DataFrame([{k: v for k, v in r.items() if k != "width"} for r in rows])  # older rounds: no ci_prob
    return Table.of(df, "Rounds of generation (--until-width; widest band of pass@k per round)",
                    note="Samples drawn in rounds: K per task first, then each round's samples go to the tasks (and "
                    "configs) where they shrink the band of pass@k most (bayespass.allocate); the widest band after "
                    "each round (ci_prob: its probability, the run's --ci-prob), and why the rounds stopped.")

