"""The judging rule (next to evalplus's), behaviour digests, and the verdict store that makes runs resumable."""

import sqlite3

import numpy as np
import pytest

from bayespass.execution.child import encode
from bayespass.execution.judge import digest, equal, judge
from bayespass.execution.sandbox import Outcome
from bayespass.execution.store import VerdictStore


def _out(value=None, status="value", error=""):
    return Outcome(status, None if value is None and status != "value" else encode(value), error, 0.01)


@pytest.mark.parametrize(("out", "exp", "atol", "ok"), [
    (1, 1.0, 0.0, True),                      # Python ==, as evalplus
    ({3, 1, 2}, {1, 2, 3}, 0.0, True),        # sets in any order
    ({"b": 1, "a": 2}, {"a": 2, "b": 1}, 0.0, True),
    (0.1 + 0.2, 0.3, 0.0, True),              # a float expected value gets 1e-6
    (0.3001, 0.3, 0.0, False),
    (0.3001, 0.3, 1e-3, True),                # the task's tolerance
    ([1.0, 2.0000001], [1.0, 2.0], 0.0, True),
    ([[1.0], [1.0]], [1.0, 1.0], 1e-6, False),  # no broadcasting (evalplus's assert_allclose passes it)
    (["1.0"], [1.0], 1e-6, False),            # no string conversion (evalplus passes it)
    ((1.0, 2.0), [1.0, 2.0], 1e-6, False),    # same structure: a tuple is not a list within tolerance
    ("abc", "abc", 0.0, True),
    ("abc", "abd", 0.0, False),
    (True, 1, 0.0, True),                     # Python == again (True == 1)
    (None, 0, 0.0, False),
    (3, 2.9999999999, 0.0, False),            # an int is not close to an expected float (evalplus's type check)
    (3, 3.0, 0.0, True),                      # ... but equal to one
    (3.0000000001, 3, 1e-6, False),           # nor a float to an expected int, under a task's tolerance
    ([3, 2], [2.9999999999, 2.0], 0.0, True),  # inside a list ints are numbers (evalplus's allclose)
])
def test_equal_follows_python_eq_then_a_strict_tolerance(out, exp, atol, ok):
    assert equal(out, exp, atol=atol) is ok


#: (returned, expected, task atol): values where bayespass's rule and evalplus's must agree
TOP_LEVEL_NUMBERS = [
    (3, 2.9999999999, 0.0), (3, 3.0, 0.0), (2.9999999999, 3.0, 0.0), (1333335333334000000, 1.333335333334e18, 0.0),
    (3.0000000001, 3, 1e-6), (3, 3, 1e-6), (True, 1.0000000001, 0.0), (True, 1.0, 0.0),
    ([3, 2], [2.9999999999, 2.0], 0.0), ((3.0, 2.0), (2.9999999999, 2.0), 0.0), ([3.1, 2], [3.0, 2.0], 0.0),
]


@pytest.mark.parametrize(("out", "exp", "atol"), TOP_LEVEL_NUMBERS)
def test_numbers_near_the_expected_value_are_judged_as_evalplus_judges_them(out, exp, atol):
    """Brute force against evalplus's own ``untrusted_check`` (one child per case: evalplus keeps a float task's
    1e-6 for the tests after it).  The real MBPP+ programs that return ``square_Sum``'s exact integer where
    MBPP+ expects a float (Mbpp/267, /287) passed here and failed there until harness 11."""
    from evalplus.eval import PASS, untrusted_check

    code = f"def f(x):\n    return {out!r}\n"
    # a reference time of 10 s: evalplus's limit (40 s) never decides a case on a busy machine
    stat, details = untrusted_check("mbpp", code, [[0]], "f", [exp], atol, [10.0], fast_check=False)
    assert equal(out, exp, atol=atol) is (stat == PASS) is bool(details[0]), (out, exp, atol, stat)


def test_judge_maps_statuses_and_never_raises_on_odd_values():
    assert judge(_out(4), 4) == "pass"
    assert judge(_out(5), 4) == "fail"
    for status in ("error", "timeout", "crash", "oversize", "not_run"):
        assert judge(Outcome(status, None, "X", 0.0), 4) == status
    deep = 0
    for _ in range(50):
        deep = [deep]
    assert judge(_out(deep), [1]) == "fail"
    # find_zero (HumanEval/32) is judged by the polynomial's value at the answer, not by equality
    assert judge(_out(2.0), 1.0, entry_point="find_zero", inp=[[-2.0, 1.0]]) == "pass"
    assert judge(_out(1.0), 1.0, entry_point="find_zero", inp=[[-2.0, 1.0]]) == "fail"


def test_digest_groups_behaviours_as_the_judge_does():
    same = digest(_out(0.1 + 0.2)) == digest(_out(0.3))
    assert same  # equal within the float tolerance: one behaviour
    assert digest(_out(0.3)) != digest(_out(0.31))
    assert digest(_out({1, 2})) == digest(_out({2, 1}))
    assert digest(_out([1, 2])) != digest(_out((1, 2)))
    err_a = digest(Outcome("error", None, "ValueError: a", 0.0))
    assert err_a == digest(Outcome("error", None, "ValueError: b", 0.0))  # the error type is the behaviour
    assert err_a != digest(Outcome("error", None, "KeyError: a", 0.0))
    assert digest(Outcome("timeout", None, "", 1.0)) != err_a


def test_store_commits_each_program_and_resumes_and_imports(tmp_path):
    st = VerdictStore(tmp_path / "a" / "verdicts.sqlite")
    st.add_samples([("c", "t1", 0, "h1", "{}"), ("c", "t1", 1, "h1", "{}"), ("c", "t2", 0, "h2", "{}")])
    st.put("t1", "h1", "ts1", "7", [1, 2], [11, 12], [0.1, 0.2], [0, 2])
    assert st.done({"t1": "ts1", "t2": "ts2"}, "7") == {("t1", "h1")}
    assert st.done({"t1": "other-tests"}, "7") == set()   # a changed test set is not done
    assert st.done({"t1": "ts1"}, "7+t1") == set()         # nor another harness
    got = st.get("7", {"t1": "ts1"})
    v, d, u, f = got["t1", "h1"]
    assert list(v) == [1, 2] and list(d) == [11, 12] and np.allclose(u, [0.1, 0.2]) and list(f) == [0, 2]
    # only the programs asked for (a run directory shared by many calls holds far more), same values
    st.put("t2", "h2", "ts2", "7", [2], [5], [0.3])
    st.put("t2", "h3", "ts2", "7", [4], [6], [1.0])
    some = st.get("7", {"t1": "ts1", "t2": "ts2"}, programs={("t1", "h1"), ("t2", "h3"), ("t2", "absent")})
    assert set(some) == {("t1", "h1"), ("t2", "h3")} and list(some["t2", "h3"][0]) == [4]
    assert all((some[k][i] == got[k][i]).all() for k in [("t1", "h1")] for i in range(4))
    assert set(st.get("7", {"t1": "other-tests", "t2": "ts2"}, programs={("t1", "h1"), ("t2", "h2")})) == {("t2", "h2")}
    assert len(st.get("7", {"t1": "ts1", "t2": "ts2"})) == 3
    st._db.execute("DELETE FROM results WHERE task = 't2'")
    st.put("t1", "h1", "ts1", "7", [1, 1], [11, 11], [0.1, 0.1])  # re-judged: replaced, still one row
    st.close()
    # committed at once: another connection sees it (a killed run keeps what it judged)
    rows = sqlite3.connect(tmp_path / "a" / "verdicts.sqlite").execute("SELECT COUNT(*) FROM results").fetchone()
    assert rows[0] == 1
    other = VerdictStore(tmp_path / "b" / "verdicts.sqlite")
    assert other.import_results(tmp_path / "a" / "verdicts.sqlite", "7", {"t1": "ts1"}) == 1
    assert other.import_results(tmp_path / "a" / "verdicts.sqlite", "7", {"t1": "changed"}) == 0
    assert other.import_results(tmp_path / "missing.sqlite", "7", {"t1": "ts1"}) == 0
    assert list(other.get("7")["t1", "h1"][0]) == [1, 1]
    other.close()


@pytest.mark.parametrize("damage", ["truncated", "garbage"])
def test_a_damaged_store_is_set_aside_and_a_new_one_used(tmp_path, damage):
    """A truncated copy of a run directory's store ended execution in a sqlite3.DatabaseError traceback."""
    path = tmp_path / "verdicts.sqlite"
    st = VerdictStore(path)
    st.put("t1", "h1", "ts1", "7", [1, 2], [11, 12], [0.1, 0.2])
    st.close()
    whole = path.read_bytes()
    path.write_bytes(whole[: len(whole) // 3] if damage == "truncated" else b"not a database" * 100)
    with pytest.warns(UserWarning, match=r"the verdict store '.*verdicts.sqlite' is damaged \(.+\); moved to "
                                         r"verdicts.sqlite.damaged, its programs are run again"):
        st = VerdictStore(path)
    assert st.done({"t1": "ts1"}, "7") == set()  # judged again
    st.put("t1", "h1", "ts1", "7", [1, 2], [11, 12], [0.1, 0.2])
    assert st.done({"t1": "ts1"}, "7") == {("t1", "h1")}
    st.close()
    assert (tmp_path / "verdicts.sqlite.damaged").stat().st_size > 0  # kept, not deleted


def test_a_store_that_is_locked_is_not_set_aside(tmp_path):
    path = tmp_path / "verdicts.sqlite"
    VerdictStore(path).close()
    holder = sqlite3.connect(path, isolation_level=None, timeout=0)
    holder.execute("PRAGMA locking_mode=EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            VerdictStore(path)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert not (tmp_path / "verdicts.sqlite.damaged").exists()


def _reference_key(x, tol):
    """The digest's key as first written (nested form, then ``json.dumps``): the fast writer must match it."""
    import json
    import math

    def number(v):
        if type(v) is float and not math.isfinite(v):
            return ["F", repr(v)]
        return ["N", int(v)] if abs(v) > 2**53 else ["N", round(v / tol)]

    def form(v):
        if type(v) in (int, float, bool):
            return number(v)
        if type(v) is complex:
            return ["C", number(v.real), number(v.imag)]
        if isinstance(v, list | tuple):
            return ["L" if isinstance(v, list) else "T", [form(e) for e in v]]
        if isinstance(v, set | frozenset):
            return ["S", sorted({json.dumps(form(e), sort_keys=True) for e in v})]
        if isinstance(v, dict):
            return ["D", sorted(([form(k), form(e)] for k, e in v.items()), key=repr)]
        return ["B", v.hex()] if isinstance(v, bytes) else v

    return json.dumps(form(x), sort_keys=True)


def _random_value(rng, depth=0):
    leaves = [lambda: int(rng.integers(-5, 6)), lambda: int(rng.integers(-2**62, 2**62)), lambda: 2**53,
              lambda: -2**53 - 1, lambda: float(rng.normal() * 10.0 ** rng.integers(-8, 20)),
              lambda: [float("inf"), float("-inf"), float("nan"), -0.0][rng.integers(4)], lambda: bool(rng.integers(2)),
              lambda: None, lambda: ["a", 'é"\\\n', "", "\u2603x"][rng.integers(4)], lambda: complex(rng.normal(), 1.0),
              lambda: b"\x00ab", lambda: float(2**60)]
    if depth > 3 or rng.random() < 0.3:
        return leaves[rng.integers(len(leaves))]()
    n = int(rng.integers(0, 5))
    kind = rng.integers(6)
    if kind == 0:
        return [_random_value(rng, depth + 1) for _ in range(n)]
    if kind == 1:
        return tuple(_random_value(rng, depth + 1) for _ in range(n))
    if kind == 2:
        return [int(v) for v in rng.integers(-10**6, 10**6, 3 * n)]
    if kind == 3:
        return [str(v) for v in rng.choice(list("abc"), n)]
    if kind == 4:
        return {int(rng.integers(6)): _random_value(rng, depth + 1) for _ in range(n)}
    return {int(v) for v in rng.integers(0, 10, n)}


def test_fast_digest_key_writes_the_same_text_as_the_nested_form():
    from bayespass.execution.judge import _key

    rng = np.random.default_rng(3)
    for _ in range(5000):
        x, tol = _random_value(rng), [1e-6, 1e-3, 0.5][rng.integers(3)]
        try:
            want = _reference_key(x, tol)
        except (TypeError, ValueError) as err:
            want = type(err)
        try:
            got = _key(x, tol)
        except (TypeError, ValueError) as err:
            got = type(err)
        assert got == want, x


def test_encode_decode_fast_paths_round_trip_exact_types():
    from bayespass.execution.child import decode

    class MyInt(int):
        def __index__(self):
            raise AssertionError("a candidate's method ran in the encoder")

    values = [[1, 2, 2**53, -2**53], [2**53 + 1, 3], ["a", "b"], [True, 1], [1, 1.0], ({1, 2}), frozenset({"x"}),
              (1, 2), [[1, 2], [3, "4"]], [], [None, 1], [MyInt(5), 6]]
    for v in values:
        back = decode(encode(v))
        assert back == v and type(back) is ({frozenset: set}.get(type(v), type(v)))
        assert [type(e) for e in back] == [int if type(e) is MyInt else type(e) for e in v] or isinstance(v, set | frozenset)
    assert encode([2**53 + 1]) == ["L", [["I", hex(2**53 + 1)]]]  # beyond float precision: tagged, as before
    assert encode([MyInt(5)]) == ["L", [5]]  # a subclass is encoded by int's own methods


def test_an_exactly_equal_output_gets_the_reference_digest_without_digesting_it():
    from types import SimpleNamespace

    from bayespass.execution import engine
    from bayespass.execution.judge import value_digest
    from bayespass.execution.sandbox import Limits

    task = SimpleNamespace(atol=0.0, set_equal=False, entry_point="f", inputs=[[1], [2]], output_not_none=False)
    expected = [[[1, 2], [3, 4.5]], [0.25, 7.0]]
    suite = SimpleNamespace(name="t", tasks={"T/0": task},
                            expected={"T/0": {"values": [encode(v) for v in expected], "inputs": [encode([1])] * 2,
                                              "times": [0.01, 0.01]}})
    j = engine._Judge(suite, Limits())
    calls = []
    j.reference_digest = lambda t, i: calls.append((t, i)) or 12345  # counts the calls; a sentinel digest
    same = j.judged("T/0", 0, _out([[1, 2], [3, 4.5]]))
    assert (same.verdict, same.digest, calls) == ("pass", 12345, [("T/0", 0)])
    close = j.judged("T/0", 1, _out([0.25 + 1e-9, 7.0]))  # passes within the tolerance, not exactly equal
    assert close.verdict == "pass" and close.digest == value_digest([0.25 + 1e-9, 7.0]) and len(calls) == 1
    assert engine._Judge(suite, Limits()).reference_digest("T/0", 0) == digest(_out(expected[0]))
    assert j.job("T/0", "a")["caps"] is j.job("T/0", "b")["caps"]  # a task's tests and caps: computed once
