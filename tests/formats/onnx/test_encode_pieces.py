"""The ONNX encoder's pieces (onemodel.formats.onnx.wire_encode): raw_data that is a view of a
mapped file is not copied, sub-messages are spliced rather than copied into their parents, and
the octets stay those of the protobuf serializer."""

from __future__ import annotations

import tracemalloc

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onemodel.formats.onnx import decode_model, read, write
from onemodel.formats.onnx.wire_encode import BIG, SMALL, encode, encode_pieces, pieces_size
from onemodel.ir import iter_tensors
from onemodel.storage import LocalSink, LocalSource
from onemodel.storage.blob import Blob

MID = 15_000  # float32 elements: 60,000 bytes, under BIG (64 KiB)


def _mid_model(count: int) -> onnx.ModelProto:
    """``count`` initializers of 60,000 bytes at the top and as many in an If's then branch
    (a tensor two graphs deep), plus a 16-byte one (copied, under SMALL)."""
    def inits(prefix):
        return [numpy_helper.from_array(np.full(MID, i, np.float32), f"{prefix}{i}")
                for i in range(count)]
    out = helper.make_tensor_value_info("o", TensorProto.FLOAT, [MID])
    then_g = helper.make_graph([helper.make_node("Identity", ["t0"], ["o"])], "then", [], [out],
                               initializer=inits("t"))
    else_g = helper.make_graph([helper.make_node("Identity", ["w0"], ["o"])], "else", [], [out])
    graph = helper.make_graph(
        [helper.make_node("If", ["cond"], ["y"], then_branch=then_g, else_branch=else_g)], "mid",
        [helper.make_tensor_value_info("cond", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [MID])],
        initializer=inits("w") + [numpy_helper.from_array(np.arange(4, dtype=np.float32), "s")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


def test_mapped_mid_size_tensors_are_pieces_not_copies(tmp_path):
    path = tmp_path / "mid.onnx"
    onnx.save(_mid_model(20), str(path))
    data = path.read_bytes()
    model = read(LocalSource(str(path)))
    pieces = encode_pieces(model)
    raw = [p for p in pieces if not isinstance(p, bytearray)]
    # every 60,000-byte value is a piece of its own (40 of them), the 16-byte one is not
    assert [p.nbytes for p in raw] == [MID * 4] * 40
    names = {t.name for _, t in iter_tensors(model) if any(p is t.raw_data for p in raw)}
    assert names == {f"w{i}" for i in range(20)} | {f"t{i}" for i in range(20)}
    for p in raw:  # the piece is the tensor's Blob: the mapped bytes themselves
        assert isinstance(p, Blob) and p.view().obj is model.resources[0].whole().obj
    assert pieces_size(pieces) == len(data)
    assert b"".join(p.view() if isinstance(p, Blob) else p for p in pieces) == data
    assert encode(model) == data
    model.close()


def test_writing_many_mid_size_tensors_has_bounded_memory(tmp_path):
    src, dst = tmp_path / "mid.onnx", tmp_path / "out.onnx"
    onnx.save(_mid_model(200), str(src))  # 400 tensors, 24 MB of weights
    model = read(LocalSource(str(src)))
    tracemalloc.start()
    try:
        sink = LocalSink(str(dst))
        write(model, sink)
        sink.commit()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    weights = sum(t.nbytes for _, t in iter_tensors(model))
    assert weights > 24_000_000
    # the encoding holds the model's structure, not its weights (copying them once: > 24 MB)
    assert peak < 4 << 20, peak
    assert dst.read_bytes() == src.read_bytes()
    model.close()


def test_large_sub_message_is_spliced_and_identical():
    # a subgraph over BIG bytes of nodes and no raw_data: spliced into its parents, not copied
    nodes = [helper.make_node("Relu", [f"t{i}"], [f"t{i + 1}"], name=f"relu_{i}")
             for i in range(3000)]
    out = helper.make_tensor_value_info("t3000", TensorProto.FLOAT, [4])
    body = helper.make_graph(nodes, "body", [], [out], initializer=[
        numpy_helper.from_array(np.ones(4, np.float32), "t0")])
    graph = helper.make_graph(
        [helper.make_node("If", ["cond"], ["y"], then_branch=body, else_branch=body)], "g",
        [helper.make_tensor_value_info("cond", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    data = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)],
                             doc_string="tail").SerializeToString()
    model = decode_model(data)
    pieces = encode_pieces(model)
    assert len(body.SerializeToString()) >= BIG
    assert all(isinstance(p, bytearray) for p in pieces)
    assert max(len(p) for p in pieces) < 2 * len(body.SerializeToString())
    assert len(pieces) >= 3  # each branch a piece of its own
    assert b"".join(pieces) == data
    assert encode(model) == data


def test_small_values_in_memory_are_copied_large_ones_are_pieces():
    small = numpy_helper.from_array(np.arange(SMALL, dtype=np.uint8), "small")  # in memory
    large = numpy_helper.from_array(np.zeros(BIG, np.uint8), "large")
    graph = helper.make_graph([], "g", [], [], initializer=[small, large])
    data = helper.make_model(graph).SerializeToString()
    model = decode_model(data)
    for t in model.graph.initializers:  # values the user set: no source to copy from
        t.raw_data = bytes(t.raw_data)
    pieces = encode_pieces(model)
    large_raw = model.graph.initializers[1].raw_data
    own = [p.obj for p in pieces if not isinstance(p, bytearray)]
    assert len(own) == 1 and own[0] is large_raw
    assert encode(model) == data
