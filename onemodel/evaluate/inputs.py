"""Graph inputs: checking the caller's values against the declared types, and random inputs.

A declared extent that is negative (``dim_value`` -1, which PaddlePaddle exports write for "any";
Clause 6.5 allows only non-negative extents) is read as unknown, as onnxruntime does, with one
:class:`~onemodel.errors.OneModelWarning` per input naming the value and the input.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from ..errors import (
    InputError,
    OneModelWarning,
    Setting,
    UnsupportedError,
    UsageError,
    literal,
    quote,
)
from ..inference.engine import fresh_name
from ..ir.dtypes import INFO, DataType, name_of
from ..ir.model import Graph, Model
from ..ir.tensor import element_count
from ..ir.types import Type, names_variable
from ..limits import MAX_EVAL_RANK
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
                raise InputError(f"input '{name}' cannot be read as {name_of(code)}: {e}",
                                 path=where) from None
        else:
            value = np.asarray(value, dtype=object if code == DataType.STRING else None)
    if want is not None:
        if code == DataType.STRING:
            if value.dtype.kind not in "OUS":
                raise InputError(f"input '{name}' has dtype {value.dtype}; the graph "
                                 f"declares string", path=where)
            # inside the evaluator a STRING tensor is an object array of str
            value = decode_strings(value.astype(object) if value.dtype.kind in "US" else value)
        elif value.dtype != want:
            raise InputError(f"input '{name}' has dtype {value.dtype}; the graph declares "
                             f"{name_of(code)}", path=where)
    shape = ttype.shape
    if shape is not None:
        dims = shape.values
        if len(dims) != value.ndim:
            raise InputError(f"input '{name}' has rank {value.ndim}; the graph declares "
                             f"{len(dims)} {shape}", path=where)
        _warn_negative(name, dims, where)
        for k, (d, got) in enumerate(zip(dims, value.shape)):
            if isinstance(d, int) and d >= 0 and d != got:
                raise InputError(f"input '{name}' has extent {got} on axis {k}; the graph "
                                 f"declares {shape}", path=where)
    return value


def _warn_negative(name: str, dims: list, where: str) -> None:
    """One OneModelWarning for an input whose declared shape has negative extents or
    dim_params that name no variable (``?``: :func:`onemodel.ir.types.names_variable`), each
    read as unknown (like onnxruntime; Clause 6.5 allows neither). Issued from this one place,
    so the default warning filter shows it once per input even when both generating and
    checking the value find it. ``dims``: the declared dims as written (``Shape.values``)."""
    bad = sorted({d for d in dims if isinstance(d, int) and d < 0})
    unnamed = list(dict.fromkeys(d for d in dims if isinstance(d, str) and
                                 not names_variable(d)))
    if not bad and not unnamed:
        return
    shown = "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"
    what = ([f"the extent {', '.join(map(str, bad))}"] if bad else []) + \
        ([f"the dim_param {', '.join(map(quote, unnamed))}"] if unnamed else [])
    why = (["a negative extent"] if bad else []) + \
        (["a dim_param that is not a name"] if unnamed else [])
    text = (f"input {quote(name)} declares {' and '.join(what)} in {shown} ({where}); "
            f"{' and '.join(why)} {'is' if len(why) == 1 else 'are'} read as unknown")
    if unnamed:
        text += f", each {' or '.join(map(quote, unnamed))} its own extent"
    warnings.warn(OneModelWarning(text),
                  stacklevel=1)


def check_value(name: str, value, vtype: Type | None, where: str):
    """The caller's value for an input of type ``vtype``, checked (and converted if not an ndarray).

    Tensors: element type and every fixed extent must match (Clause 6.5); a non-ndarray is
    converted with ``numpy.asarray`` to the declared element type; strings (str, bytes, numpy
    ``U``/``S`` arrays) become an object array of ``str``. Sequences must be lists (or
    tuples), maps dicts; an optional may be ``None``. Raises InputError otherwise (the
    caller's value does not fit; the model is not at fault).
    """
    if vtype is None or vtype.kind is None:
        return value
    kind = vtype.kind
    if kind == "optional":
        if value is None:
            return None
        return check_value(name, value, vtype.optional_type.elem_type, where)
    if value is None:
        raise InputError(f"input '{name}' is None but its type is {vtype}", path=where)
    if kind in ("tensor", "sparse_tensor"):
        return _check_tensor(name, value, vtype.value, where)
    if kind == "sequence":
        if not isinstance(value, (list, tuple)):
            raise InputError(f"input '{name}' is a sequence; a list is expected, not "
                             f"{type(value).__name__}", path=where)
        inner = vtype.sequence_type.elem_type
        return [check_value(name, v, inner, where) for v in value]
    if kind == "map":
        if not isinstance(value, dict):
            raise InputError(f"input '{name}' is a map; a dict is expected, not "
                             f"{type(value).__name__}", path=where)
        return value
    return value


def prepare_inputs(graph: Graph, plan, inputs: dict[str, Any]) -> dict[str, Any]:
    """The starting values of the main graph: initializers, then the caller's inputs (Clause 7.2).

    Raises InputError for an unknown input name, a value given for an initializer that is
    not an input (a constant), a missing input the plan needs, or a value of the wrong type.
    """
    if inputs is None:
        inputs = {}
    if not isinstance(inputs, dict):
        raise InputError(f"inputs must be a dict of name -> value, not "
                         f"{type(inputs).__name__}")
    env = dict(plan.consts)
    declared = {v.name: (i, v) for i, v in enumerate(graph.inputs)}
    for name, value in inputs.items():
        if name not in declared:
            if name in plan.consts or any(t.name == name for t in graph.initializers):
                raise InputError(f"'{name}' is an initializer that is not a graph input; "
                                 f"it is a constant and cannot be supplied (Clause 7.2)")
            raise InputError(f"'{name}' is not an input of the graph; inputs are "
                             f"{[v.name for v in graph.inputs]}")
        i, vi = declared[name]
        env[name] = check_value(name, value, vi.type, f"graph.inputs[{i}]")
    inits = {t.name for t in graph.initializers} | {s.name for s in graph.sparse_initializers}
    missing = [v.name for v in graph.inputs
               if v.name not in inputs and v.name not in inits and v.name in plan.used]
    if missing:
        raise InputError(f"no value given for input(s) {missing}", path="graph.inputs")
    return env


def _declared_dims(vtype: Type | None) -> list | None:
    """The declared dims of a tensor type as the evaluator reads them (non-negative ints,
    dimension variables, None: ``Shape.extents``), None if no shape."""
    if vtype is None or vtype.kind not in ("tensor", "sparse_tensor") or vtype.value is None:
        return None
    shape = vtype.value.shape
    return None if shape is None else shape.extents


def _random_value(vtype: Type | None, rng: np.random.Generator, dims: dict[str, int],
                  where: str, name: str = "", shape_given: tuple | None = None):
    if vtype is None or vtype.kind is None:
        raise UnsupportedError("an input without a declared type cannot be generated", path=where)
    kind = vtype.kind
    if kind in ("tensor", "sparse_tensor"):
        t = vtype.value
        code = t.elem_type or 0
        if shape_given is not None:
            shape = list(shape_given)
        else:
            shape = []
            _warn_negative(name, t.shape.values if t.shape is not None else [], where)
            declared = t.shape.extents if t.shape is not None else []
            for d in declared:
                if isinstance(d, int) and d >= 0:
                    shape.append(d)
                elif isinstance(d, str):
                    shape.append(int(dims.get(d, 1)))
                else:  # unnamed, or a negative extent read as unknown
                    shape.append(int(dims.get(fresh_name(name, len(shape)), 1)))
        if len(shape) > MAX_EVAL_RANK:  # numpy holds no more axes
            raise UnsupportedError(f"input '{name}' has rank {len(shape)}; the evaluator's "
                                   f"arrays have at most {MAX_EVAL_RANK} axes (MAX_EVAL_RANK)",
                                   path=f"{where}.type.{kind}_type.shape")
        _check_size(name, shape, t.shape.extents if t.shape is not None else [], dims,
                    shape_given, f"{where}.type.{kind}_type.shape.dims")
        return random_tensor(code, tuple(shape), rng, where)
    if kind == "sequence":
        inner = vtype.sequence_type.elem_type
        return [_random_value(inner, rng, dims, where, name) for _ in range(2)]
    if kind == "optional":
        return _random_value(vtype.optional_type.elem_type, rng, dims, where, name, shape_given)
    if kind == "map":
        m = vtype.map_type
        keys = (["a", "b"] if m.key_type == DataType.STRING else [0, 1])
        return {k: _random_value(m.value_type, rng, dims, where, name) for k in keys}
    raise UnsupportedError(f"cannot generate a value of type {vtype}", path=where)


def _limit_words() -> str:
    n = MAX_RANDOM_ELEMENTS
    return f"2^{n.bit_length() - 1}" if n & (n - 1) == 0 else str(n)


def _check_size(name: str, shape: list, declared: list, dims: dict,
                shape_given: tuple | None, path: str) -> None:
    """Refuse a generated tensor input of :data:`MAX_RANDOM_ELEMENTS` elements or more: a
    UsageError naming the settings that made it so large (the ``shapes`` given for it, or
    the ``dims`` set on its axes, as :class:`~onemodel.errors.Setting`), else (only the
    declared extents) the UnsupportedError of :func:`~onemodel.ir.tensor.element_count`."""
    count = 1
    for d in shape:
        count *= d
    if count < MAX_RANDOM_ELEMENTS:
        return
    if shape_given is not None:
        setting, n = Setting("shapes", {name: tuple(shape_given)}), 1
    else:
        set_dims = {d: dims[d] for d in declared if isinstance(d, str) and d in dims}
        setting, n = Setting("dims", set_dims), len(set_dims)
    if not n:
        element_count(shape, path, limit=MAX_RANDOM_ELEMENTS)
        return
    raise UsageError.advising(
        "{0} make" + ("s" if n == 1 else "") + literal(
            f" input {quote(name)} [{','.join(str(d) for d in shape)}] of {count} elements, "
            f"past the limit of {_limit_words()} for generated inputs"), setting)


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


def needed_inputs(model: Model) -> list:
    """(index, ValueInfo) of the main graph's inputs without an initializer."""
    g = model.graph
    if g is None:
        return []
    inits = {t.name for t in g.initializers} | {s.name for s in g.sparse_initializers}
    return [(i, vi) for i, vi in enumerate(g.inputs) if vi.name not in inits]


def symbolic_dims(model: Model) -> list[str]:
    """The dimension variables (dim_param) of the main graph's inputs, in order of first
    appearance."""
    names: list[str] = []
    for vi in model.graph.inputs if model.graph is not None else []:
        for d in _declared_dims(vi.type) or []:
            if isinstance(d, str) and d not in names:
                names.append(d)
    return names


def tensor_dims(vtype: Type | None) -> list | None:
    """Declared dims of a tensor input, looking through an optional."""
    if vtype is not None and vtype.kind == "optional":
        vtype = vtype.optional_type.elem_type
    return _declared_dims(vtype)


def check_dims_shapes(model: Model, dims: dict[str, int] | None,
                      shapes: dict[str, tuple] | None) -> None:
    """Check the caller's ``dims`` and ``shapes`` against the main graph's inputs.

    Args:
        dims: dim_param name -> extent (int >= 0); each must be a dimension variable of a graph
            input.
        shapes: graph input name -> whole shape (a tuple of ints >= 0); each must be an input
            without an initializer, of tensor type, of the declared rank, and agree with every
            fixed declared extent (a negative declared extent is unknown and takes any value).
    Raises:
        UsageError: naming the offending name or value, with the symbolic dims or the inputs
            that could be meant.
    """
    dims = dims or {}
    shapes = shapes or {}
    if not isinstance(dims, dict) or not isinstance(shapes, dict):
        raise UsageError("dims and shapes must be dicts (name -> extent, input name -> shape)")
    known = symbolic_dims(model)
    for name, value in dims.items():
        if name not in known:
            has = f"its dims are: {', '.join(known)}" if known else \
                "it has no symbolic dimensions"
            raise UsageError.advising("{0}" + literal(
                f": the model has no symbolic dimension {quote(name)}; {has}"),
                Setting("dims", {name: value}))
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
            raise UsageError(f"dimension {name}={value!r}: an extent is an integer >= 0")
    needed = {vi.name: vi for _, vi in needed_inputs(model)}
    for name, shape in shapes.items():
        if name not in needed:
            inputs = ", ".join(needed) or "none"
            other = model.graph is not None and any(v.name == name for v in model.graph.inputs)
            why = "has an initializer (it needs no value)" if other else "is not a graph input"
            raise UsageError.advising("{0}" + literal(
                f": it {why}; inputs that need a value: {inputs}"), _shape_setting(name, shape))
        try:
            extents = tuple(shape)
        except TypeError:
            raise UsageError(f"shape for '{name}' is {shape!r}, not a sequence of extents") \
                from None
        if any(isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 0
               for d in extents):
            raise UsageError(f"shape for '{name}' {list(extents)}: every extent is an integer "
                             f">= 0")
        vtype = needed[name].type
        inner = vtype.optional_type.elem_type if vtype is not None and \
            vtype.kind == "optional" else vtype
        if inner is None or inner.kind not in ("tensor", "sparse_tensor"):
            kind = inner.kind if inner is not None and inner.kind else "untyped"
            raise UsageError.advising("{0}" + literal(
                f": the input is a {kind} value, not a tensor"), _shape_setting(name, extents))
        declared = tensor_dims(vtype)
        if declared is None:
            continue  # no declared shape: any rank
        if len(declared) != len(extents):
            raise UsageError.advising("{0}" + literal(
                f" has rank {len(extents)}; the graph declares rank {len(declared)} "
                f"{_shown(declared)}"), _shape_setting(name, extents))
        for k, (d, got) in enumerate(zip(declared, extents)):
            if isinstance(d, int) and d >= 0 and d != got:
                raise UsageError.advising("{0}" + literal(
                    f": axis {k} is {got}; the graph declares {_shown(declared)}"),
                    _shape_setting(name, extents))


def _shape_setting(name: str, shape) -> Setting:
    """The shape given for input ``name`` as a message names it (a tuple when it is a
    sequence, else as given)."""
    try:
        shape = tuple(shape)
    except TypeError:
        pass
    return Setting("shapes", {name: shape})


def _shown(declared: list) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in declared) + "]"


def random_inputs(model: Model, seed: int = 0, dims: dict[str, int] | None = None,
                  shapes: dict[str, tuple] | None = None) -> dict:
    """Deterministic inputs for every main-graph input without an initializer.

    Args:
        model: the model whose ``graph.inputs`` declare the types.
        seed: seed of ``numpy.random.default_rng``; the same seed gives the same values.
        dims: value of each dimension variable (``dim_param``); unnamed, negative (read as
            unknown, with a warning) and unlisted ones are 1.
        shapes: input name -> the whole shape of that input (tuple of ints >= 0), overriding
            its declared dims (and ``dims``) for that input.
    Returns:
        input name -> value: ndarrays (floats in [-1, 1), integers in [0, 3), bools, strings),
        lists of two elements for sequences, the element for optionals, dicts for maps.
    Raises:
        UsageError: ``dims`` or ``shapes`` that do not fit the inputs (see
            :func:`check_dims_shapes`), or that make an input of ``MAX_RANDOM_ELEMENTS``
            elements or more (``dims={'batch': N} makes input 'x' [...] of ... elements``; the
            settings are the error's :attr:`~onemodel.errors.OneModelError.settings`).
            UnsupportedError: an input without a type, an opaque type, or
            ``MAX_RANDOM_ELEMENTS`` elements or more from its declared extents alone.
    """
    check_dims_shapes(model, dims, shapes)
    rng = np.random.default_rng(seed)
    dims = entailed_dims(model, dims)
    shapes = shapes or {}
    out = {}
    for i, vi in needed_inputs(model):
        given = tuple(int(d) for d in shapes[vi.name]) if vi.name in shapes else None
        out[vi.name] = _random_value(vi.type, rng, dims, f"graph.inputs[{i}]", vi.name, given)
    return out


def entailed_dims(model: Model, dims: dict[str, int] | None) -> dict[str, int]:
    """``dims`` completed with the extents the model's operators pin for its input variables
    and unnamed input extents (shape inference, :func:`.constraints.suggested_dims`: a MatMul
    whose weight has 768 rows pins the inner extent of its input to 768), and, where the
    others at 1 break what the operators entail, extents that keep it
    (:func:`.constraints.default_dims`: nudenet's height and width, 32); what ``dims`` gives is
    kept. Unnamed extents are keyed by :func:`onemodel.inference.engine.fresh_name`. An
    inference that cannot be made pins nothing."""
    from .constraints import default_dims

    try:
        pinned = default_dims(model, dims or {})
    except Exception:  # noqa: BLE001 - inference never prevents evaluation (Clause 9.4)
        pinned = {}
    return {**pinned, **(dims or {})}


def unset_dims(model: Model, dims: dict[str, int]) -> list[str]:
    """The dimension variables (dim_param) of the graph inputs that ``dims`` does not set, in
    order of first appearance: :func:`random_inputs` gives them extent 1."""
    return [d for d in symbolic_dims(model) if d not in (dims or {})]


def generated_axes(model: Model, dims: dict[str, int] | None,
                   shapes: dict[str, tuple] | None) -> list[tuple[str, list[int], list[str]]]:
    """What :func:`random_inputs` chose for the axes the model leaves open: for each tensor
    input (without an initializer or a ``shapes`` entry) with a dimension variable, an unnamed
    or a negative extent, ``(name, generated shape, ["seq = 1", "axis 0 = 1", ...])``."""
    dims = entailed_dims(model, dims)
    shapes = shapes or {}
    out = []
    for _, vi in needed_inputs(model):
        declared = tensor_dims(vi.type)
        if vi.name in shapes or not declared:
            continue
        shape, open_axes = [], []
        for k, d in enumerate(declared):
            if isinstance(d, int) and d >= 0:
                shape.append(d)
                continue
            value = int(dims.get(d if isinstance(d, str) else fresh_name(vi.name, k), 1))
            shape.append(value)
            label = d if isinstance(d, str) else f"axis {k}"
            if f"{label} = {value}" not in open_axes:
                open_axes.append(f"{label} = {value}")
        if open_axes:
            out.append((vi.name, shape, open_axes))
    return out


#: Inputs the command line names one by one when it generated them (``run --random``); the rest
#: are counted (:func:`onemodel.cli.run_inputs.describe_generated`).
DESCRIBED_INPUTS = 20


def value_text(value) -> str:
    """``float32[1,3,224,224]``, ``string[2]``, ``sequence of 2 float32[1,3]``, ``map of 2``,
    ``absent``: a generated value's type and shape, without spaces."""
    if value is None:
        return "absent"
    if isinstance(value, np.ndarray):
        dtype = "string" if value.dtype == object else str(value.dtype)
        return f"{dtype}[{','.join(str(d) for d in value.shape)}]"
    if isinstance(value, list):
        return f"sequence of {len(value)}" + (f" {value_text(value[0])}" if value else "")
    if isinstance(value, dict):
        return f"map of {len(value)}"
    return type(value).__name__


#: Names that moved to :mod:`.input_hints` (which runs the model, so it stands above the runner
#: that imports this module), still served here for callers of the former public path.
_MOVED = ("add_inputs_hint", "add_dims_hint")


def __getattr__(name: str):
    if name in _MOVED:
        from . import input_hints  # (above this module: only when the former path is used)

        return getattr(input_hints, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
