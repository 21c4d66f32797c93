"""The shared validators: every error names the parameter, the value and what is allowed."""

import numpy as np
import pytest

from bayespass.validate import as_k, check_choice, check_positive_int, check_prob, parse_list


def test_check_prob_and_positive_int():
    assert check_prob(0.9, name="ci_prob") == 0.9
    for bad in (0, 1, 1.5, -0.1, "high", None, True, float("nan")):
        with pytest.raises((ValueError, TypeError), match="ci_prob"):
            check_prob(bad, name="ci_prob")
    assert check_positive_int(3, name="folds") == 3
    assert check_positive_int(np.int64(2), name="folds") == 2
    for bad in (0, -1, 2.5, "3", True):
        with pytest.raises((ValueError, TypeError), match="folds"):
            check_positive_int(bad, name="folds")


def test_check_choice_lists_what_is_allowed():
    assert check_choice("eb", ("eb", "mcmc"), name="method") == "eb"
    with pytest.raises(ValueError, match=r"method.*'nuts'.*eb.*mcmc"):
        check_choice("nuts", ("eb", "mcmc"), name="method")


def test_as_k_and_parse_list():
    assert list(as_k(10)) == [10]
    assert list(as_k([1, 10, 100])) == [1, 10, 100]
    assert list(as_k("1,5,10")) == [1, 5, 10]
    for bad in (0, [1, -2], "a,b", [], 2.5):
        with pytest.raises((ValueError, TypeError), match="k"):
            as_k(bad)
    assert list(as_k([1, 10**12])) == [1, 10**12]
    with pytest.raises(ValueError, match=r"k must be at most 10\*\*12 .*got \[1000000000000000000\]"):
        as_k([1, 1e18])  # float64 cannot resolve pass@1e18: it came out negative (-43.8, bb) or 0.52
    with pytest.raises(ValueError, match=r"k must be at most 10\*\*12 .*got \[1180591620717411303424\]"):
        as_k(2**70)  # beyond int64: was "must hold positive integers"
    with pytest.raises(ValueError, match=r"flat list of them; got an array of shape \(1, 2\)"):
        as_k(np.array([[1, 2]]))  # was "k has repeated values"
    assert list(as_k(np.array([3, 7], dtype=np.uint8))) == [3, 7]
    assert list(as_k(np.array(5))) == [5]  # a 0-d array: was "iteration over a 0-d array"
    assert parse_list("a, b,c", name="configs") == ["a", "b", "c"]
    assert parse_list([1, 2], name="k", cast=int) == [1, 2]


def test_split_pair_finds_the_colon_between_two_configs():
    from bayespass.validate import split_pair

    configs = ["llama3:8b|T=0.2", "llama3:70b|T=0.2", "a", "b"]
    assert split_pair("llama3:8b|T=0.2:llama3:70b|T=0.2", configs) == ("llama3:8b|T=0.2", "llama3:70b|T=0.2")
    assert split_pair("a:b", configs) == ("a", "b")
    assert split_pair(("a", "b"), configs) == ("a", "b")  # not a string: as it is
    assert split_pair("a:nope", configs) == ("a", "nope")  # the caller's check names 'nope'
    with pytest.raises(ValueError, match="must look like 'A:B'"):
        split_pair("ab", configs)
    with pytest.raises(ValueError, match="in 2 ways"):
        split_pair("x:y:z", ["x", "y:z", "x:y", "z"])


def test_first_of_shows_a_few_and_counts_the_rest():
    from bayespass.validate import first_of

    assert first_of(["a", "b"]) == "['a', 'b']"
    assert first_of([f"t{i}" for i in range(8)], most=3) == "['t0', 't1', 't2'] and 5 more"
    assert first_of(range(5)) == "[0, 1, 2, 3, 4]"  # exactly `most`: nothing more to say
