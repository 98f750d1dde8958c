"""The version 1 manifest objects (OneModel format, section 2) <-> records of :mod:`onemodel.ir`.

Nine record classes have a manifest object of their own (the *codec* classes): Model, Graph,
ValueInfo (a TypedName), Node, Attribute, Tensor, SparseTensor, Type and Function. For each, an
``encode_*`` function writes the plain v1 object and a ``decode_*`` function reads one into the
*natural* record: the record a version 1 reader that knows nothing of the ONNX-preservation
extension (:mod:`.extension`) builds. Natural reading rules:

* an optional string that is absent or ``""`` reads as ``None`` (absent); so does a required
  string that is ``""`` (``name``, ``op``); strings in arrays (``inputs``) are kept as written;
* ``model_version`` absent or 0 reads as ``None``; other integers are kept as written;
* an empty FLOATS value reads as ``None`` (an ARRAY field's empty value);
* a tensor's bytes are a storage Blob of its range of the data region (``raw_data``,
  :func:`onemodel.ir.is_blob`), STRING elements are ``string_data``.

The functions take a context (``ctx``) that reads or writes the children: the reader's context
decodes a child object fully (natural reading plus its extension), the writer's context encodes a
child fully, and, when the writer works out what a plain reading would give, the context returns
empty placeholders for children (each child carries its own extension). ``lvl`` counts the graphs
and types open around an object (section 3.1); ``decode_graph``, ``decode_type`` and
``decode_function`` (and their encoders) open one more and refuse more than
:data:`~onemodel.limits.MAX_MODEL_NESTING` with UnsupportedError.
"""

from __future__ import annotations

from ...errors import InvalidModelError, MalformedError, UnsupportedError, quote
from ...ir.dtypes import INFO, DataType
from ...ir.entries import OperatorSetId, StringStringEntry
from ...ir.model import (
    VALUE_FIELD,
    Attribute,
    AttributeType,
    Function,
    Graph,
    Model,
    Node,
    ValueInfo,
)
from ...ir.record import Float32, f32_bits
from ...ir.tensor import SparseTensor, Tensor, element_count
from ...ir.types import (
    Dimension,
    MapType,
    OpaqueType,
    OptionalType,
    SequenceType,
    Shape,
    SparseTensorType,
    TensorType,
    Type,
)
from ...lazy import np
from ...limits import MAX_CONTAINER_TENSOR_BYTES, MAX_MODEL_NESTING
from .manifest import (
    INT64_MAX,
    INT64_MIN,
    UINT32_MAX,
    as_bytes,
    as_int,
    as_list,
    as_obj,
    as_str,
    b64,
    bytes_list,
    get_int,
    get_list,
    get_str,
    int_list,
    req,
    str_list,
)

FORMAT_NAME = "onemodel"
FORMAT_VERSION = 1
MIN_IR_VERSION = 3

#: Classes with a manifest object of their own.
CODEC_CLASSES = frozenset(("Model", "Graph", "ValueInfo", "Node", "Attribute", "Tensor",
                           "SparseTensor", "Type", "Function"))
#: Classes that open a nesting level (section 3.1; a function counts as a graph).
LEVEL_CLASSES = frozenset(("Graph", "Type", "Function"))

_A = AttributeType


def _opt(s: str) -> str | None:
    return s if s else None


def open_level(lvl: int, what: str, path: str) -> int:
    """``lvl + 1``, or UnsupportedError when that passes MAX_MODEL_NESTING (section 3.1)."""
    lvl += 1
    if lvl > MAX_MODEL_NESTING:
        raise UnsupportedError(f"{what} nested {lvl} deep: more than {MAX_MODEL_NESTING} graphs "
                               "and types open at once", path=path)
    return lvl


def v1_attribute_type(a: Attribute) -> int:
    """The ``type`` code the v1 object of ``a`` carries (section 2.4).

    A reference (``ref_attr_name``) keeps its type (0 when absent or not a code). Otherwise a
    valid type (1 to 14) is kept; an absent, UNDEFINED or unknown type is inferred from the first
    value field that is set, INTS when none is (the true type is kept by the extension).
    """
    t = a.type
    valid = isinstance(t, int) and 0 <= t <= 14
    if a.ref_attr_name:
        return int(t) if valid else 0
    if valid and t != 0:
        return int(t)
    for code, field in VALUE_FIELD.items():
        v = getattr(a, field)
        if v is None or (not isinstance(v, (Graph, Tensor, SparseTensor, Type, np.floating,
                                           float, int, bytes)) and len(v) == 0):
            continue
        return int(code)
    return int(_A.INTS)


# ================================================================================================
# decoding: manifest object -> natural record
# ================================================================================================
def decode_model(obj: dict, ctx, path: str, lvl: int = 0) -> Model:
    """The top-level object (section 2.1). Malformed: wrong ``format`` or ``version``;
    Unsupported: ``ir_version`` below 3."""
    fmt = get_str(obj, "format", path, required=True)
    if fmt != FORMAT_NAME:
        raise MalformedError(f"format is {quote(fmt)}, not {FORMAT_NAME!r}",
                             path=f"{path}.format")
    version = get_int(obj, "version", path, required=True)
    if version != ctx.version:
        raise MalformedError(f"manifest version {version} differs from the header's "
                             f"{ctx.version}", path=f"{path}.version")
    ir_version = get_int(obj, "ir_version", path, required=True)
    if ir_version < MIN_IR_VERSION:
        raise UnsupportedError(f"ir_version {ir_version} is below {MIN_IR_VERSION}",
                               path=f"{path}.ir_version")
    m = Model(ir_version=ir_version,
              producer_name=_opt(get_str(obj, "producer_name", path)),
              producer_version=_opt(get_str(obj, "producer_version", path)),
              domain=_opt(get_str(obj, "domain", path)),
              model_version=get_int(obj, "model_version", path) or None,
              doc_string=_opt(get_str(obj, "doc", path)))
    m.opset_imports = decode_opsets(obj, path)
    meta = []
    for i, e in enumerate(get_list(obj, "metadata", path)):
        p = f"{path}.metadata[{i}]"
        e = as_obj(e, p)
        meta.append(StringStringEntry(key=_opt(get_str(e, "key", p)),
                                      value=_opt(get_str(e, "value", p))))
    m.metadata_props = meta
    m.graph = ctx.full("Graph", req(obj, "graph", path), f"{path}.graph", lvl)
    m.functions = [ctx.full("Function", f, f"{path}.functions[{i}]", lvl)
                   for i, f in enumerate(get_list(obj, "functions", path))]
    return m


def decode_opsets(obj: dict, path: str) -> list[OperatorSetId]:
    """``opsets``: ``[{domain, version}]`` (domain optional, version required)."""
    out = []
    for i, o in enumerate(get_list(obj, "opsets", path)):
        p = f"{path}.opsets[{i}]"
        o = as_obj(o, p)
        out.append(OperatorSetId(domain=_opt(get_str(o, "domain", p)),
                                 version=get_int(o, "version", p, required=True)))
    return out


def decode_graph(obj: dict, ctx, path: str, lvl: int) -> Graph:
    """A Graph object (section 2.2)."""
    lvl = open_level(lvl, "graph", path)
    g = Graph(name=_opt(get_str(obj, "name", path)), doc_string=_opt(get_str(obj, "doc", path)))
    for key, cls in (("inputs", "ValueInfo"), ("outputs", "ValueInfo"),
                     ("value_info", "ValueInfo"), ("initializers", "Tensor"),
                     ("sparse_initializers", "SparseTensor"), ("nodes", "Node")):
        items = get_list(obj, key, path)
        setattr(g, key, [ctx.full(cls, x, f"{path}.{key}[{i}]", lvl) for i, x in enumerate(items)])
    return g


def decode_value_info(obj: dict, ctx, path: str, lvl: int) -> ValueInfo:
    """A TypedName ``{name (required), type (optional)}``."""
    v = ValueInfo(name=_opt(get_str(obj, "name", path, required=True)))
    if "type" in obj:
        v.type = ctx.full("Type", obj["type"], f"{path}.type", lvl)
    return v


def decode_node(obj: dict, ctx, path: str, lvl: int) -> Node:
    """A Node object (section 2.3); ``op`` is required."""
    n = Node(name=_opt(get_str(obj, "name", path)),
             op_type=_opt(get_str(obj, "op", path, required=True)),
             domain=_opt(get_str(obj, "domain", path)),
             overload=_opt(get_str(obj, "overload", path)),
             doc_string=_opt(get_str(obj, "doc", path)))
    n.inputs = list(str_list(get_list(obj, "inputs", path), f"{path}.inputs"))
    n.outputs = list(str_list(get_list(obj, "outputs", path), f"{path}.outputs"))
    n.attributes = [ctx.full("Attribute", a, f"{path}.attributes[{i}]", lvl)
                    for i, a in enumerate(get_list(obj, "attributes", path))]
    return n


def _bits_to_f32(bits: list[int]) -> np.ndarray:
    return np.array(bits, dtype="<u4").view("<f4")


def decode_attribute(obj: dict, ctx, path: str, lvl: int) -> Attribute:
    """An Attribute object (section 2.4).

    InvalidModel: type 0 without ``ref``. Unsupported: a type code outside 0..14. Malformed: a
    missing ``value`` or one of the wrong JSON type.
    """
    code = get_int(obj, "type", path, required=True)
    a = Attribute(name=_opt(get_str(obj, "name", path, required=True)), type=code,
                  doc_string=_opt(get_str(obj, "doc", path)),
                  ref_attr_name=_opt(get_str(obj, "ref", path)))
    if not 0 <= code <= 14:
        raise UnsupportedError(f"attribute type {code} is not supported", path=f"{path}.type")
    if a.ref_attr_name:
        return a
    if code == 0:
        raise InvalidModelError("attribute type 0 (UNDEFINED) without ref",
                                path=f"{path}.type")
    v = req(obj, "value", path)
    p = f"{path}.value"
    if code == _A.FLOAT:
        a.f = Float32.from_bits(as_int(v, p, 0, UINT32_MAX))
    elif code == _A.INT:
        a.i = as_int(v, p)
    elif code == _A.STRING:
        a.s = as_bytes(v, p)
    elif code == _A.TENSOR:
        a.t = ctx.full("Tensor", v, p, lvl)
    elif code == _A.GRAPH:
        a.g = ctx.full("Graph", v, p, lvl)
    elif code == _A.FLOATS:
        bits = int_list(v, p, 0, UINT32_MAX)
        a.floats = _bits_to_f32(bits) if bits else None
    elif code == _A.INTS:
        a.ints = list(int_list(v, p))
    elif code == _A.STRINGS:
        a.strings = bytes_list(v, p)
    else:
        cls = {_A.TENSORS: "Tensor", _A.GRAPHS: "Graph", _A.SPARSE_TENSOR: "SparseTensor",
               _A.SPARSE_TENSORS: "SparseTensor", _A.TYPE_PROTO: "Type",
               _A.TYPE_PROTOS: "Type"}[code]
        field = VALUE_FIELD[_A(code)]
        if code in (_A.SPARSE_TENSOR, _A.TYPE_PROTO):
            setattr(a, field, ctx.full(cls, v, p, lvl))
        else:
            setattr(a, field, [ctx.full(cls, x, f"{p}[{i}]", lvl)
                               for i, x in enumerate(as_list(v, p))])
    return a


def decode_tensor(obj: dict, ctx, path: str, lvl: int = 0) -> Tensor:
    """A Tensor object (section 2.5).

    Unsupported: a dtype outside Table 5 (or 0), an element count of 2^60 or more, a tensor over
    2^31 - 1 bytes. InvalidModel: a negative dimension, a byte length or string count that does
    not match dims and dtype. Malformed: a range outside the data region, an offset that is not a
    multiple of 64 (checked by ``ctx.tensor_content``).
    """
    code = get_int(obj, "dtype", path, required=True)
    if code not in INFO:
        raise UnsupportedError(f"element type {code} is not supported", path=f"{path}.dtype")
    dims = list(int_list(req(obj, "dims", path), f"{path}.dims"))
    count = element_count(dims, f"{path}.dims")
    t = Tensor(name=_opt(get_str(obj, "name", path)), data_type=code, dims=dims,
               doc_string=_opt(get_str(obj, "doc", path)))
    if code == DataType.STRING:
        strings = bytes_list(req(obj, "strings", path), f"{path}.strings")
        if len(strings) != count:
            raise InvalidModelError(f"{len(strings)} strings for {count} elements",
                                    path=f"{path}.strings")
        t.string_data = strings
        return t
    nbytes = INFO[code].raw_nbytes(count)
    if nbytes > MAX_CONTAINER_TENSOR_BYTES:
        raise UnsupportedError(f"tensor of {nbytes} bytes is larger than the "
                               f"{MAX_CONTAINER_TENSOR_BYTES}-byte limit", path=f"{path}.dims")
    t.raw_data = ctx.tensor_content(req(obj, "data", path), f"{path}.data", nbytes)
    return t


def decode_sparse(obj: dict, ctx, path: str, lvl: int = 0) -> SparseTensor:
    """A SparseTensor object ``{values, indices, dims}`` (section 2.6)."""
    return SparseTensor(values=ctx.full("Tensor", req(obj, "values", path), f"{path}.values", lvl),
                        indices=ctx.full("Tensor", req(obj, "indices", path),
                                         f"{path}.indices", lvl),
                        dims=list(int_list(get_list(obj, "dims", path), f"{path}.dims")))


def _decode_shape(v, path: str) -> Shape:
    dims = []
    for i, d in enumerate(as_list(v, path)):
        if d is None:
            dims.append(Dimension())
        elif type(d) is str:
            d = as_str(d, f"{path}[{i}]")
            dims.append(Dimension(dim_param=d) if d else Dimension())
        else:
            d = as_int(d, f"{path}[{i}]")
            if d < 0:
                raise InvalidModelError(f"dimension {d} is negative", path=f"{path}[{i}]")
            dims.append(Dimension(dim_value=d))
    return Shape(dims=dims)


def decode_type(obj: dict, ctx, path: str, lvl: int) -> Type:
    """A Type object (section 2.7). Unsupported: an unknown ``kind``, too much nesting."""
    lvl = open_level(lvl, "type", path)
    kind = get_str(obj, "kind", path, required=True)
    t = Type()
    if kind in ("tensor", "sparse_tensor"):
        cls = TensorType if kind == "tensor" else SparseTensorType
        v = cls(elem_type=get_int(obj, "elem", path, required=True))
        if "shape" in obj:
            v.shape = _decode_shape(obj["shape"], f"{path}.shape")
        setattr(t, f"{kind}_type", v)
    elif kind in ("sequence", "optional"):
        v = (SequenceType if kind == "sequence" else OptionalType)()
        if "inner" in obj:
            v.elem_type = ctx.full("Type", obj["inner"], f"{path}.inner", lvl)
        setattr(t, f"{kind}_type", v)
    elif kind == "map":
        t.map_type = MapType(key_type=get_int(obj, "key", path, required=True))
        if "inner" in obj:
            t.map_type.value_type = ctx.full("Type", obj["inner"], f"{path}.inner", lvl)
    elif kind == "opaque":
        t.opaque_type = OpaqueType(domain=_opt(get_str(obj, "domain", path)),
                                   name=_opt(get_str(obj, "name", path)))
    else:
        raise UnsupportedError(f"type kind {quote(kind)} is not supported", path=f"{path}.kind")
    return t


def decode_function(obj: dict, ctx, path: str, lvl: int) -> Function:
    """A Function object (section 2.8); functions are carried, not expanded."""
    lvl = open_level(lvl, "function", path)
    f = Function(name=_opt(get_str(obj, "name", path)), domain=_opt(get_str(obj, "domain", path)),
                 overload=_opt(get_str(obj, "overload", path)),
                 doc_string=_opt(get_str(obj, "doc", path)))
    f.inputs = list(str_list(get_list(obj, "inputs", path), f"{path}.inputs"))
    f.outputs = list(str_list(get_list(obj, "outputs", path), f"{path}.outputs"))
    f.attribute_names = list(str_list(get_list(obj, "attribute_names", path),
                                      f"{path}.attribute_names"))
    f.attribute_defaults = [ctx.full("Attribute", a, f"{path}.attribute_defaults[{i}]", lvl)
                            for i, a in enumerate(get_list(obj, "attribute_defaults", path))]
    f.nodes = [ctx.full("Node", n, f"{path}.nodes[{i}]", lvl)
               for i, n in enumerate(get_list(obj, "nodes", path))]
    f.opset_imports = decode_opsets(obj, path)
    return f


DECODE = {"Model": decode_model, "Graph": decode_graph, "ValueInfo": decode_value_info,
          "Node": decode_node, "Attribute": decode_attribute, "Tensor": decode_tensor,
          "SparseTensor": decode_sparse, "Type": decode_type, "Function": decode_function}


# ================================================================================================
# encoding: record -> plain v1 object
# ================================================================================================
def name(s: str | None, path: str) -> str:
    """A name for the manifest (``""`` for None). UnsupportedError when it is not valid UTF-8
    (a string read with ``surrogateescape``): names must survive as they are."""
    if not s:
        return ""
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        raise UnsupportedError("name is not valid UTF-8; the OneModel manifest cannot hold it",
                               path=path) from None
    return s


def text(s: str | None) -> str:
    """Free text (doc strings, producer, metadata) for the manifest: bytes that are not UTF-8
    become U+FFFD here (the extension keeps the exact bytes)."""
    if not s:
        return ""
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        return s.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def int64(v, path: str) -> int:
    """``v`` as a manifest integer; UnsupportedError outside the signed 64-bit range."""
    v = int(v)
    if not INT64_MIN <= v <= INT64_MAX:
        raise UnsupportedError(f"integer {v} does not fit in 64 bits", path=path)
    return v


def _ints(values, path: str) -> list[int]:
    return [int64(x, f"{path}[{i}]") for i, x in enumerate(values)]


def encode_opsets(opsets, path: str) -> list[dict]:
    """``opsets`` (sections 2.1, 2.8): ``[{domain, version}]`` from OperatorSetId records, an
    absent version written as 0. UnsupportedError: a domain that is not valid UTF-8 or a version
    outside the signed 64-bit range (``path[i].domain`` / ``path[i].version``)."""
    return [{"domain": name(o.domain, f"{path}[{i}].domain"),
             "version": int64(o.version or 0, f"{path}[{i}].version")}
            for i, o in enumerate(opsets)]


def encode_model(m: Model, w, path: str, lvl: int = 0) -> dict:
    """The top-level object of ``m`` (section 2.1); ``w`` encodes the graph and functions.

    ``format`` and ``version`` are this format's; an ``ir_version`` absent or below 3 is written
    as 3 (the extension keeps the true one); an absent graph is written as an empty Graph.
    UnsupportedError: a name that is not valid UTF-8, an integer outside 64 bits.
    """
    iv = m.ir_version
    obj = {"format": FORMAT_NAME, "version": FORMAT_VERSION,
           "ir_version": int64(iv, "ir_version") if iv is not None and iv >= MIN_IR_VERSION
           else MIN_IR_VERSION}
    if m.producer_name:
        obj["producer_name"] = text(m.producer_name)
    if m.producer_version:
        obj["producer_version"] = text(m.producer_version)
    if m.domain:
        obj["domain"] = name(m.domain, "domain")
    if m.doc_string:
        obj["doc"] = text(m.doc_string)
    if m.model_version:
        obj["model_version"] = int64(m.model_version, "model_version")
    obj["opsets"] = encode_opsets(m.opset_imports, "opset_imports")
    if m.metadata_props:
        obj["metadata"] = [{"key": text(e.key), "value": text(e.value)} for e in m.metadata_props]
    obj["graph"] = w.full(m.graph if m.graph is not None else Graph(), "graph", lvl)
    if m.functions:
        obj["functions"] = [w.full(f, f"functions[{i}]", lvl) for i, f in enumerate(m.functions)]
    return obj


def encode_graph(g: Graph, w, path: str, lvl: int) -> dict:
    """A Graph object (section 2.2); ``w`` encodes its inputs, outputs, value_info,
    initializers, sparse initializers and nodes (in the record's order; the writer sorts nodes
    later). Opens a nesting level: UnsupportedError past MAX_MODEL_NESTING (section 3.1)."""
    lvl = open_level(lvl, "graph", path)
    obj = {}
    if g.name:
        obj["name"] = name(g.name, f"{path}.name")
    if g.doc_string:
        obj["doc"] = text(g.doc_string)
    for key in ("inputs", "outputs", "value_info", "initializers", "sparse_initializers"):
        obj[key] = [w.full(x, f"{path}.{key}[{i}]", lvl) for i, x in enumerate(getattr(g, key))]
    obj["nodes"] = [w.full(n, f"{path}.nodes[{i}]", lvl) for i, n in enumerate(g.nodes)]
    return obj


def encode_value_info(v: ValueInfo, w, path: str, lvl: int) -> dict:
    """A TypedName. A type with no kind set (a TypeProto present but empty, as exporters write
    for If-branch outputs) is left out, as an absent one is: version 1 has no Type object for it,
    and a placeholder would show a plain reader a type the ONNX file does not have. The
    extension restores its presence (``type`` holds the full Type object)."""
    obj = {"name": name(v.name, f"{path}.name")}
    if v.type is not None and v.type.kind is not None:
        obj["type"] = w.full(v.type, f"{path}.type", lvl)
    return obj


def encode_node(n: Node, w, path: str, lvl: int) -> dict:
    """A Node object (section 2.3): ``name``, ``op``, ``domain``, ``overload``, ``inputs``,
    ``outputs`` and ``attributes`` always written (section 4), ``doc`` when non-empty.
    UnsupportedError: a name that is not valid UTF-8."""
    obj = {"name": name(n.name, f"{path}.name"), "op": name(n.op_type, f"{path}.op_type"),
           "domain": name(n.domain, f"{path}.domain"),
           "overload": name(n.overload, f"{path}.overload")}
    if n.doc_string:
        obj["doc"] = text(n.doc_string)
    obj["inputs"] = [name(x, f"{path}.inputs[{i}]") for i, x in enumerate(n.inputs)]
    obj["outputs"] = [name(x, f"{path}.outputs[{i}]") for i, x in enumerate(n.outputs)]
    obj["attributes"] = [w.full(a, f"{path}.attributes[{i}]", lvl)
                         for i, a in enumerate(n.attributes)]
    return obj


def _placeholder_tensor(code: int = DataType.FLOAT) -> Tensor:
    return Tensor(data_type=int(code), dims=[0], raw_data=b"")


def _placeholder_sparse() -> SparseTensor:
    return SparseTensor(values=_placeholder_tensor(), indices=_placeholder_tensor(DataType.INT64),
                        dims=[])


def _placeholder_type() -> Type:
    return Type(tensor_type=TensorType(elem_type=0))


def encode_attribute(a: Attribute, w, path: str, lvl: int) -> dict:
    """An Attribute object (section 2.4): ``type`` from :func:`v1_attribute_type`, then ``ref``
    for a reference (no ``value``) or the ``value`` its type code calls for: float bits as an
    unsigned integer, base64 strings, child objects through ``w``. A value field left unset is
    written as that type's empty value (0, ``""``, an empty Tensor, Graph, SparseTensor or Type).
    UnsupportedError: an integer outside 64 bits, a name that is not valid UTF-8."""
    code = v1_attribute_type(a)
    obj = {"name": name(a.name, f"{path}.name"), "type": code}
    if a.doc_string:
        obj["doc"] = text(a.doc_string)
    if a.ref_attr_name:
        obj["ref"] = name(a.ref_attr_name, f"{path}.ref_attr_name")
        return obj
    field = VALUE_FIELD[_A(code)]
    v = getattr(a, field)
    p = f"{path}.{field}"
    if code == _A.FLOAT:
        value = 0 if v is None else f32_bits(v)
    elif code == _A.INT:
        value = 0 if v is None else int64(v, p)
    elif code == _A.STRING:
        value = b64(v or b"")
    elif code == _A.TENSOR:
        value = w.full(v if v is not None else _placeholder_tensor(), p, lvl)
    elif code == _A.GRAPH:
        value = w.full(v if v is not None else Graph(), p, lvl)
    elif code == _A.FLOATS:
        value = [] if v is None else np.asarray(v, dtype="<f4").view("<u4").tolist()
    elif code == _A.INTS:
        value = _ints(v, p)
    elif code == _A.STRINGS:
        value = [b64(x) for x in v]
    elif code == _A.SPARSE_TENSOR:
        value = w.full(v if v is not None else _placeholder_sparse(), p, lvl)
    elif code == _A.TYPE_PROTO:
        value = w.full(v if v is not None else _placeholder_type(), p, lvl)
    else:  # TENSORS, GRAPHS, SPARSE_TENSORS, TYPE_PROTOS
        value = [w.full(x, f"{p}[{i}]", lvl) for i, x in enumerate(v)]
    obj["value"] = value
    return obj


def encode_tensor(t: Tensor, w, path: str, lvl: int = 0) -> dict:
    """A Tensor object (section 2.5): ``strings`` (base64, one per element) for dtype 8, else
    ``data`` (``{offset, length}`` in the data region, planned by ``w.tensor_data``).

    UnsupportedError: a dtype absent or outside Table 5, an element count of 2^60 or more, more
    than 2^31 - 1 bytes. InvalidModelError: a negative dimension, a string count or byte length
    that does not match dims and dtype, unresolved external data.
    """
    code = t.data_type
    if code is None or code not in INFO:
        raise UnsupportedError(f"element type {code} cannot be stored (section 2.5)",
                               path=f"{path}.data_type")
    dims = _ints(t.dims, f"{path}.dims")
    count = element_count(dims, f"{path}.dims")
    obj = {}
    if t.name:
        obj["name"] = name(t.name, f"{path}.name")
    obj["dtype"] = int(code)
    obj["dims"] = dims
    if t.doc_string:
        obj["doc"] = text(t.doc_string)
    if code == DataType.STRING:
        if len(t.string_data) != count:
            raise InvalidModelError(f"{len(t.string_data)} strings for {count} elements",
                                    path=f"{path}.string_data")
        obj["strings"] = [b64(s) for s in t.string_data]
    else:
        obj["data"] = w.tensor_data(t, path, count)
    return obj


def encode_sparse(st: SparseTensor, w, path: str, lvl: int = 0) -> dict:
    """A SparseTensor object ``{values, indices, dims}`` (section 2.6); an absent values or
    indices tensor is written as an empty FLOAT / INT64 one (the extension records the absence).
    UnsupportedError: a dim outside 64 bits."""
    values = st.values if st.values is not None else _placeholder_tensor()
    indices = st.indices if st.indices is not None else _placeholder_tensor(DataType.INT64)
    return {"values": w.full(values, f"{path}.values", lvl),
            "indices": w.full(indices, f"{path}.indices", lvl),
            "dims": _ints(st.dims, f"{path}.dims")}


def _encode_dim(d: Dimension, path: str):
    if d.dim_value is not None and d.dim_value >= 0:
        return int64(d.dim_value, f"{path}.dim_value")
    if d.dim_param:
        return name(d.dim_param, f"{path}.dim_param")
    return None


def encode_type(t: Type, w, path: str, lvl: int) -> dict:
    """A Type object (section 2.7) of the first kind set in ``t`` (a Type with no kind is
    written as ``{"kind": "tensor", "elem": 0}``). Shape entries: an integer for a non-negative
    ``dim_value``, the ``dim_param`` string, else ``null``. Opens a nesting level:
    UnsupportedError past MAX_MODEL_NESTING (section 3.1), also for an integer outside 64 bits."""
    lvl = open_level(lvl, "type", path)
    kind, v = t.kind, t.value  # the first kind set (ir.types.KINDS order)
    if kind is None:
        return {"kind": "tensor", "elem": 0}
    p = f"{path}.{kind}_type"
    obj = {"kind": kind}
    if kind in ("tensor", "sparse_tensor"):
        obj["elem"] = int64(v.elem_type or 0, f"{p}.elem_type")
        if v.shape is not None:
            obj["shape"] = [_encode_dim(d, f"{p}.shape.dims[{i}]")
                            for i, d in enumerate(v.shape.dims)]
    elif kind in ("sequence", "optional"):
        if v.elem_type is not None:
            obj["inner"] = w.full(v.elem_type, f"{p}.elem_type", lvl)
    elif kind == "map":
        obj["key"] = int64(v.key_type or 0, f"{p}.key_type")
        if v.value_type is not None:
            obj["inner"] = w.full(v.value_type, f"{p}.value_type", lvl)
    else:
        obj["domain"] = name(v.domain, f"{p}.domain")
        obj["name"] = name(v.name, f"{p}.name")
    return obj


def encode_function(f: Function, w, path: str, lvl: int) -> dict:
    """A Function object (section 2.8), carried as it is (not expanded); ``w`` encodes its
    attribute defaults and nodes. Opens a nesting level (a function counts as a graph):
    UnsupportedError past MAX_MODEL_NESTING (section 3.1) or for a name that is not UTF-8."""
    lvl = open_level(lvl, "function", path)
    obj = {"name": name(f.name, f"{path}.name"), "domain": name(f.domain, f"{path}.domain"),
           "overload": name(f.overload, f"{path}.overload")}
    if f.doc_string:
        obj["doc"] = text(f.doc_string)
    for key in ("inputs", "outputs", "attribute_names"):
        obj[key] = [name(x, f"{path}.{key}[{i}]") for i, x in enumerate(getattr(f, key))]
    obj["attribute_defaults"] = [w.full(a, f"{path}.attribute_defaults[{i}]", lvl)
                                 for i, a in enumerate(f.attribute_defaults)]
    obj["nodes"] = [w.full(n, f"{path}.nodes[{i}]", lvl) for i, n in enumerate(f.nodes)]
    obj["opsets"] = encode_opsets(f.opset_imports, f"{path}.opset_imports")
    return obj


ENCODE = {"Model": encode_model, "Graph": encode_graph, "ValueInfo": encode_value_info,
          "Node": encode_node, "Attribute": encode_attribute, "Tensor": encode_tensor,
          "SparseTensor": encode_sparse, "Type": encode_type, "Function": encode_function}
