"""Version-exact conversions (issue 13, Build 5): Cast/CastLike into the FNUZ float8 types
with saturate=1 map +-Inf to NaN at opsets 19 to 23 and to +-max from 24 on (the tables of
those versions' definitions); Tensor.from_numpy(..., data_type=FLOAT8*, saturate=...);
int4/int2 values in int32_data with bits outside Table 7's read by their own bits, reported by
`check` (OM208) and written canonical (Clause 6.3.4).

Expected codes come from the format definitions (Clause 6.3.2): a code with sign s, exponent
field e and mantissa m of a format (E, M, bias B) is ``(-1)**s * (1 + m / 2**M) * 2**(e - B)``;
:func:`_value` decodes them so each expected code is also checked against the value it stands
for.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from typer.testing import CliRunner

import onemodel
from onemodel.cli import app
from onemodel.evaluate import Session
from onemodel.formats.onnx import decode_model
from onemodel.ir import Tensor
from onemodel.ir.dtypes import DataType as D

#: (exponent bits, mantissa bits, bias, NaN code or None, code of the largest finite value)
FORMATS = {
    "FLOAT8E4M3FN": (4, 3, 7, 0x7F, 0x7E),
    "FLOAT8E4M3FNUZ": (4, 3, 8, 0x80, 0x7F),
    "FLOAT8E5M2": (5, 2, 15, 0x7E, 0x7B),
    "FLOAT8E5M2FNUZ": (5, 2, 16, 0x80, 0x7F),
}
X = np.array([np.inf, -np.inf, 1e9, -1e9, 1.0], np.float32)


def _value(fmt: str, code: int) -> float:
    """The value of a float8 code by the format's formula (normal codes only)."""
    e_bits, m_bits, bias, _nan, _max = FORMATS[fmt]
    s, e, m = code >> 7, (code >> m_bits) & ((1 << e_bits) - 1), code & ((1 << m_bits) - 1)
    return (-1.0) ** s * (1 + m / 2 ** m_bits) * 2.0 ** (e - bias)


def test_the_expected_codes_are_the_formats_extremes():
    # max finite: 448, 240, 57344, 57344 (the OCP and FNUZ definitions); 1.0 at exponent = bias
    assert [_value(f, FORMATS[f][4]) for f in FORMATS] == [448.0, 240.0, 57344.0, 57344.0]
    assert _value("FLOAT8E4M3FNUZ", 0x40) == 1.0 and _value("FLOAT8E4M3FN", 0x38) == 1.0
    assert _value("FLOAT8E5M2", 0x3C) == 1.0 and _value("FLOAT8E5M2FNUZ", 0x40) == 1.0


def _expected(fmt: str, opset: int) -> list[int]:
    """Codes of Cast(X) with saturate=1 by the table of Cast-<opset>."""
    _e, _m, _b, nan, top = FORMATS[fmt]
    one = {"FLOAT8E4M3FN": 0x38, "FLOAT8E4M3FNUZ": 0x40, "FLOAT8E5M2": 0x3C,
           "FLOAT8E5M2FNUZ": 0x40}[fmt]
    fnuz = fmt.endswith("FNUZ")
    inf = [nan, nan] if fnuz and opset < 24 else [top, top | 0x80]
    return inf + [top, top | 0x80, one]


def _run(op: str, to: int, opset: int) -> np.ndarray:
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [5])]
    if op == "Cast":
        node = helper.make_node("Cast", ["x"], ["y"], to=to)
        inits = []
    else:
        node = helper.make_node("CastLike", ["x", "like"], ["y"])
        inits = [helper.make_tensor("like", to, [1], [0])]
    graph = helper.make_graph([node], "g", ins, [helper.make_tensor_value_info("y", to, [5])],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    got = Session(decode_model(model.SerializeToString())).run({"x": X})["y"]
    return np.asarray(got)


@pytest.mark.parametrize("op", ["Cast", "CastLike"])
@pytest.mark.parametrize("opset", [19, 21, 23, 24, 25])
@pytest.mark.parametrize("fmt", list(FORMATS))
def test_saturating_cast_to_float8_follows_the_table_of_its_version(op, opset, fmt):
    got = _run(op, int(getattr(TensorProto, fmt)), opset)
    assert list(got.view(np.uint8)) == _expected(fmt, opset), (op, opset, fmt)


def test_the_definitions_state_these_tables():
    """The installed onnx's Cast-21 says NaN for +-Inf into the FNUZ types with saturate, and
    Cast-24 +-FLT_MAX (the rows this test relies on)."""
    row = {v: next(line for line in onnx.defs.get_schema("Cast", v).doc.splitlines()
                   if line.startswith("| Inf ")) for v in (21, 24)}
    assert row[21].split("|")[2:6] == [" FLT_MAX  ", " NaN      ", " FLT_MAX  ", " NaN      "]
    assert row[24].split("|")[2:6] == [" FLT_MAX  "] * 4


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_from_numpy_takes_saturate_like_cast(fmt):
    code = int(getattr(D, fmt))
    _e, _m, _b, nan, top = FORMATS[fmt]
    sat = Tensor.from_numpy(X, data_type=code)
    assert list(bytes(sat.raw_view()))[:4] == [top, top | 0x80, top, top | 0x80]
    raw = list(bytes(Tensor.from_numpy(X, data_type=code, saturate=False).raw_view()))
    if fmt == "FLOAT8E5M2":  # the only one with infinities: 0x7C, 0xFC
        assert raw[:4] == [0x7C, 0xFC, 0x7C, 0xFC]
    elif fmt == "FLOAT8E4M3FN":  # NaN keeps the sign: S.1111.111
        assert raw[:4] == [0x7F, 0xFF, 0x7F, 0xFF]
    else:  # one NaN, 0x80
        assert raw[:4] == [nan] * 4
    assert Tensor.from_numpy(X, data_type=code).numpy()[4] == 1.0


def _int4_model(path, values, code=TensorProto.INT4, dims=(3,)):
    t = TensorProto(name="w", data_type=code, dims=list(dims))
    t.int32_data.extend(values)
    graph = helper.make_graph([helper.make_node("Identity", ["w"], ["y"])], "g", [],
                              [helper.make_tensor_value_info("y", code, list(dims))], [t])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]), path)


def test_int4_int32_data_with_extra_bits_is_read_by_its_bits_reported_and_written_canonical(
        tmp_path):
    # octet 0xF1 holds the INT4 elements 1 (low nibble) and -1 (0xF); sign-extended: -15.
    # 0x1F7 = 503 sets bit 8; its octet 0xF7 holds 7 and -1, of which only 7 is an element
    _int4_model(tmp_path / "m.onnx", [-15, 0x1F7])
    model = onemodel.load(tmp_path / "m.onnx")
    assert model.graph.initializers[0].numpy().tolist() == [1, -1, 7]
    r = CliRunner().invoke(app, ["check", str(tmp_path / "m.onnx")])
    assert r.exit_code == 0, r.output
    assert "OM208 warning (1)" in r.stdout
    assert ("graph.initializer[0] at offset 0x19: int32_data[0] of INT4 is -15 (0xfffffff1): "
            "bits outside 0 to 7 are set; read as the octet 0xf1") in r.stdout
    onemodel.save(model, tmp_path / "out.onnx")
    written = onnx.load(tmp_path / "out.onnx").graph.initializer[0]
    assert list(written.int32_data) == [0xF1, 0xF7]
    assert onnx.numpy_helper.to_array(written).tolist() == [1, -1, 7]
    assert model.graph.initializers[0].int32_data.tolist() == [-15, 0x1F7]  # model unchanged
    r = CliRunner().invoke(app, ["check", str(tmp_path / "out.onnx")])
    assert "OM208" not in r.stdout


def test_uint2_and_canonical_values_give_no_warning(tmp_path):
    # UINT2: four elements per octet; 0x1E4 sets bit 8: octet 0xE4 = elements 0, 1, 2, 3
    _int4_model(tmp_path / "u2.onnx", [0x1E4], TensorProto.UINT2, (4,))
    assert onemodel.load(tmp_path / "u2.onnx").graph.initializers[0].numpy().tolist() == \
        [0, 1, 2, 3]
    r = CliRunner().invoke(app, ["check", str(tmp_path / "u2.onnx")])
    assert "int32_data[0] of UINT2 is 484 (0x000001e4)" in r.stdout
    _int4_model(tmp_path / "ok.onnx", [0xF1, 0x07])
    r = CliRunner().invoke(app, ["check", str(tmp_path / "ok.onnx")])
    assert r.exit_code == 0 and "OM208" not in r.stdout
