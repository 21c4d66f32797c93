"""Behavioural clusters of the K samples of each task (the basis of gating and reliability).

A sample's *behaviour signature* is read on the **probe** half of the task's
test bank only; correctness is judged on the **gold** half, so the label
never leaks into the clustering:

- ``"verdict"``: the per-test verdict vector on the probe tests;
- ``"digest"``: verdicts plus output digests on the probe tests (finer: two
  wrong programs that fail differently are different clusters);
- ``"coarse"``: (all probe base tests pass, all probe plus tests pass), the
  ablation.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import xarray as xr

from ..data.suites import split_indices
from ..defaults import resolve
from ..validate import check_choice, first_of

__all__ = ["as_samples", "behaviour", "task_mask", "SIGNATURES", "probe_gold_masks"]

SIGNATURES = ("verdict", "digest", "coarse")
_PASS = 1


def as_samples(obj, group: str = "samples") -> xr.Dataset:
    """Return the executed-samples dataset from a Dataset, a run tree or an InferenceData carrying it."""
    if isinstance(obj, xr.Dataset):
        ds = obj
    elif isinstance(obj, xr.DataTree) and group in obj.children:
        ds = obj[group].to_dataset()
    elif hasattr(obj, "groups") and not isinstance(obj, xr.DataTree) and group in obj.groups():
        ds = obj[group]
    else:
        path = f" {str(obj)!r}: read a run directory first, bp.load_run(path)" if isinstance(obj, str | Path) else ""
        raise TypeError(f"expected an executed samples xarray.Dataset, a run tree or an InferenceData with a "
                        f"{group!r} group; got {type(obj).__name__}{path}")
    missing = [v for v in ("verdict", "digest", "exists", "is_plus") if v not in ds]
    if missing and {"n", "c"} <= set(ds.data_vars) and "sample" not in ds.dims:
        raise ValueError("these are counts (n, c per config x task); this needs the executed samples, whose "
                         "per-sample verdicts and outputs it reads: bayespass.execute(...), a run directory's "
                         "samples.nc, or bp.load_run(run_dir)")
    if missing:
        raise ValueError(f"samples dataset lacks {missing}; make it with bayespass.execute")
    return ds


def probe_gold_masks(ds: xr.Dataset, probe_fraction: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """Boolean (task, test) masks of the probe and gold halves (see :func:`bayespass.data.suites.split_indices`)."""
    n_tests = (ds["is_plus"].values >= 0).sum(-1)
    probe = np.zeros(ds["is_plus"].shape, bool)
    gold = np.zeros_like(probe)
    for i, n in enumerate(n_tests):
        p, g = split_indices(int(n), probe_fraction)
        probe[i, p], gold[i, g] = True, True
    return probe, gold


def task_mask(sc: xr.DataArray, tasks, observed: np.ndarray) -> np.ndarray:
    """(config, task) mask of observed tasks among ``tasks`` (task ids, or a boolean (config, task) array)."""
    if tasks is None:
        return observed
    if isinstance(tasks, np.ndarray | xr.DataArray) and np.asarray(tasks).dtype == bool:
        mask = np.asarray(tasks)
        if mask.shape != sc.shape:
            raise ValueError(f"a boolean tasks mask must have shape (config, task) = {sc.shape}; got {mask.shape}")
        return mask & observed
    tasks = [str(t) for t in tasks]
    unknown = sorted(set(tasks) - set(map(str, sc.task.values)))
    if unknown:
        raise ValueError(f"tasks not in the samples: {first_of(unknown)}")
    return np.isin(sc.task.values.astype(str), tasks)[None, :] & observed


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser (uint64 -> uint64), so that the weighted sum below is a good hash."""
    x = x.astype(np.uint64)
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def _signatures(ds: xr.Dataset, probe: np.ndarray, signature: str) -> np.ndarray:
    """uint64 signature per (config, task, sample)."""
    v = ds["verdict"].values.astype(np.int64)
    if signature == "coarse":
        passed = (v == _PASS) | ~probe[None, :, None, :]
        plus = (ds["is_plus"].values == 1)[None, :, None, :]
        base_ok = (passed | plus).all(-1)
        plus_ok = (passed | ~plus).all(-1)
        return (base_ok.astype(np.uint64) << np.uint64(1)) | plus_ok.astype(np.uint64)
    vals = np.where(probe[None, :, None, :], v + 2, 0).astype(np.uint64)
    if signature == "digest":
        vals = vals ^ _mix(ds["digest"].values.view(np.uint64) * probe[None, :, None, :])
    weights = _mix(np.arange(1, vals.shape[-1] + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15))
    with np.errstate(over="ignore"):
        return (_mix(vals) * weights).sum(-1, dtype=np.uint64)


def behaviour(samples, *, signature: str = "verdict", probe_fraction: float | None = None) -> xr.Dataset:
    """Cluster each task's samples by behaviour on the probe tests.

    Parameters
    ----------
    samples : xarray.Dataset or arviz.InferenceData
        Executed samples (:func:`bayespass.execute`), or an InferenceData with
        a ``samples`` group.
    signature : {"verdict", "digest", "coarse"}
        What defines a behaviour (see the module docstring).
    probe_fraction : float, optional
        Share of each task's tests in the probe half, the rest is gold (default
        ``rcParams["behaviour.probe_fraction"]`` = 0.5).

    Returns
    -------
    xarray.Dataset
        Per ``(config, task, sample)``: ``cluster`` (label, -1 for missing
        samples; 0 is the largest cluster), ``gold_correct`` (passes every
        gold test), ``probe_pass`` (passes every probe test).  Per
        ``(config, task)``: ``n`` (samples), ``n_clusters``, ``f_max``
        (largest cluster / n), ``f_pass`` (share passing all probe tests),
        ``dominant`` (sample index of the dominant cluster's representative:
        its first member), ``dominant_correct`` (the representative passes
        the gold half), ``any_correct`` (some sample does: best-of-K),
        ``first_correct`` (sample 0 does), ``n_programs`` (textually distinct
        programs), ``stable_wrong`` (f_max = 1 and dominant wrong) and
        ``fragile`` (the representative passes every base test but fails a
        plus test).
    """
    ds = as_samples(samples)
    check_choice(signature, SIGNATURES, name="signature")
    probe_fraction = resolve(probe_fraction, "behaviour.probe_fraction")
    probe, gold = probe_gold_masks(ds, probe_fraction)
    exists = ds["exists"].values
    sig = _signatures(ds, probe, signature)
    v = ds["verdict"].values
    ok = (v == _PASS) | (v < 0)
    gold_ok = exists & (ok | ~gold[None, :, None, :]).all(-1)
    probe_ok = exists & (ok | ~probe[None, :, None, :]).all(-1)
    is_plus = ds["is_plus"].values[None, :, None, :]
    base_ok = exists & (ok | (is_plus != 0)).all(-1)
    all_ok = exists & ok.all(-1)
    program = ds["program"].values if "program" in ds else None

    n_cfg, n_task, n_samp = exists.shape
    cluster = np.full(exists.shape, -1, np.int32)
    shape = (n_cfg, n_task)
    n_clusters = np.zeros(shape, np.int32)
    dominant = np.full(shape, -1, np.int32)
    n_programs = np.zeros(shape, np.int32)
    for c in range(n_cfg):
        for t in range(n_task):
            idx = np.flatnonzero(exists[c, t])
            if idx.size == 0:
                continue
            uniq, first, inv, cnt = np.unique(sig[c, t, idx], return_index=True, return_inverse=True,
                                              return_counts=True)
            # relabel: largest cluster first, ties by the earliest first member
            order = np.lexsort((first, -cnt))
            rank = np.empty_like(order)
            rank[order] = np.arange(order.size)
            cluster[c, t, idx] = rank[inv]
            n_clusters[c, t] = uniq.size
            dominant[c, t] = idx[first[order[0]]]
            if program is not None:
                n_programs[c, t] = np.unique(program[c, t, idx]).size
    n = exists.sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        f_max = np.where(n > 0, (cluster == 0).sum(-1) / n, np.nan)
        f_pass = np.where(n > 0, probe_ok.sum(-1) / n, np.nan)
    dom = np.clip(dominant, 0, None)[..., None]
    take = lambda a: np.take_along_axis(a, dom, -1)[..., 0] & (dominant >= 0)  # noqa: E731
    dominant_correct = take(gold_ok)
    dims2, dims3 = ("config", "task"), ("config", "task", "sample")
    out = xr.Dataset(
        {"cluster": (dims3, cluster), "gold_correct": (dims3, gold_ok), "probe_pass": (dims3, probe_ok),
         "n": (dims2, n), "n_clusters": (dims2, n_clusters), "f_max": (dims2, f_max), "f_pass": (dims2, f_pass),
         "dominant": (dims2, dominant), "dominant_correct": (dims2, dominant_correct),
         "any_correct": (dims2, gold_ok.any(-1)), "first_correct": (dims2, gold_ok[..., 0]),
         "n_programs": (dims2, n_programs),
         "stable_wrong": (dims2, (f_max == 1) & ~dominant_correct & (n > 0)),
         "fragile": (dims2, take(base_ok) & ~take(all_ok))},
        coords={"config": ds.config.values, "task": ds.task.values, "sample": ds.sample.values})
    for name in ("mean_logprob", "correct_true"):
        if name in ds:
            out[f"first_{name}"] = ds[name].isel(sample=0, drop=True)
    out.attrs.update(signature=signature, probe_fraction=probe_fraction)
    return out
