"""The shape of the code base: no import cycles, no test helpers in production, short functions,
the public API exported and annotated."""

import ast
import inspect
from collections import defaultdict
from pathlib import Path

import pytest

import bayespass as bp

SRC = Path(__file__).resolve().parents[1] / "src" / "bayespass"
MAX_LINES = 60


def _modules() -> dict[str, Path]:
    mods = {}
    for p in SRC.rglob("*.py"):
        parts = list(p.relative_to(SRC.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = p
    return mods


def _import_graph() -> dict[str, set[str]]:
    """Module -> bayespass modules it imports, at any nesting level (also inside functions)."""
    mods = _modules()
    edges: dict[str, set[str]] = defaultdict(set)
    for mod, path in mods.items():
        package = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = package[:len(package) - node.level + 1] if node.level else []
                target = ".".join(base + ([node.module] if node.module else [])) if node.level else node.module
                if not target or not target.startswith("bayespass"):
                    continue
                for alias in node.names:
                    sub = f"{target}.{alias.name}"
                    edges[mod].add(sub if sub in mods else target)
            elif isinstance(node, ast.Import):
                edges[mod].update(a.name for a in node.names if a.name.startswith("bayespass"))
    return {m: {t for t in ts if t in mods and t != m} for m, ts in edges.items()}


def test_the_module_import_graph_is_acyclic():
    graph = _import_graph()
    state, stack, cycles = {}, [], []

    def visit(u):
        state[u] = 1
        stack.append(u)
        for v in sorted(graph.get(u, ())):
            if state.get(v) == 1:
                cycles.append(" -> ".join(stack[stack.index(v):] + [v]))
            elif v not in state:
                visit(v)
        stack.pop()
        state[u] = 2

    for mod in sorted(_modules()):
        if mod not in state:
            visit(mod)
    assert cycles == []


def test_production_code_does_not_import_the_test_helpers():
    graph = _import_graph()
    users = sorted(m for m, ts in graph.items() if "bayespass.testing" in ts and m != "bayespass")
    assert users == []


def _body_lines(node) -> int:
    """Lines of a function without its docstring."""
    total = node.end_lineno - node.lineno + 1
    first = node.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        total -= first.end_lineno - first.lineno + 1
    return total


def test_no_function_is_longer_than_60_lines():
    long = []
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = _body_lines(node)
                if n > MAX_LINES:
                    long.append(f"{path.relative_to(SRC)}:{node.lineno} {node.name} ({n} lines)")
    assert long == [], "functions over 60 lines (docstrings not counted):\n" + "\n".join(long)


@pytest.mark.parametrize("name", ["run", "load_run", "gate", "reliability", "incoherence", "metric_table",
                                  "execute", "fit", "stack", "passk_curve", "load_suite"])
def test_public_api_is_exported(name):
    assert callable(getattr(bp, name))


def test_execute_has_its_real_signature():
    sig = inspect.signature(bp.execute)
    assert list(sig.parameters)[:2] == ["samples", "suite"] and "max_timeouts" in sig.parameters
    assert "Execute every sample" in (bp.execute.__doc__ or "")


def test_every_public_function_is_annotated():
    missing = []
    for name in bp.__all__:
        obj = getattr(bp, name)
        if inspect.isfunction(obj):
            sig = inspect.signature(obj)
            if sig.return_annotation is inspect.Signature.empty:
                missing.append(name)
    assert missing == []


def test_dir_lists_the_public_api_and_no_module_helpers():
    names = dir(bp)
    assert set(bp.__all__) <= set(names)
    assert not {"importlib", "TYPE_CHECKING", "annotations"} & set(names)
    import bayespass.stats.passk  # noqa: F401  (a subpackage once imported is listed, as Python lists it)

    assert "stats" in dir(bp)
