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
])
def test_equal_follows_python_eq_then_a_strict_tolerance(out, exp, atol, ok):
    assert equal(out, exp, atol=atol) is ok


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
