"""Type checks without shape inference (codes OM401-OM404): declared and initializer element
types against the operators' type constraints and against each other; a model per defect,
asserting code, severity and the path in ONNX (Annex B) field names."""

from __future__ import annotations

import glob
import os
import time

import onnx
from check_models import model, save, vi
from onnx import TensorProto, helper

import onemodel
from onemodel.formats.onnx.paths import onnx_path
from onemodel.ir import Type
from onemodel.validation.types import check_types, normalize, type_string

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def found(tmp_path, m):
    with onemodel.load(save(tmp_path, m)) as loaded:
        return [(f.code, f.severity, onnx_path(loaded, f.path), f.message)
                for f in check_types(loaded, {})]


def one(fs, code):
    got = [f for f in fs if f[0] == code]
    assert len(got) == 1, fs
    return got[0]


def typed(name, elem, shape=(2,)):
    return helper.make_tensor_value_info(name, elem, list(shape))


def test_type_strings_as_the_schemas_write_them():
    assert type_string(Type.tensor(1, [2])) == "tensor(float)"
    assert type_string(Type.tensor(17)) == "tensor(float8e4m3fn)"
    assert type_string(Type.tensor(0)) is None          # element type not stated
    assert normalize("map(string, float)") == "map(string,tensor(float))"
    assert normalize("seq(map(int64, float))") == "seq(map(int64,tensor(float)))"
    assert normalize("optional(seq(tensor(int8)))") == "optional(seq(tensor(int8)))"


def test_a_valid_model_checks_clean(tmp_path):
    w = helper.make_tensor("w", TensorProto.FLOAT, [2], [1.0, 2.0])
    nodes = [helper.make_node("Add", ["x", "w"], ["a"]), helper.make_node("Shape", ["a"], ["s"]),
             helper.make_node("Relu", ["a"], ["y"])]
    m = model(nodes, initializers=[w])
    m.graph.value_info.extend([typed("a", TensorProto.FLOAT), typed("s", TensorProto.INT64, [1])])
    assert found(tmp_path, m) == []


def test_a_graph_input_of_a_type_the_operator_does_not_take(tmp_path):
    m = model([helper.make_node("Sqrt", ["x"], ["y"])])
    m.graph.input[0].CopyFrom(typed("x", TensorProto.INT64))
    code, sev, path, msg = one(found(tmp_path, m), "OM401")
    assert (sev, path) == ("error", "graph.node[0].input[0]")
    assert "tensor(int64)" in msg and "a graph input" in msg and "tensor(float)" in msg


def test_an_initializer_of_a_type_the_operator_does_not_take(tmp_path):
    w = helper.make_tensor("w", TensorProto.BOOL, [2], [True, False])
    m = model([helper.make_node("Add", ["x", "w"], ["y"])], initializers=[w])
    code, sev, path, msg = one(found(tmp_path, m), "OM401")
    assert (sev, path) == ("error", "graph.node[0].input[1]") and "initializer" in msg


def test_a_declared_output_type_the_operator_cannot_produce(tmp_path):
    m = model([helper.make_node("Shape", ["x"], ["y"])])
    code, sev, path, msg = one(found(tmp_path, m), "OM402")   # y is declared FLOAT
    assert (sev, path) == ("error", "graph.node[0].output[0]")
    assert "tensor(float)" in msg and "tensor(int64)" in msg


def test_one_type_parameter_bound_to_two_types(tmp_path):
    w = helper.make_tensor("w", TensorProto.DOUBLE, [2], [1.0, 2.0])
    code, sev, path, msg = one(found(tmp_path, model([helper.make_node("Add", ["x", "w"], ["y"])],
                                                     initializers=[w])), "OM403")
    assert (sev, path) == ("error", "graph.node[0].input[1]")
    assert "tensor(float)" in msg and "tensor(double)" in msg and " T " in msg
    # and between an input and an output
    m = model([helper.make_node("Relu", ["x"], ["y"])])
    m.graph.output[0].CopyFrom(typed("y", TensorProto.DOUBLE))
    assert one(found(tmp_path, m), "OM403")[1:3] == ("error", "graph.node[0].output[0]")


def test_a_heterogeneous_variadic_binds_no_single_type(tmp_path):
    """Loop's V: each loop-carried value has its own type."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["c"], ["c_out"]), helper.make_node("Relu", ["a"], ["a_out"]),
         helper.make_node("Identity", ["b"], ["b_out"])], "body",
        [typed("i", TensorProto.INT64, []), typed("c", TensorProto.BOOL, []),
         typed("a", TensorProto.FLOAT), typed("b", TensorProto.INT64)],
        [typed("c_out", TensorProto.BOOL, []), typed("a_out", TensorProto.FLOAT),
         typed("b_out", TensorProto.INT64)])
    inits = [helper.make_tensor("n", TensorProto.INT64, [], [2]),
             helper.make_tensor("go", TensorProto.BOOL, [], [True]),
             helper.make_tensor("k", TensorProto.INT64, [2], [1, 2])]
    m = model([helper.make_node("Loop", ["n", "go", "x", "k"], ["y", "kk"], body=body)],
              initializers=inits, outputs=("y",))
    m.graph.output.append(typed("kk", TensorProto.INT64))
    assert found(tmp_path, m) == []


def test_a_subgraph_sees_the_types_of_enclosing_values(tmp_path):
    s = helper.make_tensor("s", TensorProto.INT32, [2], [1, 2])
    c = helper.make_tensor("c", TensorProto.BOOL, [], [True])
    then = helper.make_graph([helper.make_node("Sqrt", ["s"], ["t"])], "then", [], [vi("t")])
    other = helper.make_graph([helper.make_node("Relu", ["x"], ["e"])], "else", [], [vi("e")])
    m = model([helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)],
              initializers=[s, c])
    code, sev, path, msg = one(found(tmp_path, m), "OM401")
    assert (sev, path) == ("error", "graph.node[0].attribute[1].g.node[0].input[0]")
    assert "tensor(int32)" in msg


def test_function_value_info_is_checked(tmp_path):
    fn = helper.make_function("local", "F", ["a"], ["b"], [helper.make_node("Sqrt", ["a"], ["b"])],
                              [helper.make_opsetid("", 17)])
    fn.value_info.append(typed("a", TensorProto.STRING))
    m = model([helper.make_node("F", ["x"], ["y"], domain="local")],
              opsets=(("", 17), ("local", 1)))
    m.functions.append(fn)
    code, sev, path, msg = one(found(tmp_path, m), "OM401")
    assert (sev, path) == ("error", "functions[0].node[0].input[0]")


def test_zipmap_sequence_of_maps(tmp_path):
    """ai.onnx.ml writes ``seq(map(int64, float))``; a model declares the map's value as a
    tensor(float): the same type. A double value is not allowed."""
    path = os.path.join(ROOT, "testdata", "models", "sklearn_pipeline_zipmap.onnx")
    assert found(tmp_path, onnx.load(path)) == []
    m = onnx.load(path)
    out = [o for o in m.graph.output if o.name == "output_probability"][0]
    out.type.sequence_type.elem_type.map_type.value_type.tensor_type.elem_type = TensorProto.DOUBLE
    k = [i for i, n in enumerate(m.graph.node) if n.op_type == "ZipMap"][0]
    code, sev, path, msg = one(found(tmp_path, m), "OM402")
    assert (sev, path) == ("error", f"graph.node[{k}].output[0]")
    assert "seq(map(int64,tensor(double)))" in msg


def test_a_value_info_contradicting_its_initializer(tmp_path):
    w = helper.make_tensor("w", TensorProto.FLOAT, [2], [1.0, 2.0])
    m = model([helper.make_node("Add", ["x", "w"], ["y"])], initializers=[w])
    m.graph.value_info.append(typed("w", TensorProto.INT64))
    fs = found(tmp_path, m)
    code, sev, path, msg = one(fs, "OM404")
    assert (sev, path) == ("error", "graph.value_info[0].type")
    assert "int64" in msg and "float [2]" in msg
    m = model([helper.make_node("Add", ["x", "w"], ["y"])], initializers=[w])
    m.graph.value_info.append(typed("w", TensorProto.FLOAT, [3]))
    assert "shape [3]" in one(found(tmp_path, m), "OM404")[3]
    m = model([helper.make_node("Add", ["x", "w"], ["y"])], initializers=[w])
    m.graph.value_info.append(typed("w", TensorProto.FLOAT, [1, 2]))
    assert "rank 2" in one(found(tmp_path, m), "OM404")[3]
    # a dimension variable, or no shape, contradicts nothing
    for shape in (["N"], None):
        m = model([helper.make_node("Add", ["x", "w"], ["y"])], initializers=[w])
        m.graph.value_info.append(helper.make_tensor_value_info("w", TensorProto.FLOAT, shape))
        assert found(tmp_path, m) == []


def test_a_graph_input_contradicting_its_default(tmp_path):
    w = helper.make_tensor("w", TensorProto.FLOAT, [2], [1.0, 2.0])
    m = model([helper.make_node("Add", ["x", "w"], ["y"])], initializers=[w], ir_version=3,
              opsets=(("", 8),))
    m.graph.input.append(typed("w", TensorProto.FLOAT, [4]))
    code, sev, path, msg = one(found(tmp_path, m), "OM404")
    assert (sev, path) == ("error", "graph.input[1].type") and "a graph input 'w'" in msg


def test_testdata_models_have_no_type_findings():
    paths = sorted(glob.glob(os.path.join(ROOT, "testdata", "models", "**", "*.onnx"),
                             recursive=True))
    assert len(paths) >= 6
    for p in paths:
        with onemodel.load(p) as m:
            assert check_types(m, {}) == [], p


def test_conformance_models_have_no_type_errors():
    from conformance_data import iter_cases

    cases = iter_cases()
    assert len(cases) > 1500
    start = time.perf_counter()
    bad = {}
    for c in cases:
        with onemodel.load(str(c.model_path)) as m:
            errs = [f for f in check_types(m, {}) if f.severity == "error"]
        if errs:
            bad[c.id] = errs
    assert bad == {}
    assert time.perf_counter() - start < 20


def test_through_onemodel_check(tmp_path):
    """The family runs in onemodel.check, paths in ONNX terms; the initializer's type is what
    the node sees (a contradicting value_info is reported, not believed)."""
    w = helper.make_tensor("w", TensorProto.DOUBLE, [2], [1.0, 2.0])
    m = model([helper.make_node("Add", ["x", "w"], ["y"])], initializers=[w])
    m.graph.value_info.append(typed("w", TensorProto.FLOAT))
    r = onemodel.check(save(tmp_path, m))
    assert sorted((f.code, f.severity, f.path) for f in r.findings) == [
        ("OM403", "error", "graph.node[0].input[1]"),
        ("OM404", "error", "graph.value_info[0].type")]
    assert r.by_code()["OM403"][0].clause == "ONNX Part 1, Clauses 7.3.1, 10.3"


def test_stated_input_types_are_checked_for_nodes_of_one_two_and_three_inputs(tmp_path):
    """Each node's stated input types, however many inputs it has (its key of clean nodes
    holds one type per input): a wrong type at the last input of a Relu, an Add and a Where
    is found at that input, and a second node equal to one found clean is clean."""
    nodes = [helper.make_node("Relu", ["i"], ["r"]),
             helper.make_node("Add", ["x", "j"], ["a"]),
             helper.make_node("Where", ["c", "x", "k"], ["w"]),
             helper.make_node("Add", ["x", "x"], ["b"]),
             helper.make_node("Add", ["x", "x"], ["e"])]
    m = model(nodes, inputs=("x",), outputs=("y",))
    m.graph.input.extend([typed("i", TensorProto.STRING), typed("j", TensorProto.STRING),
                          typed("c", TensorProto.BOOL), typed("k", TensorProto.STRING)])
    got = [(code, path) for code, _, path, _ in found(tmp_path, m)]
    assert got == [("OM401", "graph.node[0].input[0]"), ("OM401", "graph.node[1].input[1]"),
                   ("OM403", "graph.node[2].input[2]")]
