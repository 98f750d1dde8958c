"""Checks of the conformance cache itself (tests/conformance_data.py), with onnx as the reader."""

from __future__ import annotations

import conformance_data
import onnx
from google.protobuf import unknown_fields
from google.protobuf.descriptor import FieldDescriptor
from onnx import numpy_helper

_TO_PYTHON = {
    "tensor": numpy_helper.to_array,
    "sequence": numpy_helper.to_list,
    "map": numpy_helper.to_dict,
    "optional": numpy_helper.to_optional,
}


def _has_unknown_fields(message) -> bool:
    """True if protobuf kept bytes it could not place in ``message`` or any message inside it."""
    if len(unknown_fields.UnknownFieldSet(message)):
        return True
    for field, value in message.ListFields():
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            for item in value if field.is_repeated else [value]:
                if _has_unknown_fields(item):
                    return True
    return False


def test_cache_has_the_node_and_model_cases(conformance_cases):
    kinds = {case.kind for case in conformance_cases}
    assert len(conformance_cases) >= 1500
    assert sum(case.kind == "node" for case in conformance_cases) >= 1500
    assert {"node", "simple", "light", "pytorch-converted", "pytorch-operator"} <= kinds
    assert len({case.id for case in conformance_cases}) == len(conformance_cases)
    assert (conformance_data.conformance_dir() / "COMPLETE").is_file()


def test_every_model_parses_and_matches_its_declared_kinds(conformance_cases):
    for case in conformance_cases:
        model = onnx.load(str(case.model_path), load_external_data=False)
        inputs, outputs = list(model.graph.input), list(model.graph.output)
        if case.kind != "light":
            # input_<j>.pb belongs to graph.input[j] (light cases skip initializer inputs).
            assert case.input_names == [v.name for v in inputs[: len(case.input_names)]], case.id
        assert case.output_names == [v.name for v in outputs[: len(case.output_names)]], case.id
        by_name = {v.name: v for v in inputs + outputs}
        for name, kind in zip(case.input_names + case.output_names,
                              case.input_kinds + case.output_kinds):
            field = {"tensor": "tensor_type", "sequence": "sequence_type",
                     "map": "map_type", "optional": "optional_type"}[kind]
            assert by_name[name].type.WhichOneof("value") == field, (case.id, name)


def test_every_pb_parses_as_its_declared_message_kind(conformance_cases):
    seen_kinds = set()
    for case in conformance_cases:
        assert case.data_sets, case.id
        for input_paths, output_paths in case.data_sets:
            assert output_paths, case.id
            for path, kind in [*zip(input_paths, case.input_kinds),
                               *zip(output_paths, case.output_kinds)]:
                data = path.read_bytes()
                message = conformance_data.read_message(path, kind)
                # Read as the wrong class, a file leaves unknown fields behind, does not re-encode
                # to the same bytes, or fails to convert. (A one-element SequenceProto and an
                # OptionalProto share one wire layout; the declared graph types, checked above,
                # tell those apart.)
                assert not _has_unknown_fields(message), (case.id, path.name)
                assert message.SerializeToString() == data, (case.id, path.name)
                _TO_PYTHON[kind](message)
                seen_kinds.add(kind)
    assert {"tensor", "sequence", "optional"} <= seen_kinds
