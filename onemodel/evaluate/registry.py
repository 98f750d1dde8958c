"""The evaluator's view of the operator table: the kernel serving ``(domain, op_type)`` at an
operator set version, and the kernels users register.

Built-in kernels attach to the definitions of the operator table (:mod:`onemodel.operators`):
a kernel serves the definition it is attached to and every later one until the next kernel
(ONNX Part 1, Clause 14.4). For a node whose model imports its domain at version ``v``, the
kernel with the greatest ``since <= v`` applies.

Kernel convention (every built-in kernel follows it, and so must a user kernel)::

    from onemodel.operators import kernel

    @kernel("Add", since=7)                 # the definitions of opset 7 and later
    def add(ctx, a, b):
        return np.add(a, b)

* called as ``fn(ctx, *inputs)``; ``inputs`` are numpy arrays, ``None`` for an unsupplied optional
  input (empty name, or a trailing input the node omits), a Python ``list`` for a sequence value,
  a ``dict`` for a map value; an optional-typed value is passed as its value or ``None``.
* ``ctx`` is a :class:`~onemodel.evaluate.context.Context`: ``ctx.attrs``, ``ctx.attr(name[,
  default])`` (without a default: the operator definition's), ``ctx.attr_bytes(name)``,
  ``ctx.opset``, ``ctx.node``, ``ctx.num_outputs``, ``ctx.run_graph(graph, inputs)``,
  ``ctx.output_used(i)``, ``ctx.path``.
* element types: numpy dtypes, ml_dtypes for bfloat16, float8, int4/uint4/int2/uint2, float4 and
  float6 (one element per byte, unpacked); a STRING tensor is an object array of ``str``.
* returns the outputs: a **tuple** with one entry per node output (``None`` for an output it
  does not compute; entries past the node's output count are ignored), or the value itself.
  For a node with exactly one output, a tuple is unpacked (its first entry is the value) and
  anything else -- a **list included** -- is the value (a list is a sequence value). For a node
  with several outputs, a list is accepted as one entry per output too, and a single value is
  the first output (the node's other outputs must then be unnamed). So: return a tuple for
  outputs, a list only for a sequence value. ``ctx.run_graph`` returns a tuple.
* optional trailing inputs: a node may omit trailing inputs. The runner passes ``None`` for
  them up to the kernel's number of positional parameters (after ``ctx``); a kernel taking
  ``*inputs`` gets only those the node lists (empty names as ``None``).
* numpy scalars returned are turned into 0-d arrays.
* a kernel never modifies its inputs in place (they may be read-only views of a mapped file,
  or values other nodes still read); sequences are returned as new lists.
* a kernel raises :class:`~onemodel.errors.UnsupportedError` for an attribute value or input
  type it does not implement, never an approximation (Clause 4.4).

User kernels (:func:`register_kernel`, :func:`op` with ``user=True``, or an operator declared with
:func:`onemodel.operators.register`) take precedence over the built-in kernels of every
version. Both are process-wide; a session's own kernels and operators (``Session(model,
kernels=..., operators=...)``) come before them, for that session only, and leave these tables
untouched.
"""

from __future__ import annotations

from typing import Callable

from ..ir.entries import normalize_domain
from ..ir.versioned import add as _add
from ..ir.versioned import pick as _pick
from ..operators import table
from ..operators.custom import user_kernel

Kernel = Callable[..., object]

#: (domain, op_type) -> sorted list of (since, kernel), for kernels registered by users; consulted
#: before the built-in ones.
_USER: dict[tuple[str, str], list[tuple[int, Kernel]]] = {}


def op(op_type: str, since: int | tuple[int, ...], domain: str = "", *, user: bool = True):
    """Decorator registering a user kernel for ``(domain, op_type)`` from opset ``since`` on
    (one version or a tuple of them), as :func:`register_kernel` does; built-in kernels attach
    with :func:`onemodel.operators.kernel` instead. ``user=False`` raises ValueError. Raises
    ValueError for a version below 1, TypeError when the function is not callable. Returns it
    unchanged."""
    if not user:
        raise ValueError("built-in kernels attach to the operator table with "
                         "onemodel.operators.kernel")
    versions = since if isinstance(since, (tuple, list)) else (since,)

    def decorate(fn: Kernel) -> Kernel:
        for v in versions:
            _add(_USER, domain, op_type, v, fn)
        return fn

    return decorate


def register_kernel(domain: str, op_type: str, since: int, fn: Kernel) -> None:
    """Register a user kernel for ``(domain, op_type)`` from opset version ``since`` on.

    User kernels override built-in kernels (of any version) for the same operator, and take
    precedence over a model-local function of the same name. ``fn`` follows the kernel convention
    of this module. A second registration of the same ``(domain, op_type, since)`` replaces the
    first. Raises ValueError for ``since < 1``, TypeError when ``fn`` is not callable.
    """
    _add(_USER, domain, op_type, since, fn)


def unregister_kernel(domain: str, op_type: str, since: int | None = None) -> None:
    """Remove user kernels of ``(domain, op_type)``: the one for ``since``, or all when None."""
    key = (normalize_domain(domain), op_type)
    if key not in _USER:
        return
    if since is None:
        del _USER[key]
    else:
        _USER[key] = [e for e in _USER[key] if e[0] != since]
        if not _USER[key]:
            del _USER[key]


def load_builtin() -> None:
    """Import every built-in kernel module (lookups import only the family they need)."""
    table.load_all("kernel")


def lookup(domain: str, op_type: str, version: int, *, builtin: bool = True,
           user: bool = True) -> Kernel | None:
    """The kernel for ``(domain, op_type)`` at opset ``version``, or ``None``.

    A user kernel with ``since <= version`` wins, then the kernel of a declared operator
    (:mod:`onemodel.operators.custom`); otherwise the built-in kernel with the greatest
    ``since <= version``.
    """
    key = (normalize_domain(domain), op_type)
    if user:
        fn = _pick(_USER[key], version) if key in _USER else None
        if fn is None:
            fn = user_kernel(key[0], op_type, version)
        if fn is not None:
            return fn
    if builtin:
        return table.implementation("kernel", key[0], op_type, version)
    return None


def operators(domain: str | None = None) -> dict[tuple[str, str], list[int]]:
    """Every registered operator: ``(domain, op_type) -> [since versions]`` (built-in and user)."""
    out: dict[tuple[str, str], list[int]] = {}
    for attached in (table.attachments("kernel"), _USER):
        for key, entries in attached.items():
            if domain is None or key[0] == normalize_domain(domain):
                out.setdefault(key, [])
                out[key] = sorted(set(out[key]) | {s for s, _ in entries})
    return out
