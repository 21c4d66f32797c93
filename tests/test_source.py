"""Program text that is not bayespass's own is parsed the same under any warning filter, and quietly."""

import warnings

import pytest

from bayespass._source import parse_program
from bayespass.generate.mutants import mutants, variants

# an invalid escape warns at parse time, ``is`` with a literal when compiled
PROGRAM = 'def f(x):\n    if x is 1:\n        return "\\d" + str(x)\n    return str(x - 1)\n'


def _under(action, fn, *args, **kwargs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter(action)
        out = fn(*args, **kwargs)
    assert not caught, [str(w.message) for w in caught]
    return out


def test_the_program_is_one_that_warns():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(SyntaxError):
            compile(PROGRAM, "<p>", "exec")


@pytest.mark.parametrize("action", ["error", "always", "ignore"])
def test_parse_program_neither_warns_nor_depends_on_the_filters(action):
    import ast

    tree = _under(action, parse_program, PROGRAM, check=True)
    assert ast.dump(tree) == ast.dump(_under("ignore", parse_program, PROGRAM))
    with pytest.raises(SyntaxError):
        parse_program("def f(:\n")


def test_mutants_and_variants_of_a_solution_that_warns_are_the_same_under_any_filter():
    """Under warnings-as-errors, mutants() of such a reference solution were none and variants() raised."""
    got = {a: (_under(a, mutants, PROGRAM, "f"), _under(a, variants, PROGRAM, "f")) for a in ("error", "ignore")}
    assert got["error"] == got["ignore"]
    assert len(got["error"][0]) >= 3 and len(got["error"][1]) >= 3
