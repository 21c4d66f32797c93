"""Readers and writers for counts datasets.

``read_counts(path)`` detects the format from the suffix and content:

* ``.csv`` / ``.tsv``: columns ``task,n,c`` (+ optional ``config,model,temperature,benchmark``);
* ``.jsonl``: one JSON object per line with the same keys;
* ``.json``: evalplus ``eval_results.json`` (per-sample base/plus status);
* ``.nc``: a counts dataset written by :func:`write_counts`, or a samples
  dataset from ``bayespass.execute`` (reduced with ``to_counts``).

The three text formats may be gzip-compressed (``.csv.gz``, ``.jsonl.gz``, ``eval_results.json.gz``).
"""

from __future__ import annotations

import io
import json
import os
import sys
from contextlib import contextmanager, suppress
from pathlib import Path

import pandas as pd
import xarray as xr

from ..validate import check_choice
from .counts import counts_from_frame, counts_from_samples, validate_counts
from .names import evalplus_results_name, file_model_temperature

__all__ = ["read_counts", "write_counts", "atomic_netcdf", "write_atomic", "read_fit", "read_netcdf",
           "counts_from_evalplus",
           "samples_to_counts"]

_FORMATS = ("csv", "jsonl", "evalplus", "netcdf", "parquet")


def _detect(path: Path) -> str:
    suffixes = [s.lower() for s in path.suffixes]
    if ".csv" in suffixes or ".tsv" in suffixes:
        return "csv"
    if ".jsonl" in suffixes:
        return "jsonl"
    if ".json" in suffixes:
        return "evalplus"
    if ".nc" in suffixes or ".netcdf" in suffixes:
        return "netcdf"
    if ".parquet" in suffixes or ".pq" in suffixes:
        return "parquet"
    raise ValueError(f"cannot tell the format of {str(path)!r} from its suffix; use one of "
                     f".csv, .tsv, .jsonl, .json (evalplus eval_results), .nc, .parquet, or pass format= "
                     f"one of {sorted(_FORMATS)}")


def read_counts(path: str | os.PathLike, *, format: str | None = None,
                correctness: str = "plus", model: str | None = None,
                temperature: float | None = None, benchmark: str | None = None) -> xr.Dataset:
    """Read a counts dataset from CSV, JSONL, Parquet, evalplus ``eval_results.json`` or netCDF.

    Parameters
    ----------
    path : path-like
        The file to read, or a run directory of ``execute`` or ``run`` (its counts.nc; samples.nc
        for ``correctness="base"``).  A fit (.nc of ``bayespass fit``) gives the counts it was made on.
    format : {"csv", "jsonl", "parquet", "evalplus", "netcdf"}, optional
        Overrides detection from the suffix.
    correctness : {"base", "plus"}
        For evalplus results: a sample is correct when its base tests pass
        (``"base"``) or when base and plus tests both pass (``"plus"``).
    model, temperature, benchmark : optional
        Config coordinates for evalplus results (which do not record them).

    Returns
    -------
    xarray.Dataset
        A validated counts dataset.

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ValueError
        On a malformed file; the message names the file, line and problem.
    """
    path = Path(path)
    check_choice(correctness, ("base", "plus"), name="correctness")
    if not path.exists():
        raise FileNotFoundError(f"counts file {str(path)!r} does not exist")
    if path.is_dir():
        return _read_run_counts(path, correctness)
    fmt = _detect(path) if format is None else check_choice(format, _FORMATS, name="format")
    src = str(path)
    if fmt == "csv":
        return counts_from_frame(_read_csv(path), source=src, where=src)
    if fmt == "jsonl":
        rows = []
        with open_binary(path) as fh:
            for lineno, line in _lines(fh, src):
                if not line.strip():
                    continue
                rec = json_line(line, lineno, src)
                if not isinstance(rec, dict):
                    raise ValueError(f"{src}, line {lineno}: expected a JSON object, got {type(rec).__name__}")
                rows.append(rec)
        return counts_from_frame(pd.DataFrame(rows), source=src, where=src)
    if fmt == "parquet":
        return counts_from_frame(_read_parquet(path), source=src, where=src)
    if fmt == "evalplus":
        return counts_from_evalplus(path, correctness=correctness, model=model,
                                    temperature=temperature, benchmark=benchmark)
    try:
        ds = xr.load_dataset(path)
    except (OSError, ValueError) as err:
        raise ValueError(f"{src}: not a readable netCDF file ({err})") from err
    if "correct" in ds and "exists" in ds:  # an executed samples dataset (bayespass.execute)
        return samples_to_counts(ds, correctness)
    if not ds.data_vars and (fitted := _fit_counts(path)) is not None:  # a fit (InferenceData): its counts
        return fitted
    return validate_counts(ds)


def _read_csv(path: Path) -> pd.DataFrame:
    """Read a CSV (TSV for .tsv) table.

    One written with ';' between fields (and ',' in numbers, as a spreadsheet in many locales saves it) is read
    as such.
    """
    sep = "\t" if path.suffix.lower() == ".tsv" else ","
    try:
        df = pd.read_csv(path, sep=sep, comment="#", engine="c", low_memory=False)
        if sep == "," and len(df.columns) == 1 and ";" in str(df.columns[0]):
            df = pd.read_csv(path, sep=";", decimal=",", comment="#", engine="c", low_memory=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as err:
        raise ValueError(f"{path}: not a readable CSV counts table ({err})") from err
    return df


def _read_parquet(path: Path) -> pd.DataFrame:
    """Read a Parquet table (pyarrow), its errors named by the file."""
    try:
        return pd.read_parquet(path)
    except ImportError as err:  # pyarrow comes with evalplus (through datasets); a bare environment may lack it
        raise ValueError(f"{str(path)!r}: reading Parquet needs pyarrow ({err}); pip install pyarrow") from err
    except (OSError, ValueError) as err:
        raise ValueError(f"{str(path)!r}: not a readable Parquet table ({err})") from err


def _fit_counts(path: Path) -> xr.Dataset | None:
    """Return the counts a fit file (an InferenceData netCDF of ``bayespass fit``) was made on; None if not a fit."""
    from types import SimpleNamespace

    from .counts import counts_of_fit

    try:
        groups = {g: xr.load_dataset(path, group=g) for g in ("observed_data", "constant_data")}
        return counts_of_fit(SimpleNamespace(**groups))
    except (OSError, KeyError, ValueError):
        return None


def _read_run_counts(path: Path, correctness: str) -> xr.Dataset:
    """Read the counts of a run directory (from ``execute`` or ``run``): counts.nc, or samples.nc for base."""
    counts, samples = path / "counts.nc", path / "samples.nc"
    if counts.exists() and (correctness == "plus" or not samples.exists()):
        ds = read_counts(counts)
        done = ds.attrs.get("correctness", "plus")
        if done != correctness:
            raise ValueError(f"correctness={correctness!r}: {str(counts)!r} counts {done!r} correctness and the "
                             "run has no samples.nc to count it again")
        return ds
    if samples.exists():
        with xr.open_dataset(samples) as ds:
            return samples_to_counts(ds[["exists", "correct", "base_correct"]].load(), correctness)
    raise ValueError(f"counts path {str(path)!r} is a directory, not a file, and holds no counts.nc or "
                     "samples.nc (a run directory of 'bayespass execute' or 'bayespass run')")


def samples_to_counts(ds: xr.Dataset, correctness: str = "plus", passed: str | None = None) -> xr.Dataset:
    """Reduce an executed samples dataset to counts: ``n`` samples and ``c`` correct per config x task.

    ``correctness="plus"``: all tests pass; ``"base"``: all base tests pass.  A DataFrame of one row per
    sample, or a boolean array over (config,) task x sample, is counted by
    :func:`bayespass.data.counts.counts_from_samples` (``passed`` names its pass column).
    """
    check_choice(correctness, ("base", "plus"), name="correctness")
    from .counts import make_counts

    if isinstance(ds, pd.DataFrame | xr.DataArray):
        return counts_from_samples(ds, passed=passed)

    var = "correct" if correctness == "plus" else "base_correct"
    if not isinstance(ds, xr.Dataset) or not {"exists", var} <= set(ds.data_vars):
        hint = ("; these are counts already (n, c per config x task)"
                if isinstance(ds, xr.Dataset) and {"n", "c"} <= set(ds.data_vars) else "")
        raise TypeError(f"to_counts needs executed samples (an xarray.Dataset with 'exists' and {var!r} over config x "
                        f"task x sample, from bp.execute), a DataFrame of one row per sample (task and a pass "
                        f"column) or a boolean array over (config,) task x sample; got {type(ds).__name__}{hint}")
    cfg = ds.config.values
    return make_counts(ds["exists"].sum("sample").values, ds[var].sum("sample").values, task=ds.task.values,
                       config=cfg, model=ds["model"].values if "model" in ds.coords else cfg,
                       temperature=ds["temperature"].values if "temperature" in ds.coords else None,
                       benchmark=ds.attrs.get("suite", ""), source="execute",
                       attrs={"correctness": correctness})


@contextmanager
def open_binary(path):
    """Open a file for reading bytes; a gzip file (``.jsonl.gz``, as evalplus ships its data) is decompressed.

    Told by its first two bytes, not its name.
    """
    with open(path, "rb") as fh:
        if fh.peek(2)[:2] == b"\x1f\x8b":
            import gzip

            with gzip.GzipFile(fileobj=fh, mode="rb") as gz:
                yield gz
        else:
            yield fh


def _lines(fh, src: str):
    """Yield numbered text lines of a file opened in binary mode (a non-UTF-8 line is an error naming it).

    A damaged or cut gzip stream is an error naming the file and the last line read.
    """
    lineno = 0
    try:
        for lineno, raw in enumerate(fh, 1):
            try:
                yield lineno, raw.decode("utf-8-sig" if lineno == 1 else "utf-8")  # a BOM (Windows editors) goes
            except UnicodeDecodeError as err:
                raise ValueError(f"{src}, line {lineno}: not UTF-8 text ({err.reason} at byte {err.start}); "
                                 "is this a binary file?") from err
    except (EOFError, OSError) as err:  # gzip.BadGzipFile is an OSError; a cut stream, EOFError
        raise ValueError(f"{src}: a damaged or incomplete gzip file after line {lineno} ({err})") from err


def json_line(line: str, lineno: int, src: str):
    """Parse one line of a JSONL file; invalid JSON is an error naming the file and line.

    A last line without its newline that does not parse was most likely cut short by an interrupted write;
    the error says so, and how to go on.
    """
    try:
        return json.loads(line)
    except json.JSONDecodeError as err:
        cut = "" if line.endswith("\n") else (
            "; it is the file's last line and has no newline at its end: its writing was most likely cut short "
            "(an interrupted run); remove that line to use the records before it")
        raise ValueError(f"{src}, line {lineno}: invalid JSON ({err.msg}){cut}") from err


def _sample_ok(rec: dict, correctness: str, where: str) -> bool:
    if "base_status" in rec:
        base, plus = rec["base_status"], rec.get("plus_status")
    elif "base" in rec:  # older evalplus layout: {"base": [status, details], ...}
        base = rec["base"][0] if isinstance(rec["base"], list) else rec["base"]
        plus = rec["plus"][0] if isinstance(rec.get("plus"), list) else rec.get("plus")
    else:
        raise ValueError(f"{where}: sample record has no 'base_status'; keys {sorted(rec)}")
    if correctness == "base":
        return base == "pass"
    if plus is None:
        raise ValueError(f"{where}: correctness='plus' but the record has no plus status; "
                         "use correctness='base'")
    return base == "pass" and plus == "pass"


def read_json_document(path) -> object:
    """Return a JSON file's one document (gzipped too; a UTF-8 byte order mark is read past).

    Invalid JSON, text that is not UTF-8 and a damaged gzip stream are errors naming the file.
    """
    src = str(path)
    try:
        with open_binary(path) as fh:
            return json.loads(fh.read().decode("utf-8-sig"))
    except json.JSONDecodeError as err:
        raise ValueError(f"{src}, line {err.lineno}: invalid JSON ({err.msg})") from err
    except UnicodeDecodeError as err:
        raise ValueError(f"{src}: not UTF-8 text ({err.reason} at byte {err.start})") from err
    except (EOFError, OSError) as err:  # gzip.BadGzipFile is an OSError; a cut stream, EOFError
        raise ValueError(f"{src}: a damaged or incomplete gzip file ({err})") from err


def counts_from_evalplus(path: str | os.PathLike, *, correctness: str = "plus",
                         model: str | None = None, temperature: float | None = None,
                         benchmark: str | None = None) -> xr.Dataset:
    """Reduce an evalplus ``eval_results.json`` to counts (one config).

    Without ``model`` and ``temperature`` the config is named by the results' samples (``evalplus_results_name``:
    ``Qwen--Qwen2.5-Coder-7B-Instruct_vllm_temp_0.8`` for evalplus's ``..._temp_0.8.eval_results.json``), and where
    that name ends in a temperature as evalplus's codegen writes it, its model and temperature are read from it.
    """
    check_choice(correctness, ("base", "plus"), name="correctness")
    src = str(path)
    doc = read_json_document(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("eval"), dict):
        raise ValueError(f"{src}: not an evalplus eval_results.json (no 'eval' mapping of task_id "
                         "to sample results)")
    rows = []
    for task_id, samples in doc["eval"].items():
        if not isinstance(samples, list):
            raise ValueError(f"{src}: task {task_id!r} must map to a list of sample results")
        oks = [_sample_ok(s, correctness, f"{src}, task {task_id!r}") for s in samples]
        rows.append({"task": task_id, "n": len(oks), "c": sum(oks)})
    df = pd.DataFrame(rows)
    if model is None and temperature is None:
        df["config"] = name = evalplus_results_name(path)
        df["model"], df["temperature"] = file_model_temperature(name) or (name, float("nan"))
    else:
        df["model"] = model or evalplus_results_name(path)
    if temperature is not None:
        df["temperature"] = temperature
    if benchmark is not None:
        df["benchmark"] = benchmark
    return counts_from_frame(df, source=src, where=src,
                             attrs={"correctness": correctness, "evalplus_hash": str(doc.get("hash", ""))})


def write_atomic(path: str | os.PathLike, write) -> None:
    """Call ``write(tmp)`` on a temporary path beside ``path``, then rename it to ``path``.

    An interrupted write leaves the previous file (or none), never half of one.
    A write that fails (a full disk, Ctrl-C) removes its temporary file too.
    """
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException as err:
        with suppress(OSError):
            tmp.unlink(missing_ok=True)
        if isinstance(err, OSError) and err.errno and not err.filename:  # a failed write() names no file
            raise OSError(err.errno, err.strerror, str(path)) from err
        raise


def read_fit(path: str | os.PathLike):  # noqa: ANN201 - an arviz.InferenceData (imported lazily)
    """Read a fit (InferenceData netCDF) whole; a damaged file is a ValueError naming it.

    A missing file stays a ``FileNotFoundError``.
    """
    import arviz as az

    try:
        return az.from_netcdf(str(path)).load()
    except FileNotFoundError:
        raise
    except (OSError, ValueError) as err:
        raise ValueError(f"{str(path)!r} is not a readable fit: {first_line(err)} (a damaged or truncated copy? "
                         "fit it again, or run the same 'bayespass run' again, which redoes that fit)") from err


def read_netcdf(path: str | os.PathLike) -> xr.Dataset:
    """Read a netCDF-4 dataset whole; a damaged file is a ValueError naming it (a missing one stays missing)."""
    try:
        return xr.open_dataset(path, engine="h5netcdf").load()
    except FileNotFoundError:
        raise
    except (OSError, ValueError) as err:
        raise ValueError(f"{str(path)!r} is not a readable netCDF file: {first_line(err)} (a damaged or "
                         "truncated copy? the command that wrote it writes it again)") from err


def first_line(err: BaseException) -> str:
    """Return the first line of an error's message (HDF5's run on), at most 200 characters; else its type."""
    text = str(err).strip()
    return text.splitlines()[0][:200] if text else type(err).__name__


@contextmanager
def _local_scheduler():
    """Keep xarray from taking a Dask-distributed lock named by the in-memory file it writes.

    With a ``dask.distributed.Client`` open (``bp.execute(..., client=)``), xarray guards every netCDF write
    with a cluster-wide lock keyed by its target, which an in-memory file cannot name ("Semaphore or Lock
    <BytesIO> not known"). The write is local and in memory: no lock across processes is needed.
    """
    if "dask" not in sys.modules:  # no client without dask imported: xarray takes a thread lock
        yield
        return
    import dask

    with dask.config.set(scheduler="synchronous"):
        yield


def _netcdf_bytes(obj, idata: bool) -> memoryview:  # noqa: ANN001 - an xarray Dataset or an ArviZ InferenceData
    """Encode a Dataset or (``idata``) an InferenceData as the bytes of a netCDF-4 file, in memory.

    An InferenceData as ``InferenceData.to_netcdf`` writes it: the object's attrs at the root, then each group,
    its numeric variables zlib-compressed.
    """
    buf, mode = io.BytesIO(), "w"
    if not idata:
        obj.to_netcdf(buf, engine="h5netcdf")
        return buf.getbuffer()
    if obj.attrs:
        xr.Dataset(attrs=obj.attrs).to_netcdf(buf, mode=mode, engine="h5netcdf")
        mode = "a"
    for group in obj.groups():
        data = obj[group]
        encoding = {name: {"zlib": True} for name, var in data.variables.items() if var.dtype.kind in "biufcS"}
        data.to_netcdf(buf, mode=mode, group=group, engine="h5netcdf", encoding=encoding)
        mode = "a"
    if mode == "w":  # no groups and no attrs: an empty file, as ArviZ writes one
        xr.Dataset().to_netcdf(buf, engine="h5netcdf")
    return buf.getbuffer()


def atomic_netcdf(obj, path: str | os.PathLike) -> None:  # noqa: ANN001 - a Dataset or an InferenceData
    """Write a Dataset or InferenceData to netCDF through a temporary file (never half-written).

    The file is encoded in memory first and written with plain file I/O: HDF5 writing straight to a disk
    that fills up leaves a file it cannot close, and the interpreter then crashes at exit (a segfault,
    h5py 3.x; also through a Python file object); a full disk is now an ``OSError`` (errno ENOSPC) like any
    other write's. An object larger than ``IN_MEMORY_MAX`` bytes is written by HDF5 directly, as before.
    """
    idata = hasattr(obj, "groups") and not hasattr(obj, "data_vars")
    size = sum(obj[g].nbytes for g in obj.groups()) if idata else obj.nbytes
    if size > IN_MEMORY_MAX:  # not twice in memory: written by HDF5 as before (a full disk may then crash it)
        write_atomic(path, lambda tmp: obj.to_netcdf(str(tmp)) if idata else obj.to_netcdf(tmp, engine="h5netcdf"))
        return
    with _local_scheduler():
        data = _netcdf_bytes(obj, idata)
    write_atomic(path, lambda tmp: Path(tmp).write_bytes(data))


#: the largest object (bytes of its values) :func:`atomic_netcdf` encodes in memory before writing; a fit is a few
#: MB, a run's samples.nc 82 MB for 34 real configs x 25 MBPP+ tasks x 50 samples (1.5 GB for all 378 tasks)
IN_MEMORY_MAX = 2 << 30


def write_counts(ds: xr.Dataset, path: str | os.PathLike) -> Path:
    """Write a counts dataset to ``.nc`` (netCDF) or ``.csv`` (long format; n = 0 rows dropped).

    Written through a temporary file: an interrupted write leaves the previous file (or none), never half of one.
    """
    ds = validate_counts(ds)
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix in (".nc", ".netcdf"):
        atomic_netcdf(ds, path)
    elif suffix == ".csv":
        df = ds[["n", "c"]].to_dataframe().reset_index()
        df = df[df["n"] > 0][["config", "model", "temperature", "benchmark", "task", "n", "c"]]
        write_atomic(path, lambda tmp: df.to_csv(tmp, index=False))
    else:
        raise ValueError(f"path {str(path)!r}: write_counts supports '.nc' and '.csv' suffixes")
    return path
