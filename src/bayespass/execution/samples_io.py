"""Reading generated samples (evalplus format) into one normalised table."""

from __future__ import annotations

import hashlib
import math
import os
from pathlib import Path

import pandas as pd

__all__ = ["read_samples", "code_hash", "file_config", "sample_paths"]


def code_hash(code: str) -> str:
    """Hash of a program's exact text (identical programs execute once).

    Exact, not after removing comments and blank lines as before: a program can read its own line numbers
    (a frame's ``f_lineno``) or its text (the harness's frame holds it), so two texts that differ only there
    can behave differently, and one's verdicts went to the other. Programs that differ only in what cannot
    be observed share results as behavioural twins instead (``execution.twins``), which checks for that.
    """
    return hashlib.sha256(code.encode("utf-8", "surrogatepass")).hexdigest()[:20]


def _config_of(rec: dict, default: str) -> str:
    if "config" in rec:
        return str(rec["config"])
    if "model" in rec:
        from ..data.counts import config_label

        return config_label(rec["model"], rec.get("temperature"), rec.get("benchmark"))
    return default


def _given(v) -> bool:
    """Whether a record's field holds a value (not absent, None, or a table's NaN for a missing cell)."""
    return v is not None and not (isinstance(v, float) and v != v)


def _check_record(rec, where: str) -> None:
    """Raise a ValueError naming ``where`` and the field when ``rec`` is not a usable sample record."""
    if not isinstance(rec, dict) or "task_id" not in rec:
        raise ValueError(f"{where}: a sample record needs 'task_id'"
                         + (f"; found keys {sorted(rec)[:8]}" if isinstance(rec, dict) else
                            f"; got a {type(rec).__name__}, not a JSON object"))
    if not _given(rec.get("solution")) and not _given(rec.get("completion")):
        raise ValueError(f"{where} (task {rec['task_id']!r}): a sample record needs 'solution' or 'completion'")
    for key in ("solution", "completion"):
        if _given(rec.get(key)) and not isinstance(rec[key], str):
            raise ValueError(f"{where} (task {rec['task_id']!r}): {key!r} must be a string (the program's "
                             f"text); got {type(rec[key]).__name__} {str(rec[key])[:40]!r}")
    _check_unicode(rec, where)
    temp = rec.get("temperature")
    if "config" not in rec and "model" in rec and _given(temp) and not _temperature_ok(temp):
        raise ValueError(f"{where} (task {rec['task_id']!r}): 'temperature' must be a non-negative number "
                         f"(or absent); got {type(temp).__name__} {str(temp)[:40]!r}")


def _check_unicode(rec: dict, where: str) -> None:
    r"""Raise a ValueError naming the field when a text of ``rec`` is not valid Unicode.

    JSON can escape a lone surrogate (``"\udcff"``, which some decoders write for bytes that are not
    UTF-8); no UTF-8 file, table or compiler can hold it (CPython's ``compile`` refuses it), so the
    record is refused here, where its line is known, rather than deep inside the table's construction.
    """
    for key, value in rec.items():
        if not isinstance(value, str):
            continue
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as err:
            raise ValueError(f"{where} (task {rec['task_id']!r}): {key!r} is not valid Unicode text: it holds a "
                             f"lone surrogate {value[err.start]!r} at character {err.start} (a byte that was "
                             f"not UTF-8, escaped); Python cannot compile such a program. Decode the "
                             f"generations as UTF-8 with errors='replace' and write them again") from None


def _temperature_ok(v) -> bool:
    """Whether ``v`` reads as a finite non-negative number (a JSON number, or a string of one)."""
    if isinstance(v, bool):
        return False
    try:
        x = float(v)
    except (TypeError, ValueError):
        return False
    return math.isfinite(x) and x >= 0


def file_config(path) -> str:
    """Return the config a samples file or directory names its records that name none (its name, less .jsonl.gz)."""
    path = Path(os.fspath(path))
    return Path(path.name[:-3] if path.name.lower().endswith(".gz") else path.name).stem


def _are_paths(samples) -> bool:
    return (isinstance(samples, list | tuple) and len(samples) > 0
            and all(isinstance(p, str | os.PathLike) for p in samples))


def sample_paths(samples) -> list[Path] | None:
    """Return the samples files or directories named by a path or a list of paths; None for anything else."""
    if isinstance(samples, str | os.PathLike):
        return [Path(os.fspath(samples))]
    return [Path(os.fspath(p)) for p in samples] if _are_paths(samples) else None


def _read_many(paths: list[Path], config: str | None) -> pd.DataFrame:
    """Read several samples files or directories into one table, refusing a config two of them hold."""
    if len(paths) > 1 and config is not None:
        raise ValueError(f"config={config!r} would name the samples of {len(paths)} files one config; give one "
                         "file, or leave config out (each file is its own config)")
    if len(set(paths)) < len(paths):
        raise ValueError(f"samples name a file twice: {sorted(str(p) for p in paths if paths.count(p) > 1)[0]!r}")
    frames, owner = [], {}
    for path in paths:
        df = read_samples(path, config=config)
        for name in df["config"].unique():
            if name in owner:
                raise ValueError(f"samples {str(owner[name])!r} and {str(path)!r} both hold config {name!r}; "
                                 "rename a file (a file's records without 'config' or 'model' are named by it), or "
                                 "give its records a 'config' field")
            owner[name] = path
        frames.append(df)
    return pd.concat(frames, ignore_index=True)


def read_samples(samples, *, config: str | None = None) -> pd.DataFrame:
    """Return samples as a table with columns config, task, sample, solution/completion (+ extras).

    ``samples`` is a JSONL path (or a gzipped one, ``.jsonl.gz``), an evalplus samples directory
    (``DIR/<task_id with / as _>/<i>.py``), a list of dicts, or a DataFrame.
    Records need ``task_id`` and ``solution`` (a full program) or ``completion``
    (appended to the prompt); optional ``config`` or ``model``/``temperature``.
    Sample indices number the records of each (config, task) in order.

    A list of paths reads each (a file's records without ``config`` or ``model`` are the config named by the
    file, as one path's are); two files that hold the same config are refused, as merging them silently would
    count one config's samples twice or two models as one.
    """
    if _are_paths(samples):
        return _read_many(sample_paths(samples), config)
    default = config or "samples"
    wheres = None  # where each record came from, for errors (a file's line, or a program file)
    if isinstance(samples, pd.DataFrame):
        recs = samples.to_dict("records")
    elif isinstance(samples, list | tuple):
        recs = list(samples)
    else:
        wheres = []
        path = Path(os.fspath(samples))
        if not path.exists():
            raise FileNotFoundError(f"samples {str(path)!r} do not exist")
        default = config or file_config(path)
        recs = []
        if path.is_dir():
            for task_dir in sorted(p for p in path.iterdir() if p.is_dir()):
                for f in sorted(task_dir.glob("*.py"), key=lambda p: (len(p.stem), p.stem)):
                    try:
                        text = f.read_text(encoding="utf-8")
                    except UnicodeDecodeError as err:
                        raise ValueError(f"{f}: not UTF-8 text ({err.reason} at byte {err.start})") from err
                    recs.append({"task_id": task_dir.name.replace("_", "/", 1), "solution": text})
                    wheres.append(str(f))
        else:
            from ..data.io import _lines, json_line, open_binary

            with open_binary(path) as fh:
                for lineno, line in _lines(fh, str(path)):
                    if line.strip():
                        recs.append(json_line(line, lineno, str(path)))
                        wheres.append(f"{path}, line {lineno}")
    rows = []
    for i, rec in enumerate(recs):
        where = wheres[i] if wheres else f"sample record {i} (counting from 0)"
        _check_record(rec, where)
        names = {"config": _config_of(rec, default), "task_id": str(rec["task_id"])}
        for what, name in names.items():
            if not name.strip():
                raise ValueError(f"{where}: the sample's {what} is empty ({name!r}); give it a name (or leave "
                                 f"'config' out to name it by model and temperature, or by the file)")
        rows.append(dict(rec, config=names["config"], task=names["task_id"]))
    if not rows:
        raise ValueError("no samples found" + (f" in {str(samples)!r} (an empty file, or a directory without "
                                               f"<task>/<i>.py programs)" if wheres is not None else
                                               " (an empty list or table)"))
    df = pd.DataFrame(rows)
    df["sample"] = df.groupby(["config", "task"]).cumcount()
    return df
