"""The ONNX conformance test vectors (Part 3), generated from the installed onnx package: every
model and every .pb file reads and writes back to the same bytes, and every tensor we decode equals
``onnx.numpy_helper.to_array`` bit for bit (NaN payloads included). The OneModel round trips of the
same models are in tests/formats/test_conformance_container.py.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper

from onemodel.formats.onnx import decode_message, decode_model, encode_message, encode_model
from onemodel.ir import iter_tensors

MESSAGE = {"tensor": "TensorProto", "sequence": "SequenceProto", "map": "MapProto",
           "optional": "OptionalProto"}


def _same_values(ours: np.ndarray, theirs: np.ndarray) -> bool:
    if ours.shape != theirs.shape:
        return False
    if theirs.dtype == object or ours.dtype == object:
        def norm(a):
            return [x.encode() if isinstance(x, str) else bytes(x) for x in a.reshape(-1)]
        return norm(ours) == norm(theirs)
    if ours.dtype != theirs.dtype:
        return False
    return ours.tobytes() == theirs.tobytes()


def _pb_tensors(msg):
    """Every onnx TensorProto inside a protobuf SequenceProto/MapProto/OptionalProto/TensorProto."""
    if isinstance(msg, onnx.TensorProto):
        yield msg
    elif isinstance(msg, onnx.SequenceProto):
        yield from msg.tensor_values
        for s in msg.sequence_values:
            yield from _pb_tensors(s)
        for m in msg.map_values:
            yield from _pb_tensors(m)
        for o in msg.optional_values:
            yield from _pb_tensors(o)
    elif isinstance(msg, onnx.MapProto):
        yield from _pb_tensors(msg.values)
    elif isinstance(msg, onnx.OptionalProto):
        if msg.HasField("tensor_value"):
            yield msg.tensor_value
        for f in ("sequence_value", "map_value", "optional_value"):
            if msg.HasField(f):
                yield from _pb_tensors(getattr(msg, f))


def _our_tensors(rec):
    from onemodel.ir import MapValue, OptionalValue, SequenceValue, Tensor
    if isinstance(rec, Tensor):
        yield rec
    elif isinstance(rec, SequenceValue):
        yield from rec.tensor_values
        for x in rec.sequence_values + rec.map_values + rec.optional_values:
            yield from _our_tensors(x)
    elif isinstance(rec, MapValue):
        if rec.values is not None:
            yield from _our_tensors(rec.values)
    elif isinstance(rec, OptionalValue):
        if rec.tensor_value is not None:
            yield rec.tensor_value
        for x in (rec.sequence_value, rec.map_value, rec.optional_value):
            if x is not None:
                yield from _our_tensors(x)


def test_every_conformance_file_round_trips_byte_for_byte(conformance_cases):
    failures = []
    models = pbs = tensors = 0
    for case in conformance_cases:
        data = case.model_path.read_bytes()
        model = decode_model(data, source=str(case.model_path))
        models += 1
        if encode_model(model) != data:
            failures.append(f"{case.name}: model.onnx rewrites differently")
        # model tensors against onnx's own decoding
        proto = onnx.load_model_from_string(data)
        theirs = [t for t in _proto_model_tensors(proto)]
        ours = [t for _, t in iter_tensors(model)]
        if len(theirs) != len(ours):
            failures.append(f"{case.name}: {len(ours)} tensors vs onnx's {len(theirs)}")
        for a, b in zip(ours, theirs):
            tensors += 1
            if not _same_values(a.numpy(), numpy_helper.to_array(b)):
                failures.append(f"{case.name}: tensor {a.name} differs from to_array")
        for inputs, outputs in case.data_sets:
            kinds = list(case.input_kinds) + list(case.output_kinds)
            for path, kind in zip(list(inputs) + list(outputs), kinds):
                raw = path.read_bytes()
                rec = decode_message(raw, MESSAGE[kind], source=str(path))
                pbs += 1
                if encode_message(rec) != raw:
                    failures.append(f"{path}: rewrites differently")
                pb = getattr(onnx, MESSAGE[kind])()
                pb.ParseFromString(raw)
                for a, b in zip(_our_tensors(rec), _pb_tensors(pb)):
                    tensors += 1
                    if not _same_values(a.numpy(), numpy_helper.to_array(b)):
                        failures.append(f"{path}: tensor {a.name} differs from to_array")
    assert models >= 1900 and pbs >= 5000, (models, pbs)
    assert not failures, f"{len(failures)} failures, first: {failures[:10]}"


def _proto_model_tensors(proto: onnx.ModelProto):
    """onnx's tensors in the order of onemodel.ir.walk.iter_tensors (OneModel section 1.3)."""
    def sparse(st):
        if st.HasField("values"):
            yield st.values
        if st.HasField("indices"):
            yield st.indices

    def attr(a):
        if a.HasField("t"):
            yield a.t
        yield from a.tensors
        if a.HasField("sparse_tensor"):
            yield from sparse(a.sparse_tensor)
        for st in a.sparse_tensors:
            yield from sparse(st)
        if a.HasField("g"):
            yield from graph(a.g)
        for g in a.graphs:
            yield from graph(g)

    def nodes(ns):
        for n in ns:
            for a in n.attribute:
                yield from attr(a)

    def graph(g):
        yield from g.initializer
        for st in g.sparse_initializer:
            yield from sparse(st)
        yield from nodes(g.node)

    if proto.HasField("graph"):
        yield from graph(proto.graph)
    for f in proto.functions:
        yield from nodes(f.node)
        for a in f.attribute_proto:
            yield from attr(a)
    for ti in proto.training_info:
        if ti.HasField("initialization"):
            yield from graph(ti.initialization)
        if ti.HasField("algorithm"):
            yield from graph(ti.algorithm)
