"""Judging in the trusted supervisor: compare decoded return values, digest behaviour.

Values arrive as tagged JSON (see ``child.encode``) and are decoded to exact
built-in types, so no user-defined ``__eq__`` can run here.

The rule, next to evalplus's: a test passes when the output equals the
expected value under Python's ``==`` (so ``1 == 1.0`` and sets/dicts in any
order, as in evalplus).  Otherwise, when the task has a float tolerance (its
``atol``, or 1e-6 when the expected value is a float or a list/tuple of
floats), and the expected value is a real number or a nested list/tuple of
real numbers, the output passes when it has the expected value's own type
(as evalplus's ``type(out) == type(exp)``: an ``int`` is not close to an
expected ``float``, however near; ``square_Sum``'s exact integers fail
MBPP+'s float answers there), *exactly the same structure* (same container
types and lengths at every level, real-number leaves) and every leaf is
within ``atol + 1e-7 |expected|``.  evalplus instead calls
``np.testing.assert_allclose(out, exp)``, which broadcasts (``[[1.0], [1.0]]``
passes for ``[1.0, 1.0]``) and converts strings (``["1.0"]`` passes for
``[1.0]``); here both fail.  evalplus's special oracles for a few
HumanEval/MBPP tasks are kept.

A value too large to send (over ``Limits.max_value_bytes`` encoded) arrives
as its canonical digest (:class:`~bayespass.execution.child.Hashed`); it is
judged by exact equality of digests (Python ``==`` semantics for numbers,
sets and dicts in any order; no float tolerance), hashing the other side
when only one side is a digest.
"""

from __future__ import annotations

import hashlib
import json
import math

from ..data.suites import SET_EQ
from .child import Hashed, canonical_digest, decode

__all__ = ["VERDICTS", "CODES", "judge", "judge_value", "digest", "value_digest", "equal"]

#: int8 verdict codes stored in the samples dataset
VERDICTS = {"absent": -1, "not_run": 0, "pass": 1, "fail": 2, "error": 3, "timeout": 4,
            "crash": 5, "oversize": 6}
CODES = {v: k for k, v in VERDICTS.items()}


def _is_floats(x) -> bool:
    if type(x) is float:
        return True
    return isinstance(x, list | tuple) and len(x) > 0 and all(type(i) is float for i in x)


def _real(x) -> bool:
    return type(x) in (int, float, bool)


def _close(out, exp, atol: float, depth: int = 0) -> bool:
    """Equality with float tolerance between real numbers of matching structure.

    ``exp`` is a real number or a (nested) list/tuple whose leaves are real
    numbers: the output must have the same container types and lengths at every
    level and real-number leaves; leaves are close when ``|out - exp| <= atol +
    rtol |exp|`` (rtol 1e-7; equal infinities match, NaN matches nothing), as
    numpy's ``allclose`` but without its broadcasting or string conversion.
    """
    if depth > 200:
        return False
    if _real(exp):
        if not _real(out):
            return False
        try:
            a, b = float(out), float(exp)
        except OverflowError:  # an int beyond float range: only exact equality (already checked) counts
            return False
        if math.isinf(a) or math.isinf(b):
            return a == b
        return abs(a - b) <= atol + 1e-07 * abs(b)
    if type(exp) in (list, tuple):
        return (type(out) is type(exp) and len(out) == len(exp)
                and all(_close(o, e, atol, depth + 1) for o, e in zip(out, exp, strict=True)))
    return False


def _numeric_tree(x, depth: int = 0) -> bool:
    if _real(x):
        return True
    if depth < 200 and type(x) in (list, tuple):
        return all(_numeric_tree(e, depth + 1) for e in x)
    return False


def _poly(xs, x):
    return sum(coeff * math.pow(x, i) for i, coeff in enumerate(xs))


def equal(out, exp, *, atol: float = 0.0, entry_point: str = "", inp=None, expected_digest=None,
          exact_only: bool = False) -> bool:
    """Return whether decoded output ``out`` matches expected ``exp`` (evalplus rules).

    ``expected_digest``: optional callable returning the digest of ``exp``, called only when one side
    is a digest (a caller that judges many values against one expected value caches it there).
    ``exact_only``: ``out`` was a numpy scalar (the sandbox sends its Python number): no float tolerance, as
    evalplus's ``type(out) == type(exp)`` fails it before ``allclose``.
    """
    if isinstance(out, Hashed) or isinstance(exp, Hashed):
        own = expected_digest is not None and not isinstance(exp, Hashed)
        a, b = _digest_of(out), (expected_digest() if own else _digest_of(exp))
        return a is not None and a == b
    try:
        exact = out == exp
    except RecursionError:
        exact = False
    if entry_point == "find_zero" and inp is not None:  # HumanEval/32
        try:
            return type(out) in (float, int) and abs(_poly(*inp, out)) <= max(atol, 1e-6)
        except (TypeError, ValueError, OverflowError):
            return False
    if entry_point == "are_equivalent":  # Mbpp/164
        return True
    if entry_point == "sum_div":  # Mbpp/295
        exact = exact or out == 0
    elif entry_point in ("surface_Area", "digit_distance_nums") and inp is not None:  # Mbpp/581, 558
        from evalplus.eval._special_oracle import _digit_distance_nums, _surface_Area

        try:
            if entry_point == "surface_Area":
                exact = exact or abs(out - _surface_Area(*inp)) <= atol
            else:
                exact = exact or out == _digit_distance_nums(*inp)
        except (TypeError, ValueError):
            pass
    elif entry_point in SET_EQ:
        try:
            return isinstance(out, list | tuple | set) and set(out) == set(exp)
        except TypeError:
            return False
    if atol == 0 and _is_floats(exp):
        atol = 1e-6
    if not exact and atol != 0 and _numeric_tree(exp) and not exact_only:
        return type(out) is type(exp) and _close(out, exp, atol)  # evalplus: type(out) == type(exp) first
    return bool(exact)


def judge(outcome, expected, *, atol=0.0, entry_point="", inp=None, expected_digest=None) -> str:
    """Verdict name for one test from a sandbox :class:`~bayespass.execution.sandbox.Outcome`.

    ``expected`` is the *decoded* expected value; ``expected_digest`` as in :func:`equal`.
    """
    if outcome.status != "value":
        return {"error": "error", "timeout": "timeout", "crash": "crash", "oversize": "oversize",
                "not_run": "not_run"}[outcome.status]
    try:
        out = decode(outcome.value)
    except (ValueError, TypeError, RecursionError):
        return "error"
    return judge_value(out, expected, atol=atol, entry_point=entry_point, inp=inp, expected_digest=expected_digest,
                       exact_only=outcome.exact_only)


def judge_value(out, expected, *, atol=0.0, entry_point="", inp=None, expected_digest=None,
                exact_only: bool = False) -> str:
    """Verdict name (``"pass"`` or ``"fail"``) for a decoded return value ``out``, as :func:`judge`."""
    try:
        ok = equal(out, expected, atol=atol, entry_point=entry_point, inp=inp, expected_digest=expected_digest,
                   exact_only=exact_only)
    except (TypeError, ValueError, OverflowError, ZeroDivisionError, RecursionError):
        ok = False  # whatever an untrusted value makes the comparison raise, it is not a match
    return "pass" if ok else "fail"


def _digest_of(x) -> str | None:
    if isinstance(x, Hashed):
        return x.h
    try:
        return canonical_digest(x)[0]
    except (TypeError, RecursionError):
        return None


def _number(x, tol: float) -> list:
    """One form for real numbers that ``==`` finds equal: 2, 2.0 and True-as-1 alike, rounded to ``tol``."""
    if type(x) is float and not math.isfinite(x):
        return ["F", repr(x)]
    if abs(x) > 2**53:  # beyond float precision: integral either way, compared exactly (10**20 == 1e20)
        return ["N", int(x)]
    return ["N", round(x / tol)]  # an int and a float of the same value divide to the same float


def _set_form(xs, tol: float) -> list:
    """Return the form of a set, or of an output the judge compares as one: members normalised, unordered, once."""
    return ["S", sorted({_key(v, tol) for v in xs})]


def _normalise(x, tol):
    if type(x) in (int, float, bool):
        return _number(x, tol)
    if type(x) is complex:
        return ["C", _number(x.real, tol), _number(x.imag, tol)]
    if isinstance(x, list):
        return ["L", [_normalise(v, tol) for v in x]]
    if isinstance(x, tuple):
        return ["T", [_normalise(v, tol) for v in x]]
    if isinstance(x, set | frozenset):
        return _set_form(x, tol)
    if isinstance(x, dict):
        return ["D", sorted(([_normalise(k, tol), _normalise(v, tol)] for k, v in x.items()), key=repr)]
    if isinstance(x, bytes):
        return ["B", x.hex()]
    return x


def _number_key(x, tol: float) -> str:
    """JSON text of :func:`_number`'s form (the same characters as ``json.dumps`` writes)."""
    if type(x) is float and not math.isfinite(x):
        return f'["F", "{x!r}"]'
    if abs(x) > 2**53:
        return f'["N", {int(x)}]'
    return f'["N", {round(x / tol)}]'


_LEAF = (int, float, bool)
_SMALL = 2**53


def _key(x, tol: float) -> str:
    """Return ``json.dumps(_normalise(x, tol), sort_keys=True)``, without building the form.

    Lists and tuples of numbers or strings (the large outputs of benchmark tasks) are written in one pass;
    other containers fall back to :func:`_normalise` (a normalised form holds no dict, so key order is moot).
    """
    t = type(x)
    if t in _LEAF:
        return _number_key(x, tol)
    if t is str:
        return json.dumps(x)
    if x is None:
        return "null"
    if t is list or t is tuple:
        head = '["L", [' if t is list else '["T", ['
        types = set(map(type, x))
        if types <= {int, float}:  # NaN and values beyond float precision fail the range test
            parts = [f'["N", {round(v / tol)}]' if -_SMALL <= v <= _SMALL else _number_key(v, tol) for v in x]
        elif types <= {str}:
            parts = list(map(json.dumps, x))
        else:
            parts = [_key(v, tol) for v in x]
        return head + ", ".join(parts) + "]]"
    return json.dumps(_normalise(x, tol), sort_keys=True)


def value_digest(x, *, atol: float = 0.0, set_equal: bool = False) -> int:
    """Behaviour digest of a decoded return value (as :func:`digest` of an outcome holding it)."""
    try:
        tol = atol or 1e-6
        if set_equal and isinstance(x, list | tuple | set | frozenset):
            key = json.dumps(_set_form(x, tol), sort_keys=True)
        else:
            key = _key(x, tol)
    except (ValueError, TypeError, RecursionError, OverflowError):
        key = "undecodable"
    return _hash(key)


def _hash(key: str) -> int:
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "little") >> 1


def digest(outcome, *, atol: float = 0.0, set_equal: bool = False) -> int:
    """Stable 63-bit digest of a test's behaviour: normalised value, error type, or verdict.

    Numbers are put in one form whatever their type (``2``, ``2.0`` and ``True`` are equal under the
    judge's ``==``) and rounded to the task's tolerance (1e-6 when atol is 0), so that programs equal
    under the judge's comparison share a digest.  With
    ``set_equal`` (tasks whose outputs the judge compares as sets) a list, tuple
    or set is digested as the set of its elements, so that two outputs the judge
    finds equal share a digest whatever their order.
    """
    if outcome.status == "value" and isinstance(outcome.value, dict):
        return _hash("hashed:" + str(outcome.value.get("H")))
    if outcome.status == "value":
        try:
            x = decode(outcome.value)
        except (ValueError, TypeError, RecursionError, OverflowError):
            return _hash("undecodable")
        return value_digest(x, atol=atol, set_equal=set_equal)
    if outcome.status == "error":
        return _hash("error:" + outcome.error.split(":")[0])
    return _hash(outcome.status)
