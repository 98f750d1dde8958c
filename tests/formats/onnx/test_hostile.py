"""Hostile ONNX byte strings: each is refused with the right kind and path, never with a
RecursionError, a MemoryError or a traceback from deep inside (Clause 12, 15.4)."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from wire import key, ld, model_with_initializer, tensor, varint, vint

import onemodel
from onemodel.errors import InvalidModelError, MalformedError, OneModelError, UnsupportedError
from onemodel.formats.onnx import decode_model

M, I, U = MalformedError, InvalidModelError, UnsupportedError
INIT = "ModelProto.graph.initializer[0]"


def _deep_graphs(depth: int) -> bytes:
    """GraphProto -> NodeProto -> AttributeProto.g -> GraphProto ... ``depth`` graphs deep."""
    g = ld(2, b"leaf")
    for _ in range(depth):
        attr = ld(1, b"body") + vint(20, 5) + ld(6, g)
        node = ld(4, b"If") + ld(5, attr)
        g = ld(1, node)
    return vint(1, 10) + ld(7, g)


def _deep_types(depth: int) -> bytes:
    t = ld(1, vint(1, 1))  # TypeProto{tensor_type{elem_type FLOAT}}
    for _ in range(depth):
        t = ld(4, ld(1, t))  # TypeProto{sequence_type{elem_type: t}}
    return vint(1, 10) + ld(7, ld(11, ld(1, b"x") + ld(2, t)))


CASES = [
    # (name, bytes, kind, path, offset or None)
    ("wire-type-3", vint(1, 10) + key(5, 3), M, "ModelProto", 2),
    ("wire-type-4", vint(1, 10) + key(5, 4), M, "ModelProto", 2),
    ("wire-type-3-known-tag", vint(1, 10) + key(7, 3), M, "ModelProto", 2),
    ("wire-type-7", key(9, 7) + b"\x00", M, "ModelProto", 0),
    ("varint-11-bytes", key(1, 0) + b"\xff" * 10 + b"\x01", M, "ModelProto.ir_version", 1),
    ("varint-truncated", key(1, 0) + b"\xff\xff", M, "ModelProto.ir_version", 1),
    ("key-varint-11-bytes", b"\xff" * 10 + b"\x01", M, "ModelProto", 0),
    ("length-past-end", key(7, 2) + varint(100) + b"abc", M, "ModelProto.graph", 0),
    ("huge-length", key(7, 2) + varint(1 << 62), M, "ModelProto.graph", 0),
    ("nested-length-past-end", vint(1, 10) + ld(7, ld(1, key(4, 2) + varint(50) + b"Relu")),
     M, "ModelProto.graph.node[0].op_type", 6),
    ("field-tag-0", key(0, 0) + b"\x01", M, "ModelProto", 0),
    ("fixed32-truncated", vint(1, 10) + ld(7, ld(1, ld(5, ld(1, b"a") + key(2, 5) + b"\x00\x00"))),
     M, "ModelProto.graph.node[0].attribute[0].f", None),
    ("int32-out-of-range", model_with_initializer(vint(2, 1 << 40)), M, INIT + ".data_type",
     None),
    ("int32-negative-out-of-range", model_with_initializer(vint(2, -(1 << 33))), M,
     INIT + ".data_type", None),
    ("packed-int32-out-of-range", model_with_initializer(vint(1, 1) + vint(2, 6) +
                                                         ld(5, varint(1 << 35))), M,
     INIT + ".int32_data", None),
    ("packed-float-ragged", model_with_initializer(vint(1, 1) + vint(2, 1) + ld(4, b"\x00" * 5)),
     M, INIT + ".float_data", None),
    ("packed-varint-unterminated", model_with_initializer(ld(1, b"\x02\x80")), M, INIT + ".dims",
     None),
    ("graph-nesting-10000", _deep_graphs(10_000), M, None, None),
    ("type-nesting-10000", _deep_types(10_000), M, None, None),
    ("data-type-99", model_with_initializer(tensor((2,), 99, b"\x00\x00")), U, INIT, None),
    ("raw-data-short", model_with_initializer(tensor((2, 3), 1, b"\x00" * 20)), I, INIT, None),
    ("raw-data-long", model_with_initializer(tensor((2,), 1, b"\x00" * 9)), I, INIT, None),
    ("dims-overflow-64-bits", model_with_initializer(tensor((1 << 40, 1 << 40), 1, b"")), I, INIT,
     None),
    ("element-count-2^60", model_with_initializer(tensor((1 << 30, 1 << 30), 2, b"")), U, INIT,
     None),
    ("negative-dim", model_with_initializer(tensor((-3,), 1, b"")), I, INIT, None),
    ("string-with-raw-data", model_with_initializer(tensor((1,), 8, b"abc")), I, INIT, None),
    ("raw-and-typed", model_with_initializer(tensor((1,), 1, b"\x00" * 4,
                                                    extra=ld(4, b"\x00" * 4))), I, INIT, None),
    ("typed-count-mismatch", model_with_initializer(tensor((4,), 1, None,
                                                           extra=ld(4, b"\x00" * 12))), I, INIT,
     None),
    ("typed-wrong-field", model_with_initializer(tensor((1,), 1, None, extra=ld(7, varint(5)))),
     I, INIT, None),
    ("strings-count-mismatch", model_with_initializer(tensor((3,), 8, None,
                                                             extra=ld(6, b"a") + ld(6, b"b"))),
     I, INIT, None),
    ("int4-raw-size", model_with_initializer(tensor((5,), 22, b"\x00\x00")), I, INIT, None),
    ("contents-without-type", model_with_initializer(vint(1, 1) + ld(8, b"t") + ld(9, b"\0" * 4)),
     I, INIT, None),
    ("external-and-raw", model_with_initializer(tensor((1,), 1, b"\x00" * 4, extra=vint(14, 1) +
                                                       ld(13, ld(1, b"location") + ld(2, b"w")))),
     I, INIT, None),
    ("no-contents", model_with_initializer(tensor((4,), 1, None)), I, INIT, None),
]

# Clause 12.2.2: a varint holds at most 2^64 - 1, so a tenth octet carries one bit (0 or 1); one
# above 1 encodes 2^64 or more, which both decoders used to wrap. A key's tag is at most 2^29 - 1.
OVER = b"\xff" * 9 + b"\x02"  # 2^64 + 2^63 - 1: wrapped, it read as 2^63 - 1
LEN_2_64_PLUS_2 = b"\x82" + b"\x80" * 8 + b"\x02"  # 2^64 + 2: wrapped, it read as a length of 2


def _at(data: bytes, part: bytes) -> int:
    return data.index(part)


_PACKED_I64 = model_with_initializer(vint(1, 1) + vint(2, 7) + ld(7, varint(5) + OVER))
_PACKED_DIMS = model_with_initializer(ld(1, varint(2) + OVER) + vint(2, 1) + ld(8, b"t"))
WIDE = [
    ("varint-value-2^64", key(1, 0) + OVER, M, "ModelProto.ir_version", 1),
    ("varint-tenth-octet-7f", key(1, 0) + b"\x80" * 9 + b"\x7f", M, "ModelProto.ir_version", 1),
    ("varint-int32-2^64", model_with_initializer(key(2, 0) + OVER), M, INIT + ".data_type",
     _at(model_with_initializer(key(2, 0) + OVER), OVER)),
    ("length-2^64+2", vint(1, 10) + key(7, 2) + LEN_2_64_PLUS_2 + ld(2, b""), M,
     "ModelProto.graph", 3),
    ("nested-length-2^64+2", vint(1, 10) + ld(7, key(2, 2) + LEN_2_64_PLUS_2 + b"gg"), M,
     "ModelProto.graph.name", 5),
    ("key-varint-2^64", OVER, M, "ModelProto", 0),
    ("unknown-varint-2^64", vint(1, 10) + key(99, 0) + OVER, M, "ModelProto", 4),
    ("unknown-length-2^64+2", vint(1, 10) + key(99, 2) + LEN_2_64_PLUS_2 + b"ab", M,
     "ModelProto", 4),
    ("packed-int64-2^64", _PACKED_I64, M, INIT + ".int64_data", _at(_PACKED_I64, OVER)),
    ("packed-dims-2^64", _PACKED_DIMS, M, INIT + ".dims", _at(_PACKED_DIMS, OVER)),
    ("field-tag-2^29", vint(1, 10) + key(1 << 29, 0) + b"\x00", M, "ModelProto", 2),
    ("field-tag-2^61", vint(1, 10) + key((1 << 61) - 1, 0) + b"\x00", M, "ModelProto", 2),
    # a key past 32 bits whose low 32 bits are the key of graph (7, LEN): not an alias of it
    ("key-over-32-bits", vint(1, 10) + varint((1 << 32) | (7 << 3 | 2)) + ld(2, b""), M,
     "ModelProto", 2),
    ("nested-field-tag-2^29", vint(1, 10) + ld(7, key(1 << 29, 2) + b"\x00"), M,
     "ModelProto.graph", 4),
]
CASES += WIDE


@pytest.mark.parametrize("name,data,kind,path,offset", CASES, ids=[c[0] for c in CASES])
def test_hostile_bytes(name, data, kind, path, offset):
    with pytest.raises(OneModelError) as info:
        decode_model(data)
    err = info.value
    assert type(err) is kind, f"{name}: {err!r}"
    if path is not None:
        assert err.path == path, str(err)
    else:
        assert err.path and err.path.startswith("ModelProto"), str(err)
    if offset is not None:
        assert err.offset == offset, str(err)
    line = str(err)
    assert "\n" not in line and line.startswith(kind.kind + ":")


@pytest.mark.parametrize("pure", ["0", "1"], ids=["c", "python"])
@pytest.mark.parametrize("name,data,kind,path,offset", WIDE, ids=[c[0] for c in WIDE])
def test_wide_integers_are_refused_by_both_decoders(monkeypatch, pure, name, data, kind, path,
                                                    offset):
    """Clause 12.2.2: no varint encodes 2^64 or more; a field key's tag is at most 2^29 - 1."""
    monkeypatch.setenv("ONEMODEL_PURE_PYTHON", pure)
    with pytest.raises(MalformedError) as info:
        decode_model(data)
    assert (info.value.path, info.value.offset) == (path, offset), str(info.value)
    if "tag" in name or "key-over" in name:
        assert "largest" in info.value.message, str(info.value)
    else:
        assert "2^64 or more" in info.value.message, str(info.value)


@pytest.mark.parametrize("pure", ["0", "1"], ids=["c", "python"])
def test_the_widest_integers_that_fit_still_read(monkeypatch, pure):
    """2^64 - 1 (tenth octet 1), a non-minimal ten-octet zero, and tag 2^29 - 1 are well formed."""
    monkeypatch.setenv("ONEMODEL_PURE_PYTHON", pure)
    top = key((1 << 29) - 1, 0) + b"\x05"
    data = (key(1, 0) + b"\xff" * 9 + b"\x01" + vint(5, 0) + key(5, 0) + b"\x80" * 9 + b"\x00"
            + ld(7, ld(2, b"g")) + top)
    m = decode_model(data)
    assert m.ir_version == -1  # 2^64 - 1 as an int64 (Clause 12.2.3)
    assert m.model_version == 0 and m.graph.name == "g"
    assert m.unknown == top
    t = decode_model(model_with_initializer(vint(1, 1) + vint(2, 13) + ld(11, b"\xff" * 9 + b"\x01")
                                            + ld(8, b"t"))).graph.initializers[0]
    assert t.uint64_data.tolist() == [(1 << 64) - 1]


def test_enough_hostile_cases():
    assert len(CASES) >= 20


def test_deep_nesting_is_refused_at_the_documented_depth():
    from onemodel.limits import MAX_MESSAGE_DEPTH
    with pytest.raises(MalformedError) as info:
        decode_model(_deep_graphs(10_000))
    assert f"deeper than {MAX_MESSAGE_DEPTH}" in info.value.message
    # one graph level costs three message levels (Graph, Node, Attribute): 30 graphs are fine
    decode_model(_deep_graphs(30))


@pytest.mark.parametrize("name,data,kind,path,offset", CASES[:8], ids=[c[0] for c in CASES[:8]])
def test_hostile_file_through_load(tmp_path, name, data, kind, path, offset):
    p = tmp_path / f"{name}.onnx"
    p.write_bytes(data)
    with pytest.raises(kind) as info:
        onemodel.load(p, format="onnx")
    assert info.value.source == str(p)


def test_no_allocation_sized_by_a_declared_length():
    data = key(7, 2) + varint((1 << 62) - 1) + b"x" * 16
    tracemalloc.start()
    try:
        with pytest.raises(MalformedError):
            decode_model(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


def test_sixty_thousand_huge_dims_are_refused_with_a_short_message():
    # the element count is computed in one pass with a capped product: no 60 000-digit integers
    data = model_with_initializer(tensor([(1 << 62) + 1] * 60_000, 1, b""))
    with pytest.raises(InvalidModelError, match="overflows 64 bits") as info:
        decode_model(data)
    assert info.value.path == INIT
    assert len(str(info.value)) < 300


def _sparse_model(values, indices, dims, where="initializer"):
    from onnx import helper, numpy_helper
    sp = helper.make_sparse_tensor(numpy_helper.from_array(values, "s"),
                                   numpy_helper.from_array(indices, "i"), dims)
    if where == "initializer":
        g = helper.make_graph([helper.make_node("Identity", ["s"], ["y"])], "g", [],
                              [helper.make_tensor_value_info("y", 1, None)],
                              sparse_initializer=[sp])
    else:
        g = helper.make_graph([helper.make_node("Constant", [], ["y"], sparse_value=sp)], "g", [],
                              [helper.make_tensor_value_info("y", 1, None)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)]).SerializeToString()


F32, I64 = np.float32, np.int64
SPARSE_CASES = [
    # (values, indices, dims, field, message)
    (np.ones(2, F32), np.array([1, 9], I64), [4], "indices",
     "index 9 at position 1 is outside the 4 elements of dims [4]"),
    (np.ones(1, F32), np.array([-1], I64), [4], "indices",
     "index -1 at position 0 is outside the 4 elements of dims [4]"),
    (np.ones(1, F32), np.array([[0, 3]], I64), [2, 3], "indices",
     "coordinate 3 of index 0 is outside dim 1 (3) of dims [2, 3]"),
    (np.ones(1, F32), np.array([0, 1], I64), [4], "indices",
     "indices of dims [2] for 1 values of a rank-1 tensor: [1] (linear) or [1, 1] (coordinates) "
     "expected"),
    (np.ones(2, F32), np.array([0, 1], np.int32), [4], "indices",
     "indices of element type int32; int64 expected"),
    (np.ones((1, 2), F32), np.array([0], I64), [4], "values",
     "values of dims [1, 2]; a sparse tensor's values are 1-D [NNZ]"),
    (np.ones(1, F32), np.array([0], I64), [2, -1], "dims",
     "dimension -1 at index 1 of dims [2, -1] is negative"),
]


@pytest.mark.parametrize("where, at", [("initializer", "ModelProto.graph.sparse_initializer[0]"),
                                       ("attribute", "ModelProto.graph.node[0].attribute[0]"
                                                     ".sparse_tensor")])
@pytest.mark.parametrize("values, indices, dims, field, message", SPARSE_CASES)
def test_sparse_tensors_are_checked_with_their_field_path(where, at, values, indices, dims, field,
                                                          message):
    with pytest.raises(InvalidModelError) as info:
        decode_model(_sparse_model(values, indices, dims, where))
    assert (info.value.path, info.value.message) == (f"{at}.{field}", message)
    assert info.value.offset is not None


def test_a_valid_sparse_tensor_reads_and_densifies():
    m = decode_model(_sparse_model(np.array([5, 6], F32), np.array([[0, 1], [1, 2]], I64), [2, 3]))
    assert m.graph.sparse_initializers[0].to_dense().tolist() == [[0, 5, 0], [0, 0, 6]]


def test_the_writer_refuses_what_the_reader_refuses(tmp_path):
    import numpy as np

    import onemodel
    m = decode_model(model_with_initializer(tensor((1,), 1, b"\x00" * 4)))
    m.graph.initializers[0].float_data = np.zeros(1, np.float32)  # raw_data and typed storage
    with pytest.raises(InvalidModelError) as info:
        onemodel.save(m, tmp_path / "x.onnx")
    assert info.value.path == "ModelProto.graph.initializer[0]"
    assert not (tmp_path / "x.onnx").exists()
