"""Graph inputs: checking the caller's values against the declared types, and random inputs."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InvalidModelError, UnsupportedError
from ..ir.dtypes import INFO, DataType, name_of
from ..ir.model import Graph, Model
from ..ir.tensor import element_count
from ..ir.types import Type
from .context import decode_strings

#: Element count of one random input tensor must stay below this (a guard against huge ``dims``).
MAX_RANDOM_ELEMENTS = 1 << 28


def _dtype_of(code: int, where: str) -> np.dtype:
    info = INFO.get(code)
    if info is None:
        raise UnsupportedError(f"element type {code} has no values", path=where)
    return info.dtype


def _check_tensor(name: str, value, ttype, where: str):
    code = ttype.elem_type or 0
    want = _dtype_of(code, where) if code else None
    if not isinstance(value, np.ndarray):
        if want is not None and code != DataType.STRING:
            try:
                value = np.asarray(value, dtype=want)
            except (TypeError, ValueError) as e:
                raise InvalidModelError(f"input '{name}' cannot be read as {name_of(code)}: {e}",
                                        path=where) from None
        else:
            value = np.asarray(value, dtype=object if code == DataType.STRING else None)
    if want is not None:
        if code == DataType.STRING:
            if value.dtype.kind not in "OUS":
                raise InvalidModelError(f"input '{name}' has dtype {value.dtype}; the graph "
                                        f"declares string", path=where)
            # inside the evaluator a STRING tensor is an object array of str
            value = decode_strings(value.astype(object) if value.dtype.kind in "US" else value)
        elif value.dtype != want:
            raise InvalidModelError(f"input '{name}' has dtype {value.dtype}; the graph declares "
                                    f"{name_of(code)}", path=where)
    shape = ttype.shape
    if shape is not None:
        dims = shape.values
        if len(dims) != value.ndim:
            raise InvalidModelError(f"input '{name}' has rank {value.ndim}; the graph declares "
                                    f"{len(dims)} {shape}", path=where)
        for k, (d, got) in enumerate(zip(dims, value.shape)):
            if isinstance(d, int) and d != got:
                raise InvalidModelError(f"input '{name}' has extent {got} on axis {k}; the graph "
                                        f"declares {shape}", path=where)
    return value


def check_value(name: str, value, vtype: Type | None, where: str):
    """The caller's value for an input of type ``vtype``, checked (and converted if not an ndarray).

    Tensors: element type and every fixed extent must match (Clause 6.5); a non-ndarray is
    converted with ``numpy.asarray`` to the declared element type; strings (str, bytes, numpy
    ``U``/``S`` arrays) become an object array of ``str``. Sequences must be lists (or
    tuples), maps dicts; an optional may be ``None``. Raises InvalidModelError otherwise.
    """
    if vtype is None or vtype.kind is None:
        return value
    kind = vtype.kind
    if kind == "optional":
        if value is None:
            return None
        return check_value(name, value, vtype.optional_type.elem_type, where)
    if value is None:
        raise InvalidModelError(f"input '{name}' is None but its type is {vtype}", path=where)
    if kind in ("tensor", "sparse_tensor"):
        return _check_tensor(name, value, vtype.value, where)
    if kind == "sequence":
        if not isinstance(value, (list, tuple)):
            raise InvalidModelError(f"input '{name}' is a sequence; a list is expected, not "
                                    f"{type(value).__name__}", path=where)
        inner = vtype.sequence_type.elem_type
        return [check_value(name, v, inner, where) for v in value]
    if kind == "map":
        if not isinstance(value, dict):
            raise InvalidModelError(f"input '{name}' is a map; a dict is expected, not "
                                    f"{type(value).__name__}", path=where)
        return value
    return value


def prepare_inputs(graph: Graph, plan, inputs: dict[str, Any]) -> dict[str, Any]:
    """The starting values of the main graph: initializers, then the caller's inputs (Clause 7.2).

    Raises InvalidModelError for an unknown input name, a value given for an initializer that is
    not an input (a constant), a missing input the plan needs, or a value of the wrong type.
    """
    if inputs is None:
        inputs = {}
    if not isinstance(inputs, dict):
        raise InvalidModelError(f"inputs must be a dict of name -> value, not "
                                f"{type(inputs).__name__}")
    env = dict(plan.consts)
    declared = {v.name: (i, v) for i, v in enumerate(graph.inputs)}
    for name, value in inputs.items():
        if name not in declared:
            if name in plan.consts or any(t.name == name for t in graph.initializers):
                raise InvalidModelError(f"'{name}' is an initializer that is not a graph input; "
                                        f"it is a constant and cannot be supplied (Clause 7.2)")
            raise InvalidModelError(f"'{name}' is not an input of the graph; inputs are "
                                    f"{[v.name for v in graph.inputs]}")
        i, vi = declared[name]
        env[name] = check_value(name, value, vi.type, f"graph.inputs[{i}]")
    inits = {t.name for t in graph.initializers} | {s.name for s in graph.sparse_initializers}
    missing = [v.name for v in graph.inputs
               if v.name not in inputs and v.name not in inits and v.name in plan.used]
    if missing:
        raise InvalidModelError(f"no value given for input(s) {missing}", path="graph.inputs")
    return env


def _random_value(vtype: Type | None, rng: np.random.Generator, dims: dict[str, int],
                  where: str):
    if vtype is None or vtype.kind is None:
        raise UnsupportedError("an input without a declared type cannot be generated", path=where)
    kind = vtype.kind
    if kind in ("tensor", "sparse_tensor"):
        t = vtype.value
        code = t.elem_type or 0
        shape = []
        if t.shape is not None:
            for d in t.shape.values:
                if isinstance(d, int):
                    shape.append(d)
                elif isinstance(d, str):
                    shape.append(int(dims.get(d, 1)))
                else:
                    shape.append(1)
        element_count(shape, f"{where}.type.{kind}_type.shape.dims", limit=MAX_RANDOM_ELEMENTS)
        return random_tensor(code, tuple(shape), rng, where)
    if kind == "sequence":
        inner = vtype.sequence_type.elem_type
        return [_random_value(inner, rng, dims, where) for _ in range(2)]
    if kind == "optional":
        return _random_value(vtype.optional_type.elem_type, rng, dims, where)
    if kind == "map":
        m = vtype.map_type
        keys = (["a", "b"] if m.key_type == DataType.STRING else [0, 1])
        return {k: _random_value(m.value_type, rng, dims, where) for k in keys}
    raise UnsupportedError(f"cannot generate a value of type {vtype}", path=where)


def random_tensor(code: int, shape: tuple[int, ...], rng: np.random.Generator,
                  where: str | None = None) -> np.ndarray:
    """A random tensor of element type ``code``: floats uniform in [-1, 1), integers in [0, 3),
    bools, complex with both parts in [-1, 1), strings from a small alphabet."""
    D = DataType
    if code == D.STRING:
        words = np.array(["a", "bc", "def", "onnx"], dtype=object)
        return words[rng.integers(0, len(words), size=shape)].astype(object)
    if code == D.BOOL:
        return rng.integers(0, 2, size=shape).astype(bool)
    dt = _dtype_of(code, where)
    if code in (D.COMPLEX64, D.COMPLEX128):
        re = rng.uniform(-1.0, 1.0, size=shape)
        im = rng.uniform(-1.0, 1.0, size=shape)
        return (re + 1j * im).astype(dt)
    if dt.kind in "iu" or code in (D.UINT4, D.INT4, D.UINT2, D.INT2):
        return rng.integers(0, 3, size=shape).astype(dt)
    return rng.uniform(-1.0, 1.0, size=shape).astype(np.float32).astype(dt)


def random_inputs(model: Model, seed: int = 0, dims: dict[str, int] | None = None) -> dict:
    """Deterministic inputs for every main-graph input without an initializer.

    Args:
        model: the model whose ``graph.inputs`` declare the types.
        seed: seed of ``numpy.random.default_rng``; the same seed gives the same values.
        dims: value of each dimension variable (``dim_param``); unnamed and unlisted ones are 1.
    Returns:
        input name -> value: ndarrays (floats in [-1, 1), integers in [0, 3), bools, strings),
        lists of two elements for sequences, the element for optionals, dicts for maps.
    Raises:
        UnsupportedError: an input without a type, an opaque type, or
            ``MAX_RANDOM_ELEMENTS`` elements or more. InvalidModelError: a negative extent.
    """
    rng = np.random.default_rng(seed)
    dims = dims or {}
    g = model.graph
    inits = {t.name for t in g.initializers} | {s.name for s in g.sparse_initializers}
    out = {}
    for i, vi in enumerate(g.inputs):
        if vi.name in inits:
            continue
        out[vi.name] = _random_value(vi.type, rng, dims, f"graph.inputs[{i}]")
    return out


def unset_dims(model: Model, dims: dict[str, int]) -> list[str]:
    """The dimension variables (dim_param) of the graph inputs that ``dims`` does not set, in
    order of first appearance: :func:`random_inputs` gives them extent 1."""
    names: list[str] = []
    for vi in model.graph.inputs if model.graph is not None else []:
        shape = vi.type.shape if vi.type is not None else None
        for d in shape.dims if shape is not None else []:
            if d.dim_param and d.dim_param not in dims and d.dim_param not in names:
                names.append(d.dim_param)
    return names


def add_dims_hint(error, model: Model, dims: dict[str, int]):
    """``error`` (an InvalidModelError from running on generated inputs) with a note naming the
    dimension variables that were set to 1 and how to set them; other errors unchanged."""
    unset = unset_dims(model, dims)
    if unset and isinstance(error, InvalidModelError):
        error.message += (f" (inputs were generated with {', '.join(unset)} = 1; set "
                          "dimension values with --dim NAME=VALUE / dims=)")
    return error.at(source=getattr(model, "source", None))
