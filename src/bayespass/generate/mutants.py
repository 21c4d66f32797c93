"""AST mutants (wrong programs) and behaviour-preserving variants of a canonical solution."""

from __future__ import annotations

import ast
import copy
import random

from .._source import parse_program

__all__ = ["mutants", "variants"]

_CMP_SWAP = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
             ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In}
_BIN_SWAP = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Add, ast.FloorDiv: ast.Mod, ast.Mod: ast.FloorDiv,
             ast.Div: ast.Mult}


def _sites(tree: ast.AST, entry: str):
    """(node index, kind) pairs of single-site mutations inside the entry-point function."""
    fn = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == entry), None)
    if fn is None:
        return [], None
    nodes = list(ast.walk(fn))
    sites = []
    for i, node in enumerate(nodes):
        if isinstance(node, ast.Compare) and type(node.ops[0]) in _CMP_SWAP:
            sites.append((i, "cmp"))
        elif isinstance(node, ast.BinOp) and type(node.op) in _BIN_SWAP:
            sites.append((i, "binop"))
        elif isinstance(node, ast.Constant) and type(node.value) is int:
            sites += [(i, "const+1"), (i, "const-1")]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range" and node.args:
            sites.append((i, "range"))
        elif isinstance(node, ast.If) and node is not fn:
            sites.append((i, "drop_if"))
        elif isinstance(node, ast.BoolOp):
            sites.append((i, "boolop"))
        elif isinstance(node, ast.Return) and node.value is not None and fn.args.args:
            sites.append((i, "return_arg"))
    return sites, fn


def _apply(tree, entry, index, kind):
    tree = copy.deepcopy(tree)
    _, fn = _sites(tree, entry)
    node = list(ast.walk(fn))[index]
    if kind == "cmp":
        node.ops[0] = _CMP_SWAP[type(node.ops[0])]()
    elif kind == "binop":
        node.op = _BIN_SWAP[type(node.op)]()
    elif kind in ("const+1", "const-1"):
        node.value = node.value + (1 if kind == "const+1" else -1)
    elif kind == "range":
        last = node.args[-1] if len(node.args) <= 2 else node.args[1]
        pos = node.args.index(last)
        node.args[pos] = ast.BinOp(left=last, op=ast.Add(), right=ast.Constant(1))
    elif kind == "drop_if":
        node.test = ast.Constant(False)
    elif kind == "boolop":
        node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
    elif kind == "return_arg":
        node.value = ast.Name(id=fn.args.args[0].arg, ctx=ast.Load())
    return ast.unparse(ast.fix_missing_locations(tree))


def mutants(program: str, entry: str, *, max_n: int = 30, seed: int = 0) -> list[str]:
    """Distinct single-site mutants of ``program`` (a random subset of at most ``max_n``)."""
    try:
        tree = parse_program(program)
    except SyntaxError:
        return []
    sites, _ = _sites(tree, entry)
    random.Random(seed).shuffle(sites)
    base = ast.unparse(tree)
    out, seen = [], {base}
    for index, kind in sites:
        try:
            code = _apply(tree, entry, index, kind)
        except (ValueError, TypeError, AttributeError, IndexError):
            continue
        if code not in seen:
            seen.add(code)
            out.append(code)
        if len(out) >= max_n:
            break
    out.append(base.replace(f"def {entry}(", f"def __orig_{entry}(", 1)
               + f"\n\ndef {entry}(*args, **kwargs):\n    return None\n")
    return out


class _Rename(ast.NodeTransformer):
    def __init__(self, names):
        self.names = names

    def visit_Name(self, node):
        if node.id in self.names:
            node.id = self.names[node.id]
        return node


def variants(program: str, entry: str) -> list[str]:
    """Texts that differ from ``program`` but not in behaviour (to be verified by execution)."""
    tree = parse_program(program)
    base = ast.unparse(tree)
    out = [program, base, "# generated solution\n" + program.replace("\n", "\n\n", 1)]
    fn = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == entry), None)
    if fn is not None:
        params = {a.arg for a in fn.args.args}
        stores = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        names = {s: f"{s}_v" for s in stores - params}
        if names:
            out.append(ast.unparse(_Rename(names).visit(copy.deepcopy(tree))))
        t2 = copy.deepcopy(tree)
        f2 = next(n for n in ast.walk(t2) if isinstance(n, ast.FunctionDef) and n.name == entry)
        f2.body.insert(0, ast.parse("_unused_marker = None").body[0])
        out.append(ast.unparse(ast.fix_missing_locations(t2)))
    return list(dict.fromkeys(out))
