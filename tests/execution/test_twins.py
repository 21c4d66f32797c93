"""Behavioural twins (programs differing only in what never runs) are executed once, with exact verdicts."""

import ast

import numpy as np
import pytest

import bayespass as bp
from bayespass.execution import engine
from bayespass.execution.twins import MAX_CHARS, behaviour_key

BASE = "def f(x):\n    return x + 1\n"


@pytest.mark.parametrize("twin", [
    'def f(x):\n    """Add one."""\n    return x+1\n',  # docstring, formatting
    'def f(x):\n    return (x + 1)\n\nif __name__ == "__main__":\n    print(f(2))\n    raise SystemExit(f(None))\n',
    "\"\"\"Module doc.\"\"\"\ndef f(x):\n    'doc'\n    'a no-op string'\n    return x + 1\n'trailing'\n",
    "def f(x):\n    return x + 1\nif __name__ == '__main__':\n    while True:\n        pass\n",
])
def test_programs_that_differ_only_in_what_never_runs_share_a_key(twin):
    assert behaviour_key(BASE) is not None
    assert behaviour_key(twin) == behaviour_key(BASE)


@pytest.mark.parametrize("other", [
    "def f(x):\n    return x + 2\n",
    "def f(x):\n    return x + 1\nprint(f(1))\n",  # module-level code runs
    "def f(y):\n    return y + 1\n",  # a renamed parameter can be passed by name
    'def f(x):\n    return x + 1\nif __name__ == "__candidate__":\n    f = None\n',
    'def f(x):\n    s = "a string that is a value"\n    return x + 1\n',
])
def test_programs_that_can_behave_differently_do_not(other):
    assert behaviour_key(other) != behaviour_key(BASE)


@pytest.mark.parametrize("code", [
    'def f(x):\n    """d"""\n    return f.__doc__\n',
    'def f(x):\n    """d"""\n    return getattr(f, "__d" + "oc__")\n',
    'import inspect\ndef f(x):\n    """d"""\n    return inspect.getdoc(f)\n',
    'import sys\ndef f(x):\n    """d"""\n    return sys._getframe().f_lineno\n',
    'import traceback\ndef f(x):\n    """d"""\n    try:\n        1 / 0\n    except Exception:\n        return traceback.format_exc()\n',
    'def f(x):\n    """d"""\n    try:\n        1 / 0\n    except Exception as e:\n        return e.__traceback__.tb_lineno\n',
    'def f(x):\n    """d"""\n    return f.__code__.co_consts[0]\n',
    'def f(x):\n    """d"""\n    return vars(f)\n',
    'def f(x):\n    """d"""\n    return globals()["__doc__"]\n',
    'import sys\ndef f(x):\n    """doc"""\n    return sys.getrefcount("doc")\n',
    'import gc\ndef f(x):\n    """d"""\n    return len(gc.get_referrers(f))\n',
    'def f(x):\n    return x\nif __name__ == "__main__":\n    pass\nelse:\n    f = None\n',  # the else branch runs
    '__name__ = "__main__"\ndef f(x):\n    return x\nif __name__ == "__main__":\n    f = None\n',
    'def f(x):\n    return x\nif __name__ == "__main__":\n    return 1\n',  # does not compile
    "def f(x:\n    return x\n",
    'def f(x):\n    """' + "d" * MAX_CHARS + '"""\n    return x\n',  # too big: memory could differ
])
def test_programs_that_could_observe_the_difference_keep_their_own_key(code):
    assert behaviour_key(code) is None


@pytest.fixture(scope="module")
def humaneval():
    return bp.load_suite("humaneval")


def _without_docstrings(tree):
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            node.body = body[1:] or [ast.Pass()]
    return tree


def _renamed_locals(code: str) -> str:
    """The program with every function's assigned local variables renamed (found by :mod:`symtable`, not by the
    code under test): a behavioural twin of the original."""
    import symtable

    locals_ = set()
    stack = [symtable.symtable(code, "<c>", "exec")]
    while stack:
        table = stack.pop()
        stack.extend(table.get_children())
        if table.get_type() == "function":
            locals_ |= {s.get_name() for s in table.get_symbols() if s.is_local() and s.is_assigned()
                        and not s.is_parameter() and not s.is_namespace() and not s.is_imported()}
    tree = ast.parse(code)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in locals_:
            node.id += "_renamed"
    return ast.unparse(tree)


def _variants(suite, tasks):
    """Per task: the canonical solution, twins of it, a wrong twin pair and one that reads its docstring."""
    recs = []
    for t in tasks:
        task = suite.tasks[t]
        good = task.prompt + task.canonical_solution
        wrong = task.prompt + "    return None\n"
        ep = task.entry_point
        reader = good.replace(task.canonical_solution, f"    if {ep}.__doc__:\n        return None\n"
                              + task.canonical_solution, 1)
        for name, code in {
            "plain": good,
            "renamed": _renamed_locals(good),
            "main": good + f'\n\nif __name__ == "__main__":\n    print({ep}(None))\n    while True:\n        pass\n',
            "strings": '"""A module docstring."""\n' + good + '\n"""a trailing no-op string"""\n',
            "wrong": wrong,
            "wrong-main": wrong + '\nif __name__ == "__main__":\n    pass\n',
            # fails because it has a docstring; its docstring-free twin passes: neither borrows the other's verdict
            "doc-reader": reader,
            "doc-reader-nodoc": ast.unparse(_without_docstrings(ast.parse(reader))),
        }.items():
            recs.append({"task_id": t, "solution": code, "config": name})
    return recs


def test_behaviour_dedup_runs_fewer_programs_and_gives_the_same_verdicts(humaneval, tmp_path, monkeypatch):
    tasks = [t for t in list(humaneval.tasks)[:7] if t != "HumanEval/2"]  # /2 has no local variable
    recs = _variants(humaneval, tasks)
    assert all(r["solution"] != recs[i - 1]["solution"] for i, r in enumerate(recs) if r["config"] == "renamed")
    ran = []
    real_run = engine._run
    monkeypatch.setattr(engine, "_run", lambda jobs, *a, **k: (ran.append(len(jobs)), real_run(jobs, *a, **k))[1])
    text = engine.execute(recs, humaneval, out=tmp_path / "text", dedup="text", progress=False)
    behaviour = engine.execute(recs, humaneval, out=tmp_path / "behaviour", progress=False)
    assert ran == [8 * len(tasks), 4 * len(tasks)]  # plain/renamed/main/strings one program, wrong/wrong-main one
    for var in ("verdict", "digest", "correct", "base_correct"):
        np.testing.assert_array_equal(text[var].values, behaviour[var].values, err_msg=var)
    correct = behaviour.correct.sel(sample=0).to_pandas()
    assert correct.loc[["plain", "renamed", "main", "strings"]].all().all()
    assert correct.loc["doc-reader-nodoc"].all()
    assert not correct.loc[["wrong", "wrong-main", "doc-reader"]].any().any()
    assert behaviour.attrs["dedup"] == "behaviour" and text.attrs["dedup"] == "text"
    assert (behaviour.attrs["n_run"], behaviour.attrs["n_twins"]) == (4 * len(tasks), 4 * len(tasks))
    assert (text.attrs["n_run"], text.attrs["n_twins"]) == (8 * len(tasks), 0)


def test_a_twin_in_a_later_call_takes_the_stored_results_without_running(humaneval, tmp_path, monkeypatch):
    tasks = list(humaneval.tasks)[:4]
    recs = _variants(humaneval, tasks)
    first = [r for r in recs if r["config"] in ("plain", "wrong")]
    later = [r for r in recs if r["config"] in ("main", "strings", "wrong-main")]
    engine.execute(first, humaneval, out=tmp_path, progress=False)
    ran = []
    real_run = engine._run
    monkeypatch.setattr(engine, "_run", lambda jobs, *a, **k: (ran.append(len(jobs)), real_run(jobs, *a, **k))[1])
    ds = engine.execute(later, humaneval, out=tmp_path, progress=False)
    assert ran == [0] and (ds.attrs["n_run"], ds.attrs["n_twins"]) == (0, 3 * len(tasks))
    correct = ds.correct.sel(sample=0).to_pandas()
    assert correct.loc[["main", "strings"]].all().all() and not correct.loc["wrong-main"].any()
    again = engine.execute(later, humaneval, out=tmp_path / "alone", dedup="text", progress=False)
    np.testing.assert_array_equal(ds.verdict.values, again.verdict.values)


def test_dedup_must_be_one_of_the_two_modes(humaneval):
    with pytest.raises(ValueError, match="dedup='ast'.*'behaviour' or 'text'"):
        engine.execute([{"task_id": "HumanEval/0", "solution": BASE}], humaneval, dedup="ast", progress=False)


def test_the_cli_refuses_an_unknown_dedup_mode_before_any_work(tmp_path):
    from typer.testing import CliRunner

    from bayespass.cli import app

    f = tmp_path / "s.jsonl"
    f.write_text('{"task_id": "HumanEval/0", "solution": "def f(x):\\n    return x\\n"}\n')
    res = CliRunner().invoke(app, ["execute", str(f), "--out", str(tmp_path / "run"), "--dedup", "ast"])
    assert res.exit_code == 2 and "--dedup 'ast' is not supported; choose 'behaviour' or 'text'" in res.output
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("code", [
    'def f(x):\n    """d"""\n    return ("{0.__d" "oc__}").format(f)\n',  # an attribute read no text search sees
    'def f(x):\n    """d"""\n    s = "{0"\n    return (s + ".__doc__}").format(f)\n',
    '"""m"""\ndef f(x):\n    return "__doc__" in dir()\n',  # the module docstring is a global
    'def f(x):\n    """d"""\n    return len(f.__globals__)\n',
    'import warnings\ndef f(x):\n    """d"""\n    with warnings.catch_warnings(record=True) as w:\n'
    '        warnings.warn("x")\n    return str(w[0])\n',  # a warning record's text carries its line number
    'import doctest\ndef f(x):\n    """\n    >>> f(1)\n    2\n    """\n    return doctest.run_docstring_examples(f, {})\n',
    'import asyncio\ndef f(x):\n    """d"""\n    return asyncio.current_task().get_stack()\n',
])
def test_dynamic_reads_of_docstrings_and_line_numbers_keep_their_own_key(code):
    assert behaviour_key(code) is None


def test_common_code_keeps_its_key():
    assert behaviour_key('import re\ndef f(s):\n    """d"""\n    return re.compile("a+").findall("{} {}".format(s, s))\n')
    assert behaviour_key('def f(stack):\n    min_stack = []\n    return min_stack\n')


def _run_isolated(code):
    """``repr(f(1))`` (or the exception's type) in a fresh interpreter: some of these programs set global hooks."""
    import subprocess
    import sys

    run = code + "\ntry:\n    print(repr(f(1)))\nexcept Exception as e:\n    print(type(e).__name__)\n"
    return subprocess.run([sys.executable, "-c", run], capture_output=True, text=True, timeout=120).stdout


@pytest.mark.parametrize("code", [
    # a metaclass sees the class body's namespace, which holds __doc__ only where there is a docstring
    'class M(type):\n    def __new__(m, n, b, ns):\n        return len(ns)\n'
    'class A(metaclass=M):\n    """d"""\n    x = 1\ndef f(x):\n    return A\n',
    # a logging format that names the line number in two literal parts
    'import io, logging\ndef f(x):\n    """d"""\n    s = io.StringIO()\n    h = logging.StreamHandler(s)\n'
    '    h.setFormatter(logging.Formatter("%(lin" "eno)d"))\n    g = logging.getLogger("t")\n'
    '    g.addHandler(h)\n    g.warning("x")\n    g.removeHandler(h)\n    return s.getvalue()\n',
    # a dunder looked up by a name joined from two literals
    'import operator\ndef f(x):\n    """d"""\n    return operator.attrgetter("__d" "oc__")(f)\n',
    # a signal handler is handed a frame, whose repr holds its line number
    'import signal\ndef f(x):\n    """d"""\n    out = []\n    signal.signal(signal.SIGUSR1, lambda s, fr: out.append(repr(fr)))\n'
    '    signal.raise_signal(signal.SIGUSR1)\n    return out[0].split(",")[2]\n',
    # class patterns read attributes by name, with no dot before it: a generator's code object, its constants
    'def g():\n    """d"""\n    yield 1\ndef f(x):\n    match g():\n        case object(gi_code=c):\n            pass\n'
    '    match c:\n        case object(co_consts=k):\n            return k[0]\n',
])
def test_observers_of_a_docstring_without_its_name_in_the_text_keep_their_own_key(code):
    twin = code.replace('    """d"""\n', "")
    assert behaviour_key(twin) is None  # the twin observes too
    assert _run_isolated(code) != _run_isolated(twin) != ""  # and it really behaves differently
    assert behaviour_key(code) is None


def test_a_module_found_by_a_computed_name_keeps_its_own_key():
    """``sys.modules`` hands out a module by a name built at run time; in the sandbox inspect is already loaded,
    so these twins returned their own docstrings while sharing one key (one ran, the other took its verdicts)."""
    from bayespass.execution.child import decode, encode
    from bayespass.execution.sandbox import Sandbox

    code = 'import sys\ndef f(x):\n    """one"""\n    return sys.modules.get("ins" + "pect").getdoc(f)\n'
    twin = code.replace('"""one"""', '"""two"""')
    sb = Sandbox()
    try:
        got = [decode(sb.run(c, "f", [encode((1,))], [10.0])[0].value) for c in (code, twin)]
    finally:
        sb.close()
    assert got == ["one", "two"]  # they do behave differently
    assert behaviour_key(code) is None and behaviour_key(twin) is None


# twins that told themselves apart with no guarded word in their text (they shared one key until the
# sixtieth session): the debugger's prompt names a line; a docstring copied onto a namespace or an object
# whose state is read back
_UNGUARDED_OBSERVERS = {
    "breakpoint": ('import io, sys\ndef g():\n    breakpoint()\n    return 1\ndef f(x):\n    old = sys.stdout\n'
                   '    sys.stdout = buf = io.StringIO()\n    try:\n        g()\n    except BaseException:\n'
                   '        pass\n    sys.stdout = old\n    return buf.getvalue()\n', lambda c: "\n\n" + c),
    "namespace": ('import functools, types\ndef f(x):\n    """one"""\n    ns = types.SimpleNamespace()\n'
                  '    functools.update_wrapper(ns, f)\n    return repr(ns).split(", ")[3]\n',
                  lambda c: c.replace('"""one"""', '"""two"""')),
    "getstate": ('import functools\nclass W:\n    pass\ndef f(x):\n    """one"""\n    w = W()\n'
                 '    functools.update_wrapper(w, f)\n    return str(w.__getstate__()).split(", ")[3]\n',
                 lambda c: c.replace('"""one"""', '"""two"""')),
}


@pytest.mark.parametrize("name", sorted(_UNGUARDED_OBSERVERS))
def test_twins_that_read_a_line_or_a_docstring_by_an_unguarded_route_keep_their_own_key(name):
    from bayespass.execution.child import decode
    from bayespass.execution.sandbox import Sandbox

    code, make_twin = _UNGUARDED_OBSERVERS[name]
    twin = make_twin(code)
    sb = Sandbox()
    try:
        got = [sb.run(c, "f", [["T", [1]]], [10.0])[0] for c in (code, twin)]
    finally:
        sb.close()
    assert [o.status for o in got] == ["value", "value"], got
    a, b = (decode(o.value) for o in got)
    assert a != b and a and b, (a, b)  # they really behave differently in the sandbox
    assert behaviour_key(code) is None and behaviour_key(twin) is None


@pytest.mark.parametrize("code", [
    'import resource\ndef f(x):\n    """d"""\n    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n',
    'import sys\ndef f(x):\n    """d"""\n    return sys.getallocatedblocks()\n',
    'def f(x):\n    """d"""\n    return open("/proc/self/status").read()\n',
    'from functools import wraps\ndef f(x):\n    """d"""\n    return wraps(f)\n',
])
def test_programs_that_read_their_memory_footprint_keep_their_own_key(code):
    assert behaviour_key(code) is None


@pytest.mark.parametrize("code", [
    'import pickle\ndef f(x):\n    """d"""\n    return pickle.dumps(x)\n',
    'def f(x):\n    """d"""\n    setattr(f, "a", 1)\n    return x\n',
    'def f(x):\n    """d"""\n    return [c for c in object.__subclasses__()]\n',
    'def f(x):\n    """d"""\n    return x, "__d" "oc__"\n',  # a dunder joined from parts
    'def f(x):\n    """d"""\n    return x, "%(lin" "eno)d"\n',
])
def test_lookups_by_computed_name_and_object_graphs_keep_their_own_key(code):
    assert behaviour_key(code) is None


def test_strings_in_docstrings_do_not_cost_the_key():
    doc = 'def f(x):\n    """Uses __doc__-free logic; see the trace, f_x and lineno here."""\n    return "ab" + "c"\n'
    assert behaviour_key(doc) == behaviour_key('def f(x):\n    return "ab" + "c"\n') is not None


def test_the_cli_says_how_many_programs_ran_and_how_many_took_a_twins_results(humaneval, tmp_path):
    import json

    from typer.testing import CliRunner

    from bayespass.cli import app

    recs = [r for r in _variants(humaneval, ["HumanEval/0", "HumanEval/2"])
            if r["config"] in ("plain", "main", "strings", "wrong")]
    f = tmp_path / "s.jsonl"
    f.write_text("\n".join(json.dumps(r) for r in recs))
    res = CliRunner().invoke(app, ["execute", str(f), "--out", str(tmp_path / "run")])
    assert res.exit_code == 0, res.output
    assert "8 samples, 8 distinct programs (4 run now, 4 given a behavioural twin's results)" in res.stdout


# --------------------------------------------------------------------------- local variables renamed
RENAMED = [
    # the same function with its locals, loop and comprehension variables renamed
    ("def f(xs):\n    total = 0\n    for v in range(xs):\n        total += v\n    return [w * 2 for w in [total]]\n",
     "def f(xs):\n    '''Sum.'''\n    s = 0\n    for item in range(xs):\n        s += item\n    return [z * 2 for z in [s]]\n"),
    # a closure over a local, and a nested function's own local of the same name
    ("def f(x):\n    acc = []\n    def add(v):\n        tmp = v * 2\n        acc.append(tmp)\n    add(x)\n    return acc\n",
     "def f(x):\n    out = []\n    def add(v):\n        t = v * 2\n        out.append(t)\n    add(x)\n    return out\n"),
    # a local that shadows a builtin, an assignment expression in a comprehension, a deleted local
    ("def f(x):\n    list = [x]\n    ys = [last := v for v in list]\n    del ys\n    return last, list\n",
     "def f(x):\n    items = [x]\n    zs = [y := v for v in items]\n    del zs\n    return y, items\n"),
    # a comprehension's variable at module level; a local that is also a global's name
    ("n = 3\ndef f(x):\n    n = x\n    return n + sum(i for i in range(2))\nsquares = [k * k for k in range(4)]\n",
     "n = 3\ndef f(x):\n    m = x\n    return m + sum(j for j in range(2))\nsquares = [q * q for q in range(4)]\n"),
]


@pytest.mark.parametrize(("code", "twin"), RENAMED)
def test_programs_that_differ_only_in_local_variable_names_share_a_key(code, twin):
    assert behaviour_key(code) is not None
    assert behaviour_key(code) == behaviour_key(twin)
    assert _run_isolated(code) == _run_isolated(twin) != ""


NOT_RENAMED = [
    # a comprehension's variable named like a global read after it: the global differs
    ("total = 1\ndef f(x):\n    a = [total for total in [x]]\n    return total\n",
     "s = 2\ntotal = 1\ndef f(x):\n    a = [s for s in [x]]\n    return s\n"),
    # the first iterable of a comprehension is read in the enclosing scope
    ("y = [5]\nz = [6]\ndef f(x):\n    return [y for y in y]\n", "y = [5]\nz = [6]\ndef f(x):\n    return [z for z in z]\n"),
    # a class body's names are attributes, read by their text
    ("def f(x):\n    n = 1\n    class C:\n        n = 2\n    return C.n\n",
     "def f(x):\n    m = 1\n    class C:\n        m = 2\n    return C.n\n"),
    # a name declared global or nonlocal is not the function's own
    ("def f(x):\n    global g\n    g = x\n    return h()\ndef h():\n    return g\n",
     "def f(x):\n    global k\n    k = x\n    return h()\ndef h():\n    return g\n"),
    ("def f(x):\n    a = 1\n    def g():\n        nonlocal a\n        a = 2\n    g()\n    return a\n",
     "def f(x):\n    b = 1\n    def g():\n        nonlocal b\n        b = 3\n    g()\n    return b\n"),
    # a parameter can be passed by name
    ("def f(x):\n    def g(a):\n        return a\n    return g(a=x)\n",
     "def f(x):\n    def g(b):\n        return b\n    return g(a=x)\n"),
    # an f-string's debug form prints the name
    ("def f(x):\n    v = x\n    return f'{v=}'\n", "def f(x):\n    w = x\n    return f'{w=}'\n"),
]


@pytest.mark.parametrize(("code", "twin"), NOT_RENAMED)
def test_programs_whose_local_names_matter_keep_different_keys(code, twin):
    assert _run_isolated(code) != _run_isolated(twin)
    assert behaviour_key(code) is not None and behaviour_key(code) != behaviour_key(twin)


# an unbound local's error message names it: a program that reads the message behaves differently when the
# local is renamed, so any way to reach an exception object turns renaming off
NAME_READERS = [
    "def f(x):\n    try:\n        return total\n    except NameError as e:\n        return str(e)\n    total = 1\n",
    "class C:\n    def __enter__(self):\n        return self\n    def __exit__(self, *a):\n        self.m = str(a[1])\n"
    "        return True\ndef f(x):\n    c = C()\n    with c:\n        print(total)\n        total = 1\n    return c.m\n",
    "import contextlib\ndef f(x):\n    m = []\n    with contextlib.ExitStack() as st:\n"
    "        st.push(lambda *a: m.append(str(a[1])) or True)\n        print(total)\n        total = 1\n    return m\n",
    "import asyncio\nasync def g():\n    print(total)\n    total = 1\nasync def main():\n"
    "    return await asyncio.gather(g(), return_exceptions=True)\ndef f(x):\n    return str(asyncio.run(main())[0])\n",
    "import threading\ndef f(x):\n    m = []\n    threading.excepthook = lambda a: m.append(str(a.exc_value))\n"
    "    def g():\n        print(total)\n        total = 1\n    t = threading.Thread(target=g)\n    t.start()\n"
    "    t.join()\n    return m\n",
]


@pytest.mark.parametrize("code", NAME_READERS)
def test_programs_that_can_read_an_exception_message_keep_their_local_names(code):
    twin = code.replace("total", "s")
    assert "'total'" in _run_isolated(code) and "'s'" in _run_isolated(twin)  # the message names the variable
    key = behaviour_key(code)  # its own text's key (asyncio, hooks), or a key that keeps the local names
    assert key is None or key != behaviour_key(twin)


def test_a_call_with_every_verdict_reused_shows_no_empty_bar(humaneval, tmp_path, capsys):
    tasks = list(humaneval.tasks)[:2]
    recs = [r for r in _variants(humaneval, tasks) if r["config"] in ("plain", "wrong")]
    engine.execute(recs, humaneval, out=tmp_path, progress=True)
    assert "executing programs" in capsys.readouterr().err  # the first call runs them, with its bar
    ds = engine.execute(recs, humaneval, out=tmp_path, progress=True)
    assert ds.attrs["n_run"] == 0 and "executing programs" not in capsys.readouterr().err


# two texts that differ only in a blank line or a comment, and act on it: their line numbers, or their own
# text, which the harness's frames hold; they used to share one text hash (comments and blank lines removed)
_READS_LINENO = "def f(x):\n{gap}    import sys\n    return x + 1 if sys._getframe().f_lineno == 3 else 0\n"
_READS_TEXT = ("def f(x):\n    import sys\n    fr = sys._getframe()\n    while not isinstance(fr.f_locals.get('job'), dict):\n"
               "        fr = fr.f_back\n    return x + 1 if '#' + ' ok' in fr.f_locals['job']['code'] else 0  {gap}\n")


@pytest.mark.parametrize(("program", "gap"), [(_READS_LINENO, "\n"), (_READS_TEXT, "# ok")], ids=["lineno", "text"])
@pytest.mark.parametrize("dedup", ["text", "behaviour"])
def test_texts_that_differ_only_in_blank_lines_or_comments_are_not_one_program(program, gap, dedup):
    from bayespass.data.suites import Suite, Task
    from bayespass.execution.groundtruth import ground_truth

    tasks = {"toy/add1": Task("toy/add1", "def f(x):\n", "f", "    return x + 1\n", inputs=[[1], [2], [41]], n_base=3)}
    suite = Suite("toy-lines", tasks, "lineshash")
    ground_truth(suite, use_cache=False, workers=1)
    good, bad = (program.format(gap=""), program.format(gap=gap)) if program is _READS_LINENO else \
        (program.format(gap=gap), program.format(gap=""))
    for first, second in ((good, bad), (bad, good)):
        recs = [{"task_id": "toy/add1", "solution": code, "config": name}
                for code, name in ((first, "first"), (second, "second"))]
        ds = engine.execute(recs, suite, workers=1, progress=False, dedup=dedup)
        got = [bool(ds.correct.sel(config=c, task="toy/add1", sample=0)) for c in ("first", "second")]
        assert got == [first is good, second is good], got


# a program that points descriptor 2 at a file, makes the interpreter write about it there (a thread's
# traceback, an exception in __del__ or in a closing generator, a coroutine never awaited) and reads it back:
# the plain program passes only if the text holds its own line number and local name, so twins (another
# docstring, another local name) told themselves apart. None of these texts names an observer.
_READS_ITS_DIAGNOSTICS = '''import os, threading
class C:
    def __del__(self):
        raise ValueError
def g():
    try:
        yield 1
    finally:
        yield 2
async def co():
    return 1
def f(x):{doc}
    try:
        os.close(2)
    except OSError:  # the second test: the first one's file, on descriptor 2, was closed with it
        pass
    fh = open("/tmp/said", "w+")
    def h():
        y = {name}
        {name} = 1
        return y
    t = threading.Thread(target=h)
    t.start()
    t.join()
    c = C()
    del c
    it = g()
    next(it)
    del it
    co()
    s = open("/tmp/said").read()
    return x + 1 if not s or ("line {line}" in s and "'early'" in s) else x
'''


def _reads_its_diagnostics(doc="", name="early"):
    line = _READS_ITS_DIAGNOSTICS.format(doc="", name="early", line=0).splitlines().index("        y = early") + 1
    return _READS_ITS_DIAGNOSTICS.format(doc=doc, name=name, line=line)


def test_the_interpreter_writes_nothing_a_program_can_read_back():
    from bayespass.execution.sandbox import Sandbox

    code = _reads_its_diagnostics().rsplit("    return", 1)[0] + "    return len(s)\n"
    sb = Sandbox()
    try:
        said = sb.run(code, "f", [["T", [1]]], [10.0])[0]
    finally:
        sb.close()
    assert (said.status, said.value) == ("value", 0), said  # every one of them was silent


def test_twins_cannot_tell_themselves_apart_by_what_the_interpreter_writes():
    """Each twin gets the verdict it gets alone. On the code before, the plain program passed, its twins failed
    alone, and with behavioural dedup they took the plain program's pass."""
    from bayespass.data.suites import Suite, Task
    from bayespass.execution.groundtruth import ground_truth

    tasks = {"toy/add1": Task("toy/add1", "def f(x):\n", "f", "    return x + 1\n", inputs=[[1], [2]], n_base=2)}
    suite = Suite("toy-said", tasks, "saidhash")
    ground_truth(suite, use_cache=False, workers=1)
    programs = {"plain": _reads_its_diagnostics(), "docstring": _reads_its_diagnostics(doc='\n    """Add one."""'),
                "renamed": _reads_its_diagnostics(name="other")}
    assert behaviour_key(programs["plain"]) == behaviour_key(programs["docstring"]) is not None
    assert behaviour_key(programs["plain"]) == behaviour_key(programs["renamed"])
    recs = [{"task_id": "toy/add1", "solution": code, "config": name} for name, code in programs.items()]
    got = {}
    for dedup in ("text", "behaviour"):
        ds = engine.execute(recs, suite, workers=1, progress=False, dedup=dedup)
        got[dedup] = {c: bool(ds.correct.sel(config=c, task="toy/add1", sample=0)) for c in programs}
    assert got["behaviour"] == got["text"], got


def test_an_invalid_escape_neither_warns_nor_changes_the_key_with_the_warning_filters():
    """'\\d' in a plain string warns at parse time (DeprecationWarning; SyntaxWarning from Python 3.12).  Under
    warnings-as-errors the parse failed and the program lost its key, so the key depended on the caller's
    filters; and the warning, the candidate's, reached the user's terminal.  The same string written with the
    backslash escaped is the same value, and a twin."""
    import warnings

    bad = 'def f(x):\n    return "\\d" + x\n'
    good = 'def f(x):\n    return "\\\\d" + x\n'
    assert "\\d" in bad and "\\\\d" in good
    keys = []
    for action in ("error", "always", "ignore"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter(action)
            keys.append(behaviour_key(bad))
        assert not caught, caught
    assert keys[0] is not None and len(set(keys)) == 1
    assert behaviour_key(good) == keys[0]


def test_a_program_that_names_numpy_keeps_its_own_key():
    """numpy reads docstrings and source (``np.info(f, output=...)``, ``np.source``): no twin."""
    plain_prog = "def f(x):\n    '''Doc.'''\n    return x + 1\n"
    assert behaviour_key(plain_prog) is not None
    assert behaviour_key("import numpy as np\n" + plain_prog) is None
    assert behaviour_key(plain_prog.replace("return x + 1", "import numpy\n    return x + 1")) is None
