"""Behavioural twins: programs that differ only in what can never run, executed once.

Real LLM samples of one task often differ only in their docstrings, in string statements (no-ops the
compiler drops) or in an ``if __name__ == "__main__":`` block with example calls. Candidates are loaded
with ``__name__ == "__candidate__"``, so such a block never runs, and only ``__doc__`` can tell a docstring
apart. On the real MBPP generations half the distinct program texts have a twin (142,654 texts, 70,458
keys), and those twins held about 30% of the test time.

:func:`behaviour_key` maps a program to the hash of its syntax tree without those parts (line numbers
ignored), and to ``None`` -- the program keeps its own text hash -- when the equivalence is not exact:

- the program does not compile, or is longer than :data:`MAX_CHARS` (a huge docstring could exhaust memory
  for one twin and not the other);
- a main block has an ``else`` branch (that branch does run);
- what can run names anything that could observe a docstring, ``__name__``, line numbers or the source: see
  ``_OBSERVERS`` (``__doc__``, ``getattr``/``setattr``, ``vars``, ``dir``, ``inspect``, ``doctest``, frames,
  tracebacks, code objects, tracers, warning records, ``logging``, metaclasses (a class body's namespace holds
  its docstring), ``eval``/``exec``/``compile``, ``gc``, ``pickle``, ``ctypes``, ...), or it calls ``.format``
  on a string that is not a literal or whose fields read attributes. "What can run" is the program unparsed
  without its comments, string statements and main blocks, so adjacent literals are joined (``"__d" "oc__"``
  reads as ``'__doc__'``) and a word in a comment or a docstring costs nothing.

Verdicts never carry line numbers: the child reports an exception by its type only.
"""

from __future__ import annotations

import ast
import hashlib
import re
import string

__all__ = ["behaviour_key", "MAX_CHARS"]

#: programs longer than this keep their text hash
MAX_CHARS = 20_000

_OBSERVERS = re.compile(
    # docstrings and the module's ``__doc__`` global: by name, or through a namespace or a dynamic attribute
    r"__doc__|__name__|\bhelp\b|pydoc|doctest|getattr|attrgetter|methodcaller|\bvars\b|\bdir\b|globals|locals|"
    r"__globals__|__dict__|__getattribute__|__builtins__|\bbuiltins\b|__import__|importlib|\beval\b|\bexec\b|"
    r"(?<!\.)\bcompile\b|codeop|import\s+code\b|from\s+code\s+import|\bast\b|format_map|Formatter|"
    # line numbers and positions: frames, tracebacks, code objects, tracers, profilers, warning records
    r"inspect|_getframe|_current_frames|traceback|exc_info|\bexception\b|(?:print|get|format|extract|walk)_stack|"
    r"__code__|lineno|\.(?:co|f|gi|cr|ag|tb)_|settrace|setprofile|monitoring|\btrace\b|tracemalloc|profile|pdb|\bwarnings\b|"
    r"showwarning|formatwarning|\bdis\b|linecache|__file__|__spec__|__loader__|\blogging\b|"
    # a class body's namespace (holds __doc__), names set or read by a computed string, object graphs
    r"metaclass|__prepare__|__init_subclass__|setattr|delattr|__subclasses__|__reduce|pickle|marshal|shelve|"
    r"copyreg|"
    # memory and object identity of the constants themselves
    r"\bgc\b|getrefcount|ctypes")


def _is_main_block(node) -> bool:
    t = getattr(node, "test", None)
    return (isinstance(node, ast.If) and isinstance(t, ast.Compare) and isinstance(t.left, ast.Name)
            and t.left.id == "__name__" and len(t.ops) == 1 and isinstance(t.ops[0], ast.Eq)
            and isinstance(t.comparators[0], ast.Constant) and t.comparators[0].value == "__main__")


def _dynamic_format(node) -> bool:
    """``s.format(...)`` whose fields could read attributes: ``"{0.__d" "oc__}"`` has no ``__doc__`` in its text."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format"):
        return False
    fmt = node.func.value
    if not (isinstance(fmt, ast.Constant) and isinstance(fmt.value, str)):
        return True
    try:
        return any(f and ("." in f or "[" in f) for _, f, _, _ in string.Formatter().parse(fmt.value))
    except ValueError:
        return True


def _is_string_statement(node) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


class _Strip(ast.NodeTransformer):
    """Drop string statements (docstrings included) everywhere and main blocks at module level."""

    def generic_visit(self, node):
        super().generic_visit(node)
        for field in ("body", "orelse", "finalbody"):
            body = getattr(node, field, None)
            if not (isinstance(body, list) and body and isinstance(body[0], ast.stmt)):
                continue
            kept = [s for s in body if not _is_string_statement(s)
                    and not (isinstance(node, ast.Module) and _is_main_block(s))]
            setattr(node, field, kept or [ast.Pass()])
        return node


def behaviour_key(code: str) -> str | None:
    """Return a key equal for programs that behave the same under bayespass's loader, or None (see module doc)."""
    if len(code) > MAX_CHARS:
        return None
    try:
        tree = ast.parse(code)
        compile(tree, "<candidate>", "exec", dont_inherit=True)
        if any(_is_main_block(s) and s.orelse for s in tree.body):
            return None
        stripped = _Strip().visit(tree)
        # what can run, as text: no comments, docstrings, string statements or main blocks, and literals joined
        # ("__d" "oc__" reads as '__doc__', "%(lin" "eno)d" as '%(lineno)d')
        if _OBSERVERS.search(ast.unparse(stripped)) or any(map(_dynamic_format, ast.walk(stripped))):
            return None
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
        return None
    dumped = ast.dump(stripped, annotate_fields=False, include_attributes=False)
    return hashlib.sha256(dumped.encode()).hexdigest()[:20]
