"""Parsing program text that is not bayespass's own: candidates and benchmarks' reference solutions."""

from __future__ import annotations

import ast
import warnings


def parse_program(code: str, *, check: bool = False) -> ast.Module:
    r"""``ast.parse(code)`` with the program's own warnings silenced; ``check=True`` also compiles it.

    An invalid escape (\w in a plain string) warns at parse time, a DeprecationWarning before Python 3.12 and a
    SyntaxWarning from 3.12 on, and the compiler warns on ``x is 1`` and the like.  Those warnings are the
    program's, not the user's: printed, they reached the user's terminal, and under warnings-as-errors they
    turned the parse into a SyntaxError, so what was done with a program depended on the caller's filters.
    Raises SyntaxError (and what ``compile`` raises) as ``ast.parse`` does.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tree = ast.parse(code)
        if check:
            compile(tree, "<candidate>", "exec", dont_inherit=True)
    return tree
