"""The counts dataset: ``n`` (samples drawn) and ``c`` (samples correct) per (config, task).

A *config* is one model at one decoding setting on one benchmark.  Its
coordinates ``model``, ``temperature`` and ``benchmark`` live on the ``config``
dimension.  Missing (config, task) pairs are stored as ``n = 0`` ("not
observed"); every estimator handles them.
"""

from __future__ import annotations

import datetime as _dt
import os
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from .._version import __version__

__all__ = ["make_counts", "counts_from_frame", "counts_from_samples", "counts_of_fit", "validate_counts",
           "config_label", "merge_counts"]

_FRAME_KEYS = ("model", "temperature", "benchmark")


def config_label(model: Any, temperature: Any, benchmark: Any) -> str:
    """Return the label used as the ``config`` coordinate, e.g. ``"m1|T=0.8|humaneval"``."""
    parts = [str(model)]
    if temperature is not None and not (isinstance(temperature, float) and np.isnan(temperature)):
        parts.append(f"T={float(temperature):g}")
    if benchmark not in (None, ""):
        parts.append(str(benchmark))
    return "|".join(parts)


def benchmarks_of(counts: xr.Dataset) -> list[str]:
    """Return the benchmarks the counts' configs name (sorted, the empty name left out)."""
    if "benchmark" not in counts.coords:
        return []
    return sorted({str(b) for b in np.atleast_1d(counts["benchmark"].values)} - {""})


def make_counts(
    n,
    c,
    *,
    task=None,
    config=None,
    model=None,
    temperature=None,
    benchmark=None,
    source: str = "arrays",
    attrs: dict | None = None,
) -> xr.Dataset:
    """Build and validate a counts dataset from ``(config, task)`` or ``(task,)`` arrays.

    Parameters
    ----------
    n, c : array_like of int
        Samples drawn and samples correct, shape ``(config, task)`` or ``(task,)``.
    task, config : sequence of str, optional
        Labels; defaults ``task-0...`` and ``config-0...``.
    model, temperature, benchmark : sequence, optional
        Per-config coordinates.
    source : str
        Provenance recorded in ``attrs["source"]``.
    attrs : dict, optional
        Extra attributes.

    Returns
    -------
    xarray.Dataset
        With data variables ``n`` and ``c`` over ``(config, task)``.

    Examples
    --------
    >>> import bayespass as bp
    >>> ds = bp.make_counts([2, 3], [1, 0])
    >>> ds.sizes["task"], int(ds.n.sum())
    (2, 5)
    """
    n_arr = np.asarray(n)
    c_arr = np.asarray(c)
    if n_arr.shape != c_arr.shape:
        raise ValueError(f"n and c must have the same shape; got {n_arr.shape} and {c_arr.shape}")
    if n_arr.ndim == 1:
        n_arr, c_arr = n_arr[None, :], c_arr[None, :]
    if n_arr.ndim != 2:
        raise ValueError(f"n must be 1-D (task) or 2-D (config, task); got shape {n_arr.shape}")
    n_cfg, n_task = n_arr.shape
    if task is None:
        task = [f"task-{i}" for i in range(n_task)]
    elif isinstance(task, pd.Index | np.ndarray) and task.dtype != object or isinstance(task, pd.Index):
        task = np.asarray(task.astype(str), dtype=object)
    else:
        task = [str(t) for t in task]
    model = list(model) if model is not None else None
    if config is None:
        config = (
            [config_label(model[j], _at(temperature, j), _at(benchmark, j)) for j in range(n_cfg)]
            if model is not None
            else [f"config-{j}" for j in range(n_cfg)]
        )
    coords: dict[str, Any] = {"config": [str(x) for x in config], "task": np.asarray(task, dtype=object)}
    coords["model"] = ("config", [str(m) for m in model] if model is not None else coords["config"])
    temps = [np.nan if _at(temperature, j) is None else float(_at(temperature, j))
             for j in range(n_cfg)]
    coords["temperature"] = ("config", np.asarray(temps, dtype=float))
    coords["benchmark"] = ("config", [str(_at(benchmark, j) or "") for j in range(n_cfg)])
    ds = xr.Dataset(
        {"n": (("config", "task"), n_arr), "c": (("config", "task"), c_arr)}, coords=coords
    )
    ds.attrs.update(
        source=source,
        created=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        bayespass_version=__version__,
    )
    ds.attrs.update(attrs or {})
    return validate_counts(ds)


def _at(seq, j):
    if seq is None:
        return None
    if isinstance(seq, str | int | float):
        return seq
    return list(seq)[j]


def counts_of_fit(idata) -> xr.Dataset:
    """Return the counts a fit was made on: its ``observed_data`` ``c`` and ``constant_data`` ``n``."""
    n = idata.constant_data["n"].transpose("config", "task")
    c = idata.observed_data["c"].transpose("config", "task")
    return make_counts(n.values, c.sel(config=n.config, task=n.task).values, task=n.task.values,
                       config=n.config.values)


def validate_counts(ds: xr.Dataset | pd.DataFrame) -> xr.Dataset:
    """Check a counts dataset and return it with ``n``/``c`` as int64.

    A hand-built ``xarray.Dataset`` of ``n`` and ``c`` alone is completed as :func:`make_counts` would make
    it: config and task labels given as numbers become names, and absent per-config coordinates are added
    (``model`` the config's label, ``temperature`` NaN, ``benchmark`` "").  ``counts.sel(config="a")`` (config a
    scalar) is taken as the one config it holds.

    A pandas DataFrame in the long layout of :func:`counts_from_frame` (columns ``task, n, c`` and
    optionally ``config`` or ``model, temperature, benchmark``) is converted first, one of one row per sample
    (a pass column, no ``n``, ``c``) counted by :func:`counts_from_samples`; a run (the tree of
    ``bp.load_run``) gives its counts.

    Raises
    ------
    TypeError
        If ``ds`` is neither an ``xarray.Dataset``, a pandas DataFrame nor a run with counts.
    ValueError
        On missing variables or dims, empty input, NaN, negative or non-integer
        counts, or ``c > n``; the message names the offending config and task.
    """
    if isinstance(ds, pd.DataFrame):
        return counts_from_frame(ds, where="counts (a DataFrame)")
    if isinstance(ds, xr.DataTree) and "counts" in ds.children:  # a run (bp.load_run)
        ds = ds["counts"].to_dataset()
    if not isinstance(ds, xr.Dataset):
        raise TypeError(f"counts must be an xarray.Dataset (see bayespass.read_counts), a DataFrame with "
                        f"columns task, n, c (and config) or a run (bp.load_run); got {type(ds).__name__}"
                        + (f" {os.fspath(ds)!r}: read a counts file or run directory with bp.read_counts(path)"
                           if isinstance(ds, str | os.PathLike) else ""))
    ds = _with_count_dims(ds)
    if ds.sizes["task"] == 0 or ds.sizes["config"] == 0:
        raise ValueError("counts dataset is empty: it needs at least one config and one task")
    for dim in ("config", "task"):
        if ds.indexes[dim].dtype.kind not in "OU":  # numbers as labels (config=[0, 1]): names, as make_counts makes
            ds = ds.assign_coords({dim: np.asarray(ds.indexes[dim].astype(str), dtype=object)})
        labels = ds.indexes[dim]  # pandas caches is_unique on the index object: checked once per dataset
        if labels.has_duplicates:
            dup = labels[labels.duplicated()].unique().tolist()
            from ..validate import first_of

            raise ValueError(f"duplicate {dim} labels in counts: {first_of(dup)}")
        blank = np.flatnonzero(labels.astype(str).str.strip() == "")
        if blank.size:
            raise ValueError(f"{dim} labels in counts must be non-empty names; got {str(labels[blank[0]])!r} "
                             f"(position {blank[0]} of {len(labels)})")
    n = ds["n"].values
    c = ds["c"].values
    for var, arr in (("n", n), ("c", c)):
        if arr.dtype.kind == "b":
            raise ValueError(f"{var} must hold integer counts, not booleans (True/False); got dtype bool "
                             "(convert a per-sample correctness array with bayespass.to_counts, or count it)")
        if arr.dtype.kind not in "iuf":
            raise ValueError(f"{var} must hold integer counts; got dtype {arr.dtype}")
        arr_f = np.asarray(arr, dtype=float)
        bad = ~np.isfinite(arr_f) | (arr_f < 0) | (arr_f != np.round(arr_f))
        if bad.any():
            j, i = np.argwhere(bad)[0]
            hint = ("; xr.concat and xr.merge fill a (config, task) pair one side lacks with NaN: combine counts "
                    "with bayespass.merge_counts([a, b]) (a pair not run is n = 0), or .fillna(0)"
                    if np.isnan(arr_f[j, i]) else "")
            raise ValueError(
                f"{var} must be a non-negative integer for every task; config "
                f"{str(ds.config.values[j])!r}, task {str(ds.task.values[i])!r} has {var}={arr[j, i].item()!r}{hint}"
            )
    bad = c > n
    if bad.any():
        j, i = np.argwhere(bad)[0]
        raise ValueError(
            f"c must be <= n for every task; config {str(ds.config.values[j])!r}, task "
            f"{str(ds.task.values[i])!r} has c={c[j, i]}, n={n[j, i]}"
        )
    if not (n > 0).any():
        raise ValueError("counts dataset has no observed task (every n is 0)")
    ds = ds.assign(n=ds["n"].astype("int64"), c=ds["c"].astype("int64"))
    return _with_config_coords(ds)


def _with_count_dims(ds: xr.Dataset) -> xr.Dataset:
    """Return ``ds`` with ``n`` and ``c`` over (config, task), one config selected by label made one of one."""
    ds = _one_config_kept(ds)
    for var in ("n", "c"):
        if var not in ds:
            raise ValueError(f"counts dataset has no variable {var!r}; it needs 'n' and 'c'")
        if set(ds[var].dims) != {"config", "task"}:
            one = (" (one config: counts.expand_dims(config=['name']))" if ds[var].dims == ("task",) else "")
            raise ValueError(f"counts[{var!r}] must have dims ('config', 'task'); got {ds[var].dims}{one}")
    return ds.transpose("config", "task", ...)


def _one_config_kept(ds: xr.Dataset) -> xr.Dataset:
    """Return ``counts.sel(config="a")`` (config a scalar coordinate) as the one-config counts it came from."""
    if not ("config" in ds.coords and ds["config"].ndim == 0 and "config" not in ds.dims
            and all(v in ds and ds[v].dims == ("task",) for v in ("n", "c"))):
        return ds
    scalars = {name: ("config", [ds[name].values.item()]) for name in ("model", "temperature", "benchmark")
               if name in ds.coords and ds[name].ndim == 0}
    return ds.drop_vars(list(scalars)).expand_dims("config").assign_coords(scalars)


def _with_config_coords(ds: xr.Dataset) -> xr.Dataset:
    """Give a hand-built counts dataset the per-config coordinates ``make_counts`` gives (fits, tables need them).

    Absent ones become what ``make_counts`` writes when not told: ``model`` the config's label (each config its
    own model, so no siblings are pooled), ``temperature`` NaN, ``benchmark`` "".  Ones given over other dims
    are refused.
    """
    labels = [str(x) for x in ds.config.values]
    fill = {"model": labels, "temperature": np.full(len(labels), np.nan), "benchmark": [""] * len(labels)}
    for name in fill:
        if name in ds.variables and ds[name].dims != ("config",):
            raise ValueError(f"counts[{name!r}] must be a coordinate over ('config',) (one per config); got dims "
                             f"{ds[name].dims}")
    missing = {name: ("config", vals) for name, vals in fill.items() if name not in ds.variables}
    return ds.assign_coords(missing) if missing else ds


def _count_column(df: pd.DataFrame, col: str, where: str) -> pd.Series:
    """Return column ``col`` (n or c) of a counts table as int64; refuse booleans and non-count values."""
    kind = df[col].dtype.kind
    if kind == "b" or (kind == "O" and df[col].map(lambda v: isinstance(v, bool | np.bool_)).any()):
        raise ValueError(f"{where}: column {col!r} must hold integer counts, not booleans (True/False); a "
                         f"table of one row per sample is counted by bayespass.to_counts(df, passed={col!r}), or "
                         "by grouping on task: n = rows, c = passes")
    vals = pd.to_numeric(df[col], errors="coerce").astype("float64")  # a nullable column's NA: NaN, refused
    bad = ~np.isfinite(vals) | (vals < 0) | (vals != np.round(vals))
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise ValueError(f"{where}, row {row + 1} (task {df['task'].iloc[row]!r}): {col} must be a "
                         f"non-negative integer; got {_shown(df[col].iloc[row])}")
    return vals.astype("int64")


def counts_from_frame(df: pd.DataFrame, *, source: str = "frame", attrs: dict | None = None,
                      where: str = "input") -> xr.Dataset:
    """Build a counts dataset from a long table with columns ``task, n, c`` (+ config, model, temperature, benchmark).

    ``task_id``, evalplus's name, is read as ``task`` where there is no ``task`` column.

    A ``config`` column gives each config's label as it is; without one the label is built from model,
    temperature and benchmark (``"m1|T=0.8|humaneval"``).

    Rows for the same (config, task) are an error; pairs absent from the table
    become ``n = 0``.  ``where`` names the input in error messages.  A table of one row per sample (a pass
    column, no ``n``, ``c``) is counted by :func:`counts_from_samples`.
    """
    if _per_sample(df):
        return counts_from_samples(df, source=source, where=where, attrs=attrs)
    found = list(df.columns)
    if "task" not in df.columns and "task_id" in df.columns:  # evalplus's name for it
        df = df.rename(columns={"task_id": "task"})
    missing = [col for col in ("task", "n", "c") if col not in df.columns]
    if missing:
        code = [col for col in ("solution", "completion", "generation") if col in df.columns]
        hint = (f"; its {code[0]!r} column looks like generations, which 'bayespass execute' (bp.execute) runs "
                "into counts" if code else "; one row per sample is counted when it has a pass column (passed, "
                "correct, pass, is_correct, success or status)")
        raise ValueError(f"{where}: missing column(s) {missing}; a counts table needs task (or task_id),n,c "
                         f"(optional config,model,temperature,benchmark){hint}; found {found}")
    if len(df) == 0:
        raise ValueError(f"{where}: no rows")
    _check_names(df, where)
    df = df.copy()
    df["model"] = df["model"].astype(str) if "model" in df else "model"
    df["temperature"] = _temperatures(df, where) if "temperature" in df else np.nan
    df["benchmark"] = (df["benchmark"].map(lambda v: "" if pd.isna(v) else str(v))
                       if "benchmark" in df else "")
    for col in ("n", "c"):
        df[col] = _count_column(df, col, where)
    bad = df["c"] > df["n"]
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise ValueError(f"{where}, row {row + 1} (task {df['task'].iloc[row]!r}): c must be <= n; "
                         f"got c={df['c'].iloc[row]}, n={df['n'].iloc[row]}")
    # configs and tasks are numbered in order of first appearance, without a per-row Python loop
    keys = pd.DataFrame({"model": df["model"], "temperature": df["temperature"], "benchmark": df["benchmark"]})
    if "config" in df:  # labels as written (write_counts keeps a fit's own labels): one config per label
        labels = df["config"].map(lambda v: "" if pd.isna(v) else str(v))
        cfg_code, configs = pd.factorize(labels, sort=False)
        configs = list(configs)
        meta = keys[~labels.duplicated()].reset_index(drop=True)
    else:
        cfg_code = keys.groupby(["model", "temperature", "benchmark"], sort=False, dropna=False).ngroup().to_numpy()
        meta = keys.drop_duplicates().reset_index(drop=True)
        configs = [config_label(m, t, b) for m, t, b in zip(meta["model"], meta["temperature"], meta["benchmark"],
                                                             strict=True)]
    task_code, tasks = pd.factorize(df["task"].astype(str), sort=False)
    key = cfg_code.astype(np.int64) * len(tasks) + task_code
    dup = pd.Series(key).duplicated().to_numpy()
    if dup.any():
        row = int(np.flatnonzero(dup)[0])
        raise ValueError(f"{where}, row {row + 1}: duplicate row for config {configs[cfg_code[row]]!r}, "
                         f"task {tasks[task_code[row]]!r}")
    wide_n = np.zeros((len(configs), len(tasks)), np.int64)
    wide_c = np.zeros_like(wide_n)
    wide_n[cfg_code, task_code] = df["n"].to_numpy()
    wide_c[cfg_code, task_code] = df["c"].to_numpy()
    return make_counts(
        wide_n, wide_c,
        task=tasks, config=configs, model=meta["model"].tolist(),
        temperature=[None if np.isnan(t) else t for t in meta["temperature"]],
        benchmark=meta["benchmark"].tolist(), source=source, attrs=attrs,
    )


_PASS_COLUMNS = ("passed", "correct", "pass", "is_correct", "success", "status")


def counts_from_samples(samples, *, passed: str | None = None, source: str = "samples",
                        where: str = "samples (a DataFrame of one row per sample)",
                        attrs: dict | None = None) -> xr.Dataset:
    """Count a table of one row per sample, or a boolean array over ``(config, task, sample)``, into counts.

    A DataFrame needs ``task`` (or ``task_id``) and a column saying whether the sample passed: ``passed``
    names it, else the first of ``passed, correct, pass, is_correct, success, status`` that it has.  Its values
    are booleans, 0/1, or evalplus's status strings ("pass" passes; "fail", "timeout", ... do not).  The
    configs are the ``config`` column, or ``model``/``temperature``/``benchmark`` as in
    :func:`counts_from_frame`.  An array is boolean (or 0/1) over ``(task, sample)`` or ``(config, task,
    sample)``; NaN marks a sample not drawn.  ``source`` and ``attrs`` are recorded; ``where`` names the input in
    errors.
    """
    if isinstance(samples, xr.DataArray):
        return _counts_of_array(samples)
    df = samples
    if "task" not in df.columns and "task_id" in df.columns:
        df = df.rename(columns={"task_id": "task"})
    col = passed if passed is not None else next((x for x in _PASS_COLUMNS if x in df.columns), None)
    if col is None or col not in df.columns or "task" not in df.columns:
        which = (f"passed={passed!r} is not one" if passed is not None else
                 f"one of {', '.join(_PASS_COLUMNS)}, or name it with passed=")
        raise ValueError(f"{where}: needs a task (or task_id) column and a column saying whether each sample "
                         f"passed ({which}); found {list(df.columns)}")
    ok = _passes(df[col], col, where)
    keys = [x for x in ("config", *_FRAME_KEYS) if x in df.columns]
    grouped = df.assign(_ok=ok).groupby([*keys, "task"], sort=False, dropna=False)["_ok"]
    long = pd.concat([grouped.size().rename("n"), grouped.sum().rename("c")], axis=1).reset_index()
    return counts_from_frame(long, source=source, where=where, attrs=attrs)


def _per_sample(df: pd.DataFrame) -> bool:
    """Whether a table is one row per sample (a pass column, no n and c) rather than counts."""
    return not {"n", "c"} & set(df.columns) and any(x in df.columns for x in _PASS_COLUMNS)


#: words a pass column may hold: evalplus's statuses, bayespass's verdicts and written-out booleans
_PASS_WORDS = {"pass": 1, "passed": 1, "true": 1, "1": 1, "fail": 0, "failed": 0, "false": 0, "0": 0, "timeout": 0,
               "error": 0, "crash": 0, "oversize": 0, "not_run": 0}


def _passes(col: pd.Series, name: str, where: str) -> pd.Series:
    """Return a per-sample pass column as 0/1; raise naming the first row neither a boolean, 0/1 nor a status."""
    def value(v):
        if isinstance(v, str):
            return _PASS_WORDS.get(v.strip().lower(), np.nan)
        return int(v) if isinstance(v, bool | np.bool_) else v

    vals = pd.to_numeric(col.map(value), errors="coerce")
    bad = ~vals.isin([0, 1])
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        v = vals.iloc[row]
        count = not pd.isna(v) and v > 1 and float(v).is_integer()
        raise ValueError(f"{where}, row {row + 1}: column {name!r} must say whether the sample passed (True/False, "
                         f"1/0 or a status: {', '.join(_PASS_WORDS)}); got {_shown(col.iloc[row])}"
                         + ("; a table of counts, a row per task, names its columns n (samples drawn) and c "
                            "(samples passed)" if count else ""))
    return vals.astype("int64")


def _counts_of_array(arr: xr.DataArray) -> xr.Dataset:
    """Count a boolean (or 0/1, NaN = not drawn) array over ``(task, sample)`` or ``(config, task, sample)``."""
    dims = set(arr.dims)
    if dims not in ({"task", "sample"}, {"config", "task", "sample"}):
        raise ValueError(f"a per-sample array must have dims ('task', 'sample') or ('config', 'task', 'sample'); "
                         f"got {arr.dims}")
    if "config" not in dims:
        arr = arr.expand_dims(config=["config-0"])
    arr = arr.transpose("config", "task", "sample")
    vals = np.asarray(arr.values, dtype=float)
    drawn = ~np.isnan(vals)
    if not np.isin(vals[drawn], (0.0, 1.0)).all():
        raise ValueError("a per-sample array must hold booleans or 0/1 (NaN: not drawn); got the value "
                         f"{vals[drawn][~np.isin(vals[drawn], (0.0, 1.0))][0]!r}")
    return make_counts(drawn.sum(-1), np.where(drawn, vals, 0).sum(-1).astype(np.int64), task=arr.task.values,
                       config=arr.config.values, source="samples")


def merge_counts(datasets, *, names=None) -> xr.Dataset:
    """Return one counts dataset holding the configs of several (e.g. runs executed apart), on the union of tasks.

    A config absent from a task has ``n = 0`` there.  Two inputs that hold the same config label are refused
    (``names``, one per input, say which in the message): merging them would make two configs one.
    """
    datasets = list(datasets)
    names = [f"input {i}" for i in range(len(datasets))] if names is None else [str(x) for x in names]
    if len(names) != len(datasets):
        raise ValueError(f"names must name each of the {len(datasets)} inputs; got {len(names)}")
    frames, owner = [], {}
    for ds, name in zip(datasets, names, strict=True):
        ds = validate_counts(ds)
        for label in map(str, ds.config.values):
            if label in owner:
                raise ValueError(f"{owner[label]} and {name} both hold config {label!r}; a config must come from one "
                                 "input (rename it in one of them)")
            owner[label] = name
        df = ds[["n", "c"]].to_dataframe().reset_index()
        frames.append(df[df["n"] > 0][["config", "model", "temperature", "benchmark", "task", "n", "c"]])
    if not frames:
        raise ValueError("merge_counts needs at least one counts dataset")
    return counts_from_frame(pd.concat(frames, ignore_index=True), source="merged", where="merged counts")


def single_sample_share(n) -> np.ndarray:
    """(config,): the share of each config's observed tasks (n > 0) that have one sample; ``n`` (config, task)."""
    n = np.asarray(n)
    return (n == 1).sum(1) / np.maximum((n > 0).sum(1), 1)


def pass1_rate_trials(n, c) -> tuple[np.ndarray, np.ndarray]:
    """(config,) each: the observed pass@1 (mean over observed tasks of c / n) and its effective number of trials.

    What :func:`bayespass.stats.curve.identified_band` needs: the number of Bernoulli trials whose mean has the
    variance of the tasks' mean rate, ``tasks^2 / sum_i 1 / n_i``.  ``n``, ``c`` (config, task).
    """
    n, c = np.asarray(n), np.asarray(c)
    seen = n > 0
    inv = np.where(seen, 1.0 / np.where(seen, n, 1), 0.0)
    tasks = seen.sum(1)
    return (c * inv).sum(1) / np.maximum(tasks, 1), tasks**2 / np.maximum(inv.sum(1), 1e-300)


#: the band rules "hull-short" and "hull-beyond" (``stats.curve.passk_bands``) count pass@k as identified by the
#: data up to the largest k that at most this share of a config's observed tasks have fewer samples than: where only a
#: task or two of a few hundred has fewer (a failed generation, a ragged import), the candidates' disagreement
#: about those tasks moves the dataset pass@k by at most this share
IDENTIFIED_SHARE = 0.01


def identified_k(n) -> np.ndarray:
    """(config,): the largest k that at most :data:`IDENTIFIED_SHARE` of each config's observed tasks have n < k.

    ``n`` (config, task); 0 for a config without an observed task.  Under 100 observed tasks it is the
    smallest n (no task may fall short).
    """
    n = np.asarray(n)
    out = np.zeros(n.shape[0], dtype=np.int64)
    for j, row in enumerate(n):
        seen = np.sort(row[row > 0])
        if seen.size:
            out[j] = seen[_may_fall_short(seen.size)]
    return out


def _may_fall_short(observed: int) -> int:
    """How many of ``observed`` tasks may have fewer than k samples with pass@k still identified (rounded down)."""
    return int(np.floor(IDENTIFIED_SHARE * observed + 1e-9))


def samples_to_identify(n, k: int) -> np.ndarray:
    """(config,): the fewest more samples after which :func:`identified_k` reaches ``k``.

    Every observed task is topped up to k samples, except the :data:`IDENTIFIED_SHARE` of them (rounded down)
    that fall furthest short.  ``n`` (config, task); a config without an observed task needs none (there is
    nothing to identify).
    """
    n = np.asarray(n)
    out = np.zeros(n.shape[0], dtype=np.int64)
    for j, row in enumerate(n):
        seen = row[row > 0]
        short = np.sort(np.maximum(k - seen, 0))[::-1]  # the largest shortfalls first
        out[j] = int(short[_may_fall_short(seen.size):].sum())
    return out


def _check_names(df: pd.DataFrame, where: str) -> None:
    """Raise a ValueError naming the row when a task or config cell is empty (it became '' or 'nan')."""
    for col in ("task", "config"):
        if col in df:
            empty = df[col].map(lambda v: pd.isna(v) or not str(v).strip()).to_numpy(bool)
            if empty.any():
                row = int(np.flatnonzero(empty)[0])
                raise ValueError(f"{where}, row {row + 1}: {col} is empty ({_shown(df[col].iloc[row])}); every "
                                 f"row needs a {col} name")


def _plain(v):
    """Return a cell's value as the user wrote it: numpy scalars as Python ones, a missing cell as ''."""
    if pd.api.types.is_scalar(v) and pd.isna(v):  # None, NaN, and the pd.NA of nullable or pyarrow-backed columns
        return ""
    return v.item() if isinstance(v, np.generic) else v


def _temperatures(df: pd.DataFrame, where: str) -> pd.Series:
    """Return the ``temperature`` column as numbers (empty cells NaN); raise naming the first cell that is not."""
    vals = pd.to_numeric(df["temperature"], errors="coerce").astype("float64")  # a nullable column's NA: NaN
    written = df["temperature"].notna() & (df["temperature"].astype(str).str.strip() != "")
    bad = (vals.isna() & written) | np.isinf(vals) | (vals < 0)
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise ValueError(f"{where}, row {row + 1} (task {df['task'].iloc[row]!r}): temperature must be a "
                         f"non-negative number or empty; got {_shown(df['temperature'].iloc[row])}")
    return vals


def _shown(v) -> str:
    """Return a cell's value for an error message: its repr, or "a missing value (empty or NaN)"."""
    v = _plain(v)
    return "a missing value (empty or NaN)" if v == "" else repr(v)


def check_same_counts(fits: dict, *, what: str) -> None:
    """Raise a ValueError naming the fits of ``fits`` (name -> InferenceData) not made on the first one's counts.

    ``what`` names the operation for the message ("stacking", "compare").  Fits of different counts have
    pointwise log-likelihoods over different tasks, which neither stacking nor LOO can set side by side.
    """
    from ..validate import check_fit

    names = list(fits)
    for name in names:
        check_fit(fits[name], what=f"{what} (fit {name!r})")
    if not names:
        return

    def key(idata):
        obs, const = idata.observed_data["c"], idata.constant_data["n"]
        return (tuple(map(str, obs.config.values)), tuple(map(str, obs.task.values)),
                obs.transpose("config", "task").values, const.transpose("config", "task").values)

    ref = key(fits[names[0]])
    for name in names[1:]:
        got = key(fits[name])  # the same configs and tasks make the arrays' shapes equal
        if got[:2] != ref[:2] or not (np.array_equal(got[2], ref[2]) and np.array_equal(got[3], ref[3])):
            shape = f"{len(got[0])} configs x {len(got[1])} tasks"
            raise ValueError(
                f"{what} needs fits of the same counts; {name!r} ({shape}) was not fitted on the counts of "
                f"{names[0]!r} ({len(ref[0])} configs x {len(ref[1])} tasks"
                + ("" if got[:2] != ref[:2] else ", the same configs and tasks but other n or c") + ")")
