"""Behavioural twins: programs that differ only in what can never run, executed once.

Real LLM samples of one task often differ only in their docstrings, in string statements (no-ops the
compiler drops), in an ``if __name__ == "__main__":`` block with example calls, or in the names of their
local variables. Candidates are loaded with ``__name__ == "__candidate__"``, so such a block never runs,
only ``__doc__`` can tell a docstring apart, and only a few things can read a local variable's name. On the
real MBPP generations (142,654 distinct texts) the docstring rule leaves 70,458 programs to run, and
renaming locals 56,897 (4,507 s of stored test time against 5,651 s).

Local variables of functions and comprehensions are renamed to ``#0``, ``#1``, ... in order of use (see
:func:`_rename_locals`), except names that are parameters (passed by keyword), ``def``/``class``/import
names, ``global``/``nonlocal`` names, class attributes, and every name of a program that can reach an
exception object (``except ... as``, ``__exit__``, ``ExitStack``, hooks, ``.exception()``, ...: the message
of an unbound local names it), string annotations or ``__qualname__`` (``_NAME_OBSERVERS``), or uses
``match``. An f-string's ``{x=}`` keeps its text ``x=`` as a literal, so it is never renamed away.

:func:`behaviour_key` maps a program to the hash of its syntax tree without those parts (line numbers
ignored), and to ``None`` -- the program keeps its own text hash -- when the equivalence is not exact:

- the program does not compile, or is longer than :data:`MAX_CHARS` (a huge docstring could exhaust memory
  for one twin and not the other);
- a main block has an ``else`` branch (that branch does run);
- what can run names anything that could observe a docstring, ``__name__``, line numbers or the source: see
  ``_OBSERVERS`` (``__doc__``, ``getattr``/``setattr``, ``vars``, ``dir``, ``inspect``, ``doctest``, frames,
  tracebacks, code objects, tracers, warning records, ``logging``, metaclasses (a class body's namespace holds
  its docstring), ``eval``/``exec``/``compile``, ``gc``, ``pickle``, ``ctypes``, ``sys.modules``, hooks,
  ``stderr``, ``dup2``, ``faulthandler``, ``unittest``, ``asyncio`` (the harness silences the interpreter's own
  tracebacks and warnings, which a program could read back from its descriptor 2), ``signal`` and ``bdb`` (a
  frame's repr holds its line number), ``breakpoint`` (the debugger's prompt names the line), ``functools.wraps``
  and ``update_wrapper`` (they copy a docstring onto another object), namespaces and ``__getstate__`` (they
  show every attribute), the interpreter's memory accounting (``resource``, ``getallocatedblocks``,
  ``/proc``: a longer docstring allocates more), ...; attributes named in class patterns count as read), or it
  calls ``.format`` on a string that is not a literal or whose fields read attributes. "What can run" is the
  program unparsed without its comments, string statements and main blocks, so adjacent literals are joined
  (``"__d" "oc__"`` reads as ``'__doc__'``) and a word in a comment or a docstring costs nothing.

Verdicts never carry line numbers: the child reports an exception by its type only.

What no list of names can catch: a program that measures how much memory it can still allocate (a binary
search on ``bytearray`` sizes under the address-space limit: a 19,000-character docstring left 56 KiB less)
or how long it has run can tell such twins apart. ``dedup="text"`` runs every distinct text.
"""

from __future__ import annotations

import ast
import hashlib
import re
import string
from collections import deque

from .._source import parse_program
from .child import PACKAGES

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
    r"\bgc\b|getrefcount|ctypes|"
    # a module by a computed name: the sandbox's zygote has already imported inspect, so
    # ``sys.modules["ins" + "pect"].getdoc(f)`` reads a docstring with neither word in the text
    r"\bmodules\b|"
    # where the interpreter's own texts (tracebacks, warnings: line numbers and local names) could be sent
    # and read back; the harness silences them (``child._silence_diagnostics``), and a program that resets
    # a hook, reads stderr or writes a traceback on a signal is no twin
    r"hook|stderr|\bdup2?\b|faulthandler|unittest|asyncio|"
    # a frame handed to a callback: its repr holds its line number ("<frame at ..., line 5, code f>")
    r"\bsignal\b|\bbdb\b|"
    # the debugger by the builtin that starts it: its prompt, printed to a redirected stdout, names the line
    r"breakpoint|"
    # a docstring copied onto another object, and objects whose repr, equality or state shows every attribute
    # (``repr(SimpleNamespace)`` after ``functools.update_wrapper(ns, f)`` holds ``__doc__='...'``)
    r"update_wrapper|\bwraps\b|WRAPPER_|Namespace|__getstate__|"
    # the interpreter's own memory accounting: a longer docstring or local name allocates more (a 5,000-char
    # docstring moved the peak resident size by 128 KiB); /proc is absent from the minimal root, not from
    # every layer
    r"\bresource\b|getrusage|maxrss|getallocatedblocks|mallocstats|/proc\b|"
    # a package the sandbox lets programs import (numpy: ``np.info(f, output=...)`` and ``np.source`` read
    # docstrings and source)
    + "|".join(rf"\b{name}\b" for name in PACKAGES))


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


def _strip(node, module: bool = False):
    """Drop string statements (docstrings included) everywhere and main blocks at module level, in place."""
    for field in ("body", "orelse", "finalbody"):
        body = getattr(node, field, None)
        if not (isinstance(body, list) and body and isinstance(body[0], ast.stmt)):
            continue
        kept = [s for s in body if not _is_string_statement(s) and not (module and _is_main_block(s))]
        for s in kept:
            _strip(s)
        setattr(node, field, kept or [ast.Pass()])
    for part in (*getattr(node, "handlers", ()), *getattr(node, "cases", ())):  # except and case clauses
        _strip(part)
    return node


#: what can observe a local variable's name (beyond ``_OBSERVERS``): an exception's message names an unbound
#: local, and a program reaches exception objects through ``except ... as``, a context manager's ``__exit__``
#: or a hook; string annotations (``from __future__ import annotations``) hold names as text
_NAME_OBSERVERS = re.compile(r"__exit__|__aexit__|hook|breakpoint|raises|__annotations__|get_type_hints|"
                             r"annotations|__qualname__|\bthrow\b|exception|ExitStack")
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
_COMPS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _fixed_names(nodes) -> set[str] | None:
    """Return the names never renamed, or None where no name may be renamed (see :func:`_rename_locals`).

    Kept: parameters, def/class/import names, ``global``/``nonlocal`` names and class attributes.
    """
    fixed = set()
    for node in nodes:
        if isinstance(node, (ast.ExceptHandler, ast.Match)) and (isinstance(node, ast.Match) or node.name):
            return None  # an exception object's message names an unbound local; match captures are strings
        if isinstance(node, (*_FUNCS, ast.ClassDef)):
            fixed.add(node.name)
        if isinstance(node, (*_FUNCS, ast.Lambda)):
            a = node.args
            fixed.update(x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg) if x)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            fixed.update(node.names)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            fixed.update((al.asname or al.name).split(".")[0] for al in node.names)
        elif isinstance(node, ast.ClassDef):  # a class body's names are attributes, readable by their text
            fixed.update(n.id for n in _own_scope(node.body) if isinstance(n, ast.Name)
                         and not isinstance(n.ctx, ast.Load))
    return fixed


def _own_scope(nodes, comprehensions=True):
    """Yield the nodes of one scope: not inside nested functions, lambdas or classes (nor comprehensions, if asked)."""
    stack = list(reversed(nodes))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (*_FUNCS, ast.Lambda, ast.ClassDef)):
            continue  # its name, defaults and decorators are yielded above as part of this scope's statement
        if isinstance(node, _COMPS) and not comprehensions:
            # only assignment expressions bind in this scope; the first iterable is evaluated here
            stack.extend(reversed(list(_walruses(node))))
            stack.append(node.generators[0].iter)
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


def _walruses(comp):
    """Yield a comprehension's assignment expressions (nested ones included; not those of lambdas in it)."""
    stack = list(ast.iter_child_nodes(comp))
    while stack:
        node = stack.pop()
        if isinstance(node, ast.NamedExpr):
            yield node
        elif not isinstance(node, (*_FUNCS, ast.Lambda, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(node))


def _rename_locals(tree, fixed: set[str]) -> None:
    """Rename the local variables of every function and comprehension to ``#0``, ``#1``, ... in order of use.

    A variable is renamed everywhere it is visible (its scope and the scopes nested in it, where a rebinding of
    the same name is renamed alike, so scoping is unchanged). The new names are not identifiers: the tree is
    hashed, never run, and no renamed variable can meet a name of the program.
    """
    counter = 0

    def rename(region, names):
        nonlocal counter
        if not names:
            return
        hits = [n for r in region for n in ast.walk(r) if isinstance(n, ast.Name) and n.id in names]
        order = {}
        for n in hits:
            if n.id not in order:
                order[n.id] = f"#{counter + len(order)}"
        counter += len(order)
        for n in hits:
            n.id = order[n.id]

    def renamable(name):
        return name not in fixed and not name.startswith("#") and not name.startswith("__")

    todo = deque([tree])
    while todo:  # outer scopes first: an inner scope's rebinding of an outer name is renamed with it
        node = todo.popleft()
        if isinstance(node, _FUNCS):
            bound = {n.id for n in _own_scope(node.body, comprehensions=False)
                     if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load) and renamable(n.id)}
            rename(node.body, bound)
        elif isinstance(node, _COMPS):
            bound = {n.id for g in node.generators for n in ast.walk(g.target)
                     if isinstance(n, ast.Name) and renamable(n.id)}
            parts = [node.elt] if not isinstance(node, ast.DictComp) else [node.key, node.value]
            parts += [g.target for g in node.generators] + [g.iter for g in node.generators[1:]]
            parts += [c for g in node.generators for c in g.ifs]
            rename(parts, bound)
        todo.extend(ast.iter_child_nodes(node))


def behaviour_key(code: str) -> str | None:
    """Return a key equal for programs that behave the same under bayespass's loader, or None (see module doc)."""
    if len(code) > MAX_CHARS:
        return None
    try:
        tree = parse_program(code, check=True)  # the key does not depend on the caller's warning filters
        if any(_is_main_block(s) and s.orelse for s in tree.body):
            return None
        stripped = _strip(tree, module=True)
        # what can run, as text: no comments, docstrings, string statements or main blocks, and literals joined
        # ("__d" "oc__" reads as '__doc__', "%(lin" "eno)d" as '%(lineno)d')
        text, nodes = ast.unparse(stripped), list(ast.walk(stripped))
        # a class pattern reads attributes by name without a dot (``case object(gi_code=c)``): read as ``.gi_code``
        text += "".join(f" .{a}" for n in nodes if isinstance(n, ast.MatchClass) for a in n.kwd_attrs)
        if _OBSERVERS.search(text) or any(map(_dynamic_format, nodes)):
            return None
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
        return None
    fixed = None if _NAME_OBSERVERS.search(text) else _fixed_names(nodes)
    if fixed is not None:
        _rename_locals(stripped, fixed)
    dumped = ast.dump(stripped, annotate_fields=False, include_attributes=False)
    return hashlib.sha256(dumped.encode()).hexdigest()[:20]
