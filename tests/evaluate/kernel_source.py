"""What the built-in kernels' source says about attribute defaults, read with ``ast``.

For a kernel function, :func:`attribute_reads` lists every ``ctx.attr(name[, default])`` (and
``attrs.get(name[, default])`` on a node's attribute dict) in the function and in every
function of the kernel modules it calls, directly or through other helpers: the attribute name
and the default the call passes, evaluated at one operator set version (a default may depend on
``ctx.opset``: ``2.0 if ctx.opset < 2 else 2``).
"""

from __future__ import annotations

import ast
import math
from functools import lru_cache
from pathlib import Path

import onemodel.evaluate.kernels as _pkg

KERNELS = Path(_pkg.__file__).parent
PACKAGE = "onemodel.evaluate.kernels"

#: ``attr`` was called without a default
NO_DEFAULT = "<no default>"
#: the default is an expression this reader does not evaluate
UNKNOWN = "<not a literal>"


class _Module:
    def __init__(self, name: str):
        self.name = name
        self.tree = ast.parse((KERNELS / f"{name}.py").read_text(encoding="utf-8"))
        self.defs: dict[str, ast.AST] = {}
        self.imports: dict[str, tuple[str, str]] = {}   # local name -> (module, name)
        for node in self.tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                self.defs[node.name] = node
            elif isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
                for a in node.names:
                    self.imports[a.asname or a.name] = (node.module, a.name)


@lru_cache(maxsize=None)
def _module(name: str) -> _Module:
    return _Module(name)


def _resolve(mod: _Module, name: str):
    """(module, def node) that ``name`` refers to in ``mod``, if a kernel-package function."""
    if name in mod.defs:
        return mod, mod.defs[name]
    if name in mod.imports:
        other, real = mod.imports[name]
        if (KERNELS / f"{other}.py").exists():
            m = _module(other)
            if real in m.defs:
                return m, m.defs[real]
    return None


def _value(node, opset: int):
    """The value of a default expression at ``opset``, or UNKNOWN."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        v = _value(node.operand, opset)
        return -v if isinstance(v, (int, float)) else UNKNOWN
    if isinstance(node, (ast.List, ast.Tuple)):
        items = [_value(e, opset) for e in node.elts]
        return UNKNOWN if UNKNOWN in items else items
    if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
            and node.value.id == "math" and node.attr in ("inf", "pi", "e")):
        return getattr(math, node.attr)
    if isinstance(node, ast.IfExp):
        test = _opset_test(node.test, opset)
        if test is None:
            return UNKNOWN
        return _value(node.body if test else node.orelse, opset)
    return UNKNOWN


def _opset_test(node, opset: int):
    """``ctx.opset <op> N`` evaluated at ``opset``; None for any other test."""
    if not (isinstance(node, ast.Compare) and len(node.ops) == 1
            and isinstance(node.left, ast.Attribute) and node.left.attr == "opset"
            and isinstance(node.comparators[0], ast.Constant)):
        return None
    n = node.comparators[0].value
    return {ast.Lt: opset < n, ast.LtE: opset <= n, ast.Gt: opset > n, ast.GtE: opset >= n,
            ast.Eq: opset == n, ast.NotEq: opset != n}.get(type(node.ops[0]))


def _is_attr_read(call: ast.Call) -> str | None:
    """``"attr"`` for ``ctx.attr(...)``, ``"get"`` for ``attrs.get(...)`` / ``ctx.attrs.get``
    (the node's attribute dict: no definition default), None for any other call."""
    f = call.func
    if not isinstance(f, ast.Attribute) or not call.args:
        return None
    if f.attr == "attr":
        return "attr"
    target = f.value
    name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", None)
    return "get" if f.attr == "get" and name == "attrs" else None


def _nodes(stmts, opset: int):
    """The nodes of a statement list that run at ``opset``: an ``if ctx.opset ...:`` statement
    contributes only its branch taken, and a taken branch that returns ends the list."""
    for st in stmts:
        if isinstance(st, ast.If):
            taken = _opset_test(st.test, opset)
            if taken is not None:
                branch = st.body if taken else st.orelse
                yield from _nodes(branch, opset)
                if branch and isinstance(branch[-1], (ast.Return, ast.Raise)):
                    return
                continue
        if isinstance(st, (ast.FunctionDef, ast.ClassDef)):
            yield from _nodes(st.body, opset)
            continue
        yield from _walk(st, opset)


def _walk(node, opset: int):
    """``ast.walk`` that leaves out what does not run at ``opset``: the arm of ``a if
    ctx.opset ... else b`` not taken, and what ``ctx.opset ... or x`` / ``and x`` skips."""
    yield node
    if isinstance(node, ast.IfExp):
        taken = _opset_test(node.test, opset)
        if taken is not None:
            yield from _walk(node.body if taken else node.orelse, opset)
            return
    if isinstance(node, ast.BoolOp):
        taken = _opset_test(node.values[0], opset)
        if taken is not None and taken == isinstance(node.op, ast.Or):
            return
    for child in ast.iter_child_nodes(node):
        yield from _walk(child, opset)


def attribute_reads(module: str, function: str, opset: int) -> list[tuple[str, object, str, str]]:
    """Every attribute read reachable from ``module.function`` at operator set ``opset``: (name,
    default, ``module.py:line``, ``"attr"`` or ``"get"``). The default is :data:`NO_DEFAULT`
    when ``ctx.attr`` is given none (it then takes the definition's), None when ``attrs.get``
    is given none, :data:`UNKNOWN` when it is not a literal; reads with a computed name are
    left out. Branches of ``if ctx.opset ...`` statements not taken at ``opset`` are left out
    too."""
    found, seen = [], set()
    start = _resolve(_module(module), function)
    todo = [start] if start else []
    while todo:
        mod, fn = todo.pop()
        if (mod.name, fn.name) in seen:
            continue
        seen.add((mod.name, fn.name))
        for node in _nodes(fn.body, opset):
            if not isinstance(node, ast.Call):
                continue
            kind = _is_attr_read(node)
            if kind:
                first = node.args[0]
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    default = (_value(node.args[1], opset) if len(node.args) > 1
                               else NO_DEFAULT if kind == "attr" else None)
                    found.append((first.value, default, f"{mod.name}.py:{node.lineno}", kind))
            callee = node.func.id if isinstance(node.func, ast.Name) else None
            if callee:
                target = _resolve(mod, callee)
                if target:
                    todo.append(target)
    return found
