"""What a plain OneModel v1 file cannot hold (container/plain.py): the set of fields, the strict_v1
report of what was left out, and ``compare_models(..., loose=True)`` ignoring exactly those
fields."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest
from container_models import external_tensor

import onemodel
from onemodel import compare_models
from onemodel.formats.container import V1_UNHELD, read_bytes, v1_unheld, write
from onemodel.formats.container.plain import TENSOR_STORAGE
from onemodel.ir import (
    Attribute,
    AttributeType,
    DeviceConfiguration,
    Dimension,
    Function,
    Graph,
    Model,
    Node,
    NodeDeviceConfiguration,
    OperatorSetId,
    Segment,
    SequenceType,
    Shape,
    StringStringEntry,
    Tensor,
    TensorAnnotation,
    TensorType,
    TrainingInfo,
    Type,
    ValueInfo,
)
from onemodel.ir.record import LIST_KINDS, Record
from onemodel.storage import BytesSink

MODELS = pathlib.Path(__file__).resolve().parents[3] / "testdata" / "models"
ONNX_MODELS = sorted(MODELS.rglob("*.onnx"))
A = AttributeType


def _plain(model) -> tuple[list[str], Model]:
    sink = BytesSink()
    left_out = write(model, sink, strict_v1=True)
    return left_out, read_bytes(sink.getvalue())


def _places(indices: list[int]) -> str:
    """Consecutive indices as the report writes them: [0, 1, 2, 5] -> '0-2, 5'."""
    spans, start = [], indices[0]
    for prev, cur in zip(indices, indices[1:] + [None]):
        if cur != prev + 1:
            spans.append(str(start) if start == prev else f"{start}-{prev}")
            start = cur
    return ", ".join(spans)


# -- the strict_v1 report ---------------------------------------------------------------------
def test_report_of_the_dynamo_export_is_short_and_exact():
    with onemodel.load(MODELS / "cnn_dynamo.onnx") as m:
        left_out, _ = _plain(m)
        g = m.graph
        assert [o.domain for o in m.opset_imports] == [""]  # present, empty: the default domain
        typed = [("inputs", i) for i, v in enumerate(g.inputs) if v.metadata_props] \
            + [("outputs", i) for i, v in enumerate(g.outputs) if v.metadata_props] \
            + [("value_info", i) for i, v in enumerate(g.value_info) if v.metadata_props]
        typed_entries = sum(len(v.metadata_props) for v in g.inputs + g.outputs + g.value_info)
        vi_idx = [i for k, i in typed if k == "value_info"]
        node_entries = sum(len(n.metadata_props) for n in g.nodes)
        assert all(n.metadata_props for n in g.nodes) and len(g.nodes) == 14
        assert left_out == [
            'manifest.opsets[0].domain: explicitly "" in the ONNX file; a plain reader reads it '
            "as absent (same meaning, only its presence differs)",
            f"manifest.graph: metadata_props ({len(g.metadata_props)} entries)",
            f"metadata_props of {len(typed)} typed names ({typed_entries} entries in all): "
            f"manifest.graph.inputs[0], manifest.graph.outputs[0], "
            f"manifest.graph.value_info[{_places(vi_idx)}]",
            f"metadata_props of 14 nodes ({node_entries} entries in all): "
            "manifest.graph.nodes[0-13]",
        ]
    assert not any("opset_imports" in line for line in left_out)


def test_report_groups_only_repeated_subjects():
    meta = [StringStringEntry(key="k", value="v")]
    g = Graph(name="g", inputs=[ValueInfo(name="x", type=Type.tensor(1, [2]))],
              outputs=[ValueInfo(name="y", type=Type.tensor(1, [2]))],
              nodes=[Node(name="a", op_type="Relu", inputs=["x"], outputs=["t"],
                          metadata_props=meta),
                     Node(name="b", op_type="Relu", inputs=["t"], outputs=["y"],
                          metadata_props=meta * 2)])
    m = Model(ir_version=10, opset_imports=[OperatorSetId(version=21)], graph=g)
    left_out, _ = _plain(m)
    assert left_out == ["manifest.graph.nodes[0]: metadata_props (1 entry)",
                        "manifest.graph.nodes[1]: metadata_props (2 entries)"]
    g.nodes.append(Node(name="c", op_type="Relu", inputs=["y"], outputs=["z"],
                        metadata_props=meta))
    g.outputs[0].name = "z"
    g.value_info = [ValueInfo(name="y")]
    left_out, _ = _plain(m)
    assert left_out == ["metadata_props of 3 nodes (4 entries in all): manifest.graph.nodes[0-2]"]


# -- loose comparison: exactly what v1 cannot hold -----------------------------------------------
@pytest.mark.parametrize("path", ONNX_MODELS, ids=[p.name for p in ONNX_MODELS])
def test_every_test_model_equals_its_plain_v1_file_loosely(tmp_path, path):
    out = tmp_path / "plain.onemodel"
    with onemodel.load(path) as m:
        onemodel.save(m, out, strict_v1=True)
        with onemodel.load(out) as plain:
            assert compare_models(m, plain, loose=True) == []
            exact = compare_models(m, plain)
    has_meta = any(n.metadata_props for n in m.graph.nodes)
    assert bool(exact) == (has_meta or path.name.startswith("sklearn"))


def unheld_model() -> Model:
    """A valid model that sets every field of V1_UNHELD (and an attribute with value fields
    beyond its type, a type with two kinds), with values v1 represents otherwise exactly."""
    meta = [StringStringEntry(key="k", value="v")]
    shape = Shape(dims=[Dimension(dim_value=2, denotation="DATA_BATCH")])
    x = ValueInfo(name="x", type=Type(tensor_type=TensorType(elem_type=1, shape=shape),
                                      denotation="TENSOR"),
                  doc_string="the input", metadata_props=meta)
    two_kinds = Type(tensor_type=TensorType(elem_type=1, shape=Shape.of([2])),
                     sequence_type=SequenceType(elem_type=Type.tensor(1)))
    w = Tensor.from_numpy(np.arange(2, dtype=np.float32), name="w")
    w.metadata_props = meta
    w.segment = Segment(begin=0, end=2)
    ext = external_tensor()
    typed = [Tensor(name="t_f", data_type=1, dims=[2], float_data=np.array([1, 2], "<f4")),
             Tensor(name="t_i32", data_type=6, dims=[1], int32_data=np.array([7], "<i4")),
             Tensor(name="t_i64", data_type=7, dims=[1], int64_data=np.array([-7], "<i8")),
             Tensor(name="t_f64", data_type=11, dims=[1], double_data=np.array([0.5], "<f8")),
             Tensor(name="t_u64", data_type=13, dims=[1], uint64_data=np.array([9], "<u8"))]
    nodes = [
        Node(name="add", op_type="Add", inputs=["x", "w"], outputs=["s"], metadata_props=meta,
             device_configurations=[NodeDeviceConfiguration(configuration_id="cfg",
                                                            pipeline_stage=1)]),
        Node(name="fn", op_type="Fn", domain="local", inputs=["s"], outputs=["y"],
             attributes=[Attribute(name="alpha", type=A.INT, i=3, f=np.float32(1.5),
                                   s=b"extra")]),
    ]
    fn = Function(name="Fn", domain="local", inputs=["a"], outputs=["b"],
                  nodes=[Node(op_type="Identity", inputs=["a"], outputs=["b"])],
                  opset_imports=[OperatorSetId(domain="", version=21)],
                  value_info=[ValueInfo(name="b", type=Type.tensor(1, [2]))],
                  metadata_props=meta)
    graph = Graph(name="g", inputs=[x], outputs=[ValueInfo(name="y", type=two_kinds)],
                  initializers=[w, ext] + typed, nodes=nodes,
                  quantization_annotations=[TensorAnnotation(
                      tensor_name="w", quant_parameter_tensor_names=meta)],
                  metadata_props=meta)
    training = TrainingInfo(algorithm=Graph(name="algo"),
                            update_binding=[StringStringEntry(key="w", value="w")])
    return Model(ir_version=10, producer_name="tests",
                 opset_imports=[OperatorSetId(version=21), OperatorSetId(domain="local",
                                                                        version=1)],
                 graph=graph, functions=[fn], training_info=[training],
                 configurations=[DeviceConfiguration(name="cfg", num_devices=1,
                                                     devices=["cpu"])])


def _set_fields(rec: Record, found: set) -> None:
    """Every ``(class, field)`` whose value is set somewhere in ``rec``."""
    for name, kind, of in rec.FIELDS:
        v = getattr(rec, name)
        if v is None or (kind in LIST_KINDS and len(v) == 0):
            continue
        found.add((type(rec).__name__, name))
        if isinstance(v, Record):
            _set_fields(v, found)
        elif isinstance(v, list):
            for x in v:
                if isinstance(x, Record):
                    _set_fields(x, found)


def test_the_built_model_sets_every_field_v1_cannot_hold():
    found: set = set()
    _set_fields(unheld_model(), found)
    assert V1_UNHELD <= found
    assert ("Tensor", "data_location") in V1_UNHELD and TENSOR_STORAGE < {f for _, f in V1_UNHELD}


def test_a_plain_file_loses_exactly_the_unheld_fields():
    m = unheld_model()
    left_out, plain = _plain(m)
    assert compare_models(m, plain, loose=True) == []
    exact = {d.path for d in compare_models(m, plain, limit=1000)}
    # every non-storage field of V1_UNHELD that the model sets is really gone from the plain
    # file (tensor storage fields are compared by contents, so they are checked directly)
    ends = {path.rsplit(".", 1)[-1] for path in exact}
    assert {f for _, f in V1_UNHELD} - TENSOR_STORAGE <= ends
    assert "graph.nodes[1].attributes[0].f" in exact and "graph.nodes[1].attributes[0].s" in exact
    assert "graph.outputs[0].type.sequence_type" in exact
    for t in plain.graph.initializers:
        assert t.raw_data is not None and t.data_location is None and not t.external_data
        assert t.typed_field() is None
    joined = "\n".join(left_out)
    for line in ("manifest: training_info (1 entry)", "manifest: configurations (1 entry)",
                 "manifest.graph: quantization_annotations (1 entry)",
                 "manifest.graph.inputs[0]: doc_string",
                 "manifest.graph.inputs[0].type: denotation",
                 "manifest.graph.inputs[0].type.shape[0]: denotation",
                 "manifest.graph.outputs[0].type: sequence_type (kinds beyond the first one set)",
                 "manifest.graph.initializers[0]: segment",
                 "manifest.graph.initializers[1]: external_data (the reference to 'w.bin'; "
                 "the contents are in the data region)",
                 "manifest.graph.initializers[2]: float_data (typed storage; ",
                 "manifest.graph.nodes[0]: device_configurations (1 entry)",
                 "manifest.graph.nodes[1].attributes[0]: f, s (values beyond the one its v1 "
                 "type INT selects)",
                 "manifest.functions[0]: value_info (1 entry)"):
        assert line in joined


def test_loose_still_reports_real_changes():
    m = unheld_model()
    _, plain = _plain(m)
    w = plain.graph.initializers[0]
    w.raw_data = np.array([0, 5], np.float32).tobytes()  # 1.0 = 00 00 80 3F, 5.0 = 00 00 A0 40
    plain.graph.nodes[1].attributes[0].i = 4
    plain.graph.nodes[0].name = "renamed"
    plain.graph.inputs[0].type.tensor_type.shape.dims[0].dim_value = 3
    got = [str(d) for d in compare_models(m, plain, loose=True)]
    assert got == [
        "graph.nodes[0].name: 'add' vs 'renamed'",
        "graph.nodes[1].attributes[0].i: alpha: 3 vs 4",
        "graph.initializers[0].contents: w: contents differ first at byte 6 (element 1): "
        "1.0 vs 5.0",
        "graph.inputs[0].type.tensor_type.shape.dims[0].dim_value: 2 vs 3",
    ]


def test_loose_reports_a_changed_attribute_type_or_type_kind():
    m = unheld_model()
    _, plain = _plain(m)
    plain.graph.nodes[1].attributes[0] = Attribute(name="alpha", type=A.FLOAT,
                                                   f=np.float32(1.5))
    plain.graph.outputs[0].type = Type(sequence_type=SequenceType(elem_type=Type.tensor(1)))
    got = [str(d) for d in compare_models(m, plain, loose=True)]
    assert got == [  # f is the same 1.5 in both: only the type and the value it selects differ
        "graph.nodes[1].attributes[0].i: alpha: 3 vs absent",
        "graph.nodes[1].attributes[0].type: alpha: <AttributeType.INT: 2> vs "
        "<AttributeType.FLOAT: 1>",
        "graph.outputs[0].type.tensor_type: present vs absent",
    ]


def test_v1_unheld_of_one_record():
    assert v1_unheld(Node()) == {"metadata_props", "device_configurations"}
    assert v1_unheld(Attribute(type=A.FLOAT, f=np.float32(1))) == \
        {"i", "s", "t", "g", "floats", "ints", "strings", "tensors", "graphs", "tp",
         "type_protos", "sparse_tensor", "sparse_tensors"}
    assert "f" in v1_unheld(Attribute(type=A.FLOAT, ref_attr_name="alpha"))
    assert v1_unheld(Type(sequence_type=SequenceType(), map_type=None)) == \
        {"denotation", "tensor_type", "map_type", "optional_type", "sparse_tensor_type",
         "opaque_type"}
    assert v1_unheld(OperatorSetId()) == frozenset()


def _if_with_empty_branch_types() -> bytes:
    """An If whose branch outputs have a ValueInfoProto.type that is present but has no value
    case (an empty TypeProto), as silero-vad's exporter writes them."""
    import onnx
    from onnx import TensorProto, helper

    def branch(name, val):
        out = onnx.ValueInfoProto(name=f"{name}_out")
        out.type.SetInParent()
        node = helper.make_node("Constant", [], [f"{name}_out"],
                                value=helper.make_tensor("v", TensorProto.FLOAT, [1], [val]))
        return helper.make_graph([node], name, [], [out])

    cond = helper.make_tensor_value_info("c", TensorProto.BOOL, [])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    node = helper.make_node("If", ["c"], ["y"], then_branch=branch("then", 1.0),
                            else_branch=branch("else", 2.0))
    m = helper.make_model(helper.make_graph([node], "g", [cond], [y]),
                          opset_imports=[helper.make_opsetid("", 21)])
    assert m.graph.node[0].attribute[0].g.output[0].HasField("type")
    return m.SerializeToString()


def test_an_empty_type_is_absent_in_the_plain_view(tmp_path):
    """A plain v1 reader sees no type where the ONNX file has a TypeProto with no value case
    (it used to see {"kind": "tensor", "elem": 0}); the extension restores its presence, so
    ONNX -> OneModel -> ONNX stays byte-identical; strict_v1 lists it."""
    from test_container_roundtrip import manifest_of

    data = _if_with_empty_branch_types()
    (tmp_path / "m.onnx").write_bytes(data)
    onemodel.convert(tmp_path / "m.onnx", tmp_path / "m.onemodel")
    manifest = manifest_of((tmp_path / "m.onemodel").read_bytes())
    for attr in manifest["graph"]["nodes"][0]["attributes"]:
        (out,) = attr["value"]["outputs"]
        assert "type" not in out  # the v1 view: no type
        assert out["onnx"]["type"]["onnx"] == {"tensor_type": None}  # the extension: present
    assert manifest["graph"]["outputs"][0]["type"] == {"kind": "tensor", "elem": 1}
    onemodel.convert(tmp_path / "m.onemodel", tmp_path / "back.onnx")
    assert (tmp_path / "back.onnx").read_bytes() == data
    with onemodel.load(tmp_path / "m.onemodel") as m:
        t = m.graph.nodes[0].attributes[0].g.outputs[0].type
        assert t is not None and t.kind is None

    result = onemodel.convert(tmp_path / "m.onnx", tmp_path / "plain.onemodel", strict_v1=True)
    for i in (0, 1):
        assert (f"manifest.graph.nodes[0].attributes[{i}].value.outputs[0].type: present with no "
                "kind set (an empty TypeProto) in the ONNX file; a plain reader reads no type"
                ) in result.omitted
    plain = manifest_of((tmp_path / "plain.onemodel").read_bytes())
    assert "type" not in plain["graph"]["nodes"][0]["attributes"][0]["value"]["outputs"][0]
    with onemodel.load(tmp_path / "plain.onemodel") as m:
        assert m.graph.nodes[0].attributes[0].g.outputs[0].type is None
