"""Reading generated samples (evalplus format) into one normalised table."""

from __future__ import annotations

import hashlib
import math
import os
from pathlib import Path

import numpy as np
import pandas as pd

from ..data.names import file_config, file_model_temperature

__all__ = ["read_samples", "code_hash", "file_config", "file_model_temperature", "sample_paths"]


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


def _are_paths(samples) -> bool:
    return (isinstance(samples, list | tuple) and len(samples) > 0
            and all(isinstance(p, str | os.PathLike) for p in samples))


def sample_paths(samples) -> list[Path] | None:
    """Return the samples files or directories named by a path or a list of paths; None for anything else."""
    if isinstance(samples, str | os.PathLike):
        return [Path(os.fspath(samples))]
    return [Path(os.fspath(p)) for p in samples] if _are_paths(samples) else None


def _read_many(paths: list[Path], config: str | None, suite=None) -> pd.DataFrame:
    """Read several samples files or directories into one table, refusing a config two of them hold."""
    if len(paths) > 1 and config is not None:
        raise ValueError(f"config={config!r} would name the samples of {len(paths)} files one config; give one "
                         "file, or leave config out (each file is its own config)")
    if len(set(paths)) < len(paths):
        raise ValueError(f"samples name a file twice: {sorted(str(p) for p in paths if paths.count(p) > 1)[0]!r}")
    frames, owner = [], {}
    for path in paths:
        df = read_samples(path, config=config, suite=suite)
        for name in df["config"].unique():
            if name in owner:
                raise ValueError(f"samples {str(owner[name])!r} and {str(path)!r} both hold config {name!r}; "
                                 "rename a file (a file's records without 'config' or 'model' are named by it), or "
                                 "give its records a 'config' field")
            owner[name] = path
        frames.append(df)
    return pd.concat(frames, ignore_index=True)


def read_samples(samples, *, config: str | None = None, suite=None) -> pd.DataFrame:
    """Return samples as a table with columns config, task, sample, solution/completion (+ extras).

    ``samples`` is a JSONL path (or a gzipped one, ``.jsonl.gz``), a ``.json`` file holding a list of such
    records, a table with a row per sample and those fields as columns (Parquet ``.parquet``/``.pq``, as the
    Hugging Face Hub keeps generations, or CSV), a bigcode-evaluation-harness generations file
    (``generations_<task>.json``: one list of full programs per task, in the suite's order; it needs
    ``suite``), lm-evaluation-harness's ``--log_samples`` JSONL (``samples_humaneval_<date>.jsonl``: each
    task's ``doc`` and its ``filtered_resps``), an evalplus samples directory
    (``DIR/<task_id with / as _>/<i>.py``), a list of dicts, or a DataFrame.
    Records need ``task_id`` and ``solution`` (a full program) or ``completion``
    (appended to the prompt); optional ``config`` or ``model``/``temperature``.
    Sample indices number the records of each (config, task) in order. Records of a file that name no config,
    model or temperature are the config named by the file, and where that name ends in a temperature as
    evalplus's codegen writes it (``<model>_<backend>_temp_<T>``, see ``file_model_temperature``) they get its
    ``model`` and ``temperature`` (so one model's files at several temperatures are siblings to ``compare``).

    A list of paths reads each (a file's records without ``config`` or ``model`` are the config named by the
    file, as one path's are); two files that hold the same config are refused, as merging them silently would
    count one config's samples twice or two models as one.
    """
    if _are_paths(samples):
        return _read_many(sample_paths(samples), config, suite)
    default = config or "samples"
    named = None  # model and temperature from the file's name, for records that name no config
    wheres = None  # where each record came from, for errors (a file's line, or a program file)
    if isinstance(samples, pd.DataFrame):
        recs = samples.to_dict("records")
    elif isinstance(samples, list | tuple):
        recs = list(samples)
    else:
        path = Path(os.fspath(samples))
        if not path.exists():
            raise FileNotFoundError(f"samples {str(path)!r} do not exist")
        default = config or file_config(path)
        named = None if config else file_model_temperature(default)
        recs, wheres = _read_path(path, suite)
    recs, wheres = _lm_eval(recs, wheres, "samples" if wheres is None else str(samples))
    rows = []
    for i, rec in enumerate(recs):
        where = wheres[i] if wheres else f"sample record {i} (counting from 0)"
        _check_record(rec, where)
        names = {"config": _config_of(rec, default), "task_id": str(rec["task_id"])}
        for what, name in names.items():
            if not name.strip():
                raise ValueError(f"{where}: the sample's {what} is empty ({name!r}); give it a name (or leave "
                                 f"'config' out to name it by model and temperature, or by the file)")
        row = dict(rec, config=names["config"], task=names["task_id"])
        if named and not any(key in rec for key in ("config", "model", "temperature")):
            row["model"], row["temperature"] = named
        rows.append(row)
    if not rows:
        raise ValueError("no samples found" + (f" in {str(samples)!r} (an empty file, or a directory without "
                                               f"<task>/<i>.py programs)" if wheres is not None else
                                               " (an empty list or table)"))
    df = _drop_repeated_draws(pd.DataFrame(rows), "samples" if wheres is None else str(samples))
    df["sample"] = df.groupby(["config", "task"]).cumcount()
    return df


def _drop_repeated_draws(df: pd.DataFrame, src: str) -> pd.DataFrame:
    """Count once each draw that records name twice: the same config, task, ``seed`` and ``sample`` index.

    bayespass's coders (and others) write a task's i-th sample with the run's seed, which fixes the draw: a file
    concatenated with itself, or with a second generation of the same seed (run again for more samples),
    repeats draws, and counted twice they would pass as independent samples (n doubled, bands too narrow).
    """
    if not {"seed", "sample"} <= set(df.columns):
        return df
    key = df[["config", "task", "seed", "sample"]]
    named = key.notna().all(axis=1)
    repeated = named & key.astype(str).duplicated()
    if not repeated.any():
        return df
    import warnings

    first = df[repeated].iloc[0]
    warnings.warn(f"{src}: {int(repeated.sum())} of {len(df)} records repeat the draw of an earlier record (the "
                  f"same config, task, seed and sample index, e.g. {first['config']!r}, {first['task']!r}, seed "
                  f"{first['seed']}, sample {first['sample']}: a file concatenated with itself, or generated "
                  "twice with one seed); each draw is counted once. Different draws need different seeds.",
                  UserWarning, stacklevel=3)
    return df[~repeated].reset_index(drop=True)


def _read_path(path: Path, suite) -> tuple[list, list[str]]:
    """Return the records of a samples file or directory and where each came from."""
    recs, wheres = [], []
    if path.is_dir():
        for task_dir in sorted(p for p in path.iterdir() if p.is_dir()):
            for f in sorted(task_dir.glob("*.py"), key=lambda p: (len(p.stem), p.stem)):
                try:
                    text = f.read_text(encoding="utf-8")
                except UnicodeDecodeError as err:
                    raise ValueError(f"{f}: not UTF-8 text ({err.reason} at byte {err.start})") from err
                recs.append({"task_id": task_dir.name.replace("_", "/", 1), "solution": text})
                wheres.append(str(f))
        return recs, wheres
    if path.name.lower().endswith(TABLE_SUFFIXES):
        return _table_samples(path)
    if _is_json(path):
        return _json_samples(path, suite)
    from ..data.io import _lines, json_line, open_binary

    with open_binary(path) as fh:
        for lineno, line in _lines(fh, str(path)):
            if line.strip():
                recs.append(json_line(line, lineno, str(path)))
                wheres.append(f"{path}, line {lineno}")
    return recs, wheres


TABLE_SUFFIXES = (".parquet", ".pq", ".csv", ".csv.gz")


def _table_samples(path: Path) -> tuple[list, list[str]]:
    """Return the records of a table of samples (Parquet or CSV: a row per sample, a column per field).

    The Hugging Face Hub keeps generations as Parquet, sometimes a row per task whose ``solution`` or
    ``completion`` is the list of its programs (a record per program here). A CSV's program texts stay as
    written (a cell reading ``NA`` or ``None`` is a program, not a missing value); an empty cell is a missing
    field.
    """
    from ..data.io import _read_parquet

    if path.name.lower().endswith((".parquet", ".pq")):
        df = _read_parquet(path)
    else:
        try:
            df = pd.read_csv(path, keep_default_na=False, na_values=[""],
                             dtype={"task_id": str, "solution": str, "completion": str, "config": str})
        except (UnicodeDecodeError, ValueError, pd.errors.ParserError) as err:
            raise ValueError(f"{path}: not a readable CSV table of samples ({err})") from None
    if "task_id" not in df.columns:
        counts = "; these look like counts (n, c), which 'bayespass fit' and 'estimate' read as they are"
        raise ValueError(f"{path}: a table of samples needs a column 'task_id' (and 'solution' or 'completion'); "
                         f"its columns are {list(df.columns)[:10]}" + (counts if {"n", "c"} <= set(df.columns) else ""))
    df = df.reset_index(drop=True)
    for col in ("solution", "completion"):  # a row per task with a list of its programs: a record per program
        if col in df.columns and df[col].map(lambda v: isinstance(v, list | tuple | np.ndarray)).any():
            df = df.explode(col)
    rows = df.astype(object).where(df.notna(), None).to_dict("records")
    recs = [{key: v for key, v in row.items() if v is not None} for row in rows]
    return recs, [f"{path}, row {i + 1}" for i in df.index]


def _is_lm_eval(rec) -> bool:
    return isinstance(rec, dict) and "task_id" not in rec and "filtered_resps" in rec and isinstance(rec.get("doc"),
                                                                                                       dict)


def _flat(v):
    """Yield the strings of a nested list (lm-evaluation-harness logs a doc's programs as [[p1, ..., pR]])."""
    for x in v if isinstance(v, list) else [v]:
        yield from _flat(x) if isinstance(x, list) else [x]


def _lm_eval(recs: list, wheres: list[str] | None, src: str) -> tuple[list, list[str] | None]:
    """Expand lm-evaluation-harness ``--log_samples`` records into one record per program.

    Such a record holds a task's ``doc`` (with its ``task_id``) and its ``filtered_resps``: the programs
    after the task's filter (for HumanEval, the prompt plus the completion). An integer ``task_id`` is the
    original MBPP's (``11`` is MBPP+'s ``Mbpp/11``). Other records are returned as they are.
    """
    if not recs or not all(_is_lm_eval(r) for r in recs):
        return recs, wheres
    wheres = wheres or [f"sample record {i} (counting from 0)" for i in range(len(recs))]
    filters = sorted({str(r.get("filter", "")) for r in recs})
    if len(filters) > 1:
        raise ValueError(f"{src}: lm-evaluation-harness samples of {len(filters)} filters "
                         f"{filters}: each task's programs would count once per filter; keep one filter's records")
    out, where_out = [], []
    for rec, where in zip(recs, wheres, strict=True):
        tid = rec["doc"].get("task_id")
        if tid is None or isinstance(tid, bool):
            raise ValueError(f"{where}: an lm-evaluation-harness sample whose doc has no task_id (its keys: "
                             f"{sorted(rec['doc'])[:8]})")
        programs = list(_flat(rec["filtered_resps"]))
        bad = next((p for p in programs if not isinstance(p, str)), None)
        if bad is not None:
            raise ValueError(f"{where} (task {tid!r}): filtered_resps must hold programs (strings); got "
                             f"{type(bad).__name__} {repr(bad)[:40]}")
        task = f"Mbpp/{tid}" if isinstance(tid, int) else str(tid)
        out += [{"task_id": task, "solution": p} for p in programs]
        where_out += [f"{where}, program {j}" for j in range(len(programs))]
    return out, where_out


def _is_json(path: Path) -> bool:
    """Whether a samples file is one JSON document (``.json``, ``.json.gz``), not JSON lines."""
    name = path.name.lower()
    return name.endswith(".json") or name.endswith(".json.gz")


def _json_samples(path: Path, suite) -> tuple[list, list[str]]:
    """Return the records of a ``.json`` samples file and where each came from.

    A list of records (objects with ``task_id``) is read as JSONL's; a list of lists of programs is a
    bigcode-evaluation-harness generations file, whose i-th list is the suite's i-th task.
    """
    from ..data.io import read_json_document

    src = str(path)
    doc = read_json_document(path)
    if isinstance(doc, dict):
        what = ("an evalplus eval_results.json: verdicts, not programs; its counts are read by 'bayespass "
                "estimate', 'bayespass fit' and bp.read_counts" if "eval" in doc else
                f"a JSON object (keys {sorted(doc)[:5]}), not samples")
        raise ValueError(f"{src}: {what}; samples are a list of records with task_id and solution or completion, "
                         "JSON lines of them, or a bigcode-evaluation-harness generations file (a list of lists "
                         "of programs)")
    if not isinstance(doc, list):
        raise ValueError(f"{src}: expected a list of sample records or of lists of programs; got "
                         f"{type(doc).__name__}")
    if doc and all(isinstance(d, list) or d is None for d in doc):
        return _positional(doc, suite, src)
    return doc, [f"{src}, record {i} (counting from 0)" for i in range(len(doc))]


def _positional(doc: list, suite, src: str) -> tuple[list, list[str]]:
    """Return the records of a bigcode-evaluation-harness generations file: list i holds task i's programs.

    The harness stores no task ids, so the tasks are the suite's, in its order (the first ``len(doc)`` of
    them: its ``--limit``). A file that is not in that order (``--limit_start``, another release of the
    dataset) is refused where most tasks' programs do not name the task's function.
    """
    if suite is None:
        raise ValueError(f"{src} is a bigcode-evaluation-harness generations file (a list of lists of programs): it "
                         "lists tasks by position, not by task_id, so it is read with its suite: "
                         "read_samples(path, suite=bp.load_suite(...)), bp.execute(path, suite), "
                         "ReplayCoder(path, suite=...), or 'bayespass execute PATH --suite ...'")
    tasks = list(suite.tasks.values())
    if len(doc) > len(tasks):
        raise ValueError(f"{src}: a bigcode-evaluation-harness generations file lists tasks by position; it holds "
                         f"{len(doc)} tasks and suite {suite.name!r} {len(tasks)}, so they cannot be the suite's "
                         "(bigcode's 'mbpp' task is the original MBPP's 500 test tasks; its 'mbppplus' may follow "
                         "an MBPP+ release of 399): pass the dataset file they were generated from (--dataset), or "
                         "write them as JSON lines with task_id")
    recs, wheres, named, given = [], [], 0, 0
    for i, (task, programs) in enumerate(zip(tasks, doc, strict=False)):
        if programs is None:  # the harness's intermediate file: a task not generated yet
            continue
        bad = next((g for g in programs if not isinstance(g, str)), None)  # a list: _json_samples checked
        if bad is not None:
            raise ValueError(f"{src}, task {i} (counting from 0): a program must be a string; got "
                             f"{type(bad).__name__} {repr(bad)[:40]}")
        given += bool(programs)
        named += any(task.entry_point in g for g in programs)
        recs += [{"task_id": task.task_id, "solution": g} for g in programs]
        wheres += [f"{src}, task {i}, program {j}" for j in range(len(programs))]
    if named < given / 2:
        raise ValueError(f"{src}: list i of a bigcode-evaluation-harness generations file is task i of the suite, "
                         f"but the programs of only {named} of its {given} tasks name their task's function in "
                         f"suite {suite.name!r} (e.g. {tasks[0].entry_point!r} for list 0); were they generated "
                         "with --limit_start, or from another release of the dataset? Write them as JSON lines with "
                         "task_id, or pass the dataset file they came from (--dataset)")
    if len(doc) < len(tasks):
        import warnings

        warnings.warn(f"{src}: {len(doc)} lists of programs by position: the first {len(doc)} of suite "
                      f"{suite.name!r}'s {len(tasks)} tasks (bigcode's --limit)", UserWarning, stacklevel=4)
    return recs, wheres
