"""The operator schema table (onemodel.schemas) against the installed onnx, schema by schema, and
its lookups by operator set version (Part 1, Clause 14.3)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnx.defs
import pytest

from onemodel import schemas
from onemodel.errors import UsageError

ROOT = Path(__file__).resolve().parent.parent

same_onnx = pytest.mark.skipif(
    onnx.__version__ != schemas.onnx_version(),
    reason=f"the table was generated from onnx {schemas.onnx_version()}, the installed onnx is "
           f"{onnx.__version__}: regenerate with tools/gen_schemas.py to compare")

OPTION = {onnx.defs.OpSchema.FormalParameterOption.Single: "single",
          onnx.defs.OpSchema.FormalParameterOption.Optional: "optional",
          onnx.defs.OpSchema.FormalParameterOption.Variadic: "variadic"}


def _formals(params):
    return [(p.name, p.type_str, OPTION[p.option], p.is_homogeneous, p.min_arity) for p in params]


def _mine(f):
    return (f.name, f.type_str, f.option, f.is_homogeneous, f.min_arity)


def _default(a):
    """onnx's default as a plain value, by onnx.helper (not the generator's own decoding)."""
    dv = a.default_value
    if dv.type == 0 and not dv.name:
        return (False, None)
    v = onnx.helper.get_attribute_value(dv)
    if isinstance(v, bytes):
        v = v.decode()
    elif isinstance(v, list):
        v = [x.decode() if isinstance(x, bytes) else x for x in v]
    return (True, v)


ALL = onnx.defs.get_all_schemas_with_history()


@same_onnx
def test_every_schema_of_onnx_is_in_the_table_as_onnx_reports_it():
    assert len(ALL) == 659   # onnx 1.23.2
    for s in ALL:
        got = schemas.get(s.name, s.domain, s.since_version)
        where = f"{s.domain or 'ai.onnx'}::{s.name}-{s.since_version}"
        assert got is not None and got.since_version == s.since_version, where
        assert (got.name, got.domain) == (s.name, s.domain), where
        assert got.deprecated == s.deprecated, where
        assert [_mine(f) for f in got.inputs] == _formals(s.inputs), where
        assert [_mine(f) for f in got.outputs] == _formals(s.outputs), where
        assert (got.min_input, got.max_input, got.min_output, got.max_output) == (
            s.min_input, s.max_input, s.min_output, s.max_output), where
        assert dict(got.constraints) == {
            c.type_param_str: tuple(sorted(c.allowed_type_strs)) for c in s.type_constraints}, where
        assert sorted(got.attributes) == sorted(s.attributes), where
        for name, a in s.attributes.items():
            mine = got.attributes[name]
            assert (mine.type, mine.required) == (a.type.name, a.required), (where, name)
            assert (mine.has_default, mine.default) == _default(a), (where, name)


@same_onnx
def test_the_table_holds_nothing_onnx_does_not():
    want = {}
    for s in ALL:
        want.setdefault(s.domain, {}).setdefault(s.name, []).append(s.since_version)
    assert set(schemas.domains()) == set(want) == {
        "", "ai.onnx.ml", "ai.onnx.preview.training", "ai.onnx.preview"}
    for domain, ops in want.items():
        assert set(schemas.operators(domain)) == set(ops)
        for op, since in ops.items():
            assert schemas.versions(op, domain) == tuple(sorted(since))


@same_onnx
def test_the_stored_file_is_what_the_generator_writes_today():
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_schemas.py"), "--check"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_schema_in_force_is_the_greatest_since_version_not_above_the_import():
    assert schemas.versions("Softmax") == (1, 11, 13)
    assert [schemas.get("Softmax", "", v).since_version for v in (1, 10, 11, 12, 13, 24)] == [
        1, 1, 11, 11, 13, 13]
    assert schemas.get("Softmax", "", 12).default("axis") == 1      # coerced to 2-D at axis 1
    assert schemas.get("Softmax", "", 13).default("axis") == -1
    assert schemas.get("Softmax").since_version == 13              # no version: the latest
    assert schemas.get("Softmax", "ai.onnx", 13) is schemas.get("Softmax", None, 13)


def test_an_operator_newer_than_the_import_is_none_and_says_when_it_came():
    assert schemas.get("Gelu", "", 19) is None and schemas.introduced("Gelu") == 20
    assert schemas.get("Gelu", "", 20).since_version == 20
    assert schemas.get("Attention", "", 22) is None and schemas.introduced("Attention") == 23
    assert schemas.get("NoSuchOp", "", 20) is None and schemas.introduced("NoSuchOp") is None
    assert schemas.versions("Conv", "com.example") == () and schemas.operators("x.y") == ()


def test_deprecated_definitions_are_returned_flagged():
    up = schemas.get("Upsample", "", 10)
    assert up.since_version == 10 and up.deprecated
    assert not schemas.get("Upsample", "", 9).deprecated
    assert schemas.get("Scatter", "", 11).deprecated and schemas.introduced("ScatterElements") == 11


def test_defaults_are_decoded_as_the_definitions_store_them():
    # FLOAT: the float32 value, exactly (0.01 is not a float32)
    alpha = schemas.get("LeakyRelu", "", 16).default("alpha")
    assert alpha == float(np.float32(0.01)) and alpha != 0.01
    selu = schemas.get("Selu", "", 6)
    assert selu.default("alpha") == float(np.float32(1.67326319217681884765625))
    assert type(schemas.get("Gemm", "", 13).default("alpha")) is float
    # INT, STRING
    assert schemas.get("Gemm", "", 13).default("transA") == 0
    assert schemas.get("Resize", "", 19).default("mode") == "nearest"
    assert schemas.get("Resize", "", 19).default("coordinate_transformation_mode") == "half_pixel"
    # INTS, STRINGS (and a new list per call: the caller's own)
    mvn = schemas.get("MeanVarianceNormalization", "", 13)
    assert mvn.default("axes") == [0, 2, 3]
    mvn.default("axes").append(9)
    assert mvn.default("axes") == [0, 2, 3]
    assert schemas.get("Tokenizer", "com.microsoft") is None
    assert schemas.get("LabelEncoder", "ai.onnx.ml", 1).default("default_string") == "_Unused"
    # no default, required, unknown
    conv = schemas.get("Conv", "", 11)
    assert not conv.attributes["pads"].has_default and conv.default("pads") is None
    assert conv.attributes["pads"].required is False
    assert schemas.get("Cast", "", 13).attributes["to"].required
    assert conv.default("nope") is None
    assert conv.defaults == {"auto_pad": "NOTSET", "group": 1}


@same_onnx
def test_no_definition_has_a_default_of_a_kind_the_table_cannot_hold():
    """onnx 1.23 gives defaults only of FLOAT, INT, STRING, FLOATS, INTS and STRINGS kinds;
    the generator refuses any other (a tensor default would need its own encoding)."""
    kinds = {a.default_value.type for s in ALL for a in s.attributes.values()
             if a.default_value.type or a.default_value.name}
    A = onnx.AttributeProto
    assert kinds <= {A.FLOAT, A.INT, A.STRING, A.FLOATS, A.INTS, A.STRINGS}


def test_signature_details():
    concat = schemas.get("Concat", "", 13)
    (inp,) = concat.inputs
    assert inp.variadic and inp.is_homogeneous and inp.min_arity == 1
    assert concat.max_input == schemas.UNBOUNDED
    assert concat.allowed_types("T") == concat.constraints["T"]
    assert "tensor(string)" in concat.constraints["T"]
    clip = schemas.get("Clip", "", 13)
    assert [f.name for f in clip.inputs] == ["input", "min", "max"]
    assert [f.optional for f in clip.inputs] == [False, True, True]
    assert (clip.min_input, clip.max_input) == (1, 3)
    shape = schemas.get("Shape", "", 15)
    assert shape.outputs[0].type_str == "T1" and shape.allowed_types("T1") == ("tensor(int64)",)
    assert schemas.get("Reshape", "", 14).allowed_types("tensor(int64)") == ("tensor(int64)",)
    assert schemas.get("TreeEnsemble", "ai.onnx.ml", 5).since_version == 5
    assert schemas.get("Adam", "ai.onnx.preview.training", 1).default("alpha") == float(
        np.float32(0.9))


def test_records_are_read_only_values():
    conv = schemas.get("Conv", "", 11)
    with pytest.raises(AttributeError):
        conv.since_version = 1
    with pytest.raises(TypeError):
        conv.attributes["group"] = None
    assert conv == schemas.get("Conv", "", 1 + 10) and conv != schemas.get("Conv", "", 1)
    assert repr(conv.attributes["group"]) == (
        "AttributeSpec(name='group', type='INT', required=False, has_default=True, default=1)")


def test_a_version_that_is_not_an_operator_set_version_is_a_usage_error():
    for bad in (0, -1, 1.5, "13", True):
        with pytest.raises(UsageError):
            schemas.get("Softmax", "", bad)


def test_importing_onemodel_does_not_read_the_table():
    code = ("import sys, onemodel, onemodel.cli, onemodel.evaluate\n"
            "print('onemodel.schemas' in sys.modules, 'onemodel.schemas.table' in sys.modules)\n"
            "from onemodel import schemas\n"
            "print(schemas._table is None, schemas._contrib is None)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False", "True", "True"]


def test_the_generator_refuses_a_default_it_cannot_store():
    """A TENSOR default (none in onnx 1.23) stops the generator with a message naming the
    attribute, rather than storing something the reader would misread."""
    from types import SimpleNamespace

    gen = _generator()
    value = onnx.helper.make_attribute("value", onnx.numpy_helper.from_array(np.zeros(1)))
    fake = SimpleNamespace(name="value", default_value=value)
    with pytest.raises(SystemExit, match="value has a default of kind TENSOR"):
        gen._default(fake)
    ok = SimpleNamespace(name="alpha", default_value=onnx.helper.make_attribute("alpha", 0.01))
    assert gen._default(ok) == float(np.float32(0.01))


def _generator():
    import importlib.util

    spec = importlib.util.spec_from_file_location("gen_schemas", ROOT / "tools" / "gen_schemas.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    return gen


TABLE = {"format": 1, "onnx_version": "9.9", "type_lists": [["tensor(float)"]],
         "domains": {"": {"Relu": [{"since": 14, "inputs": [["X", "T", "single", True, 1]],
                                    "outputs": [], "attributes": [], "constraints": [["T", 0]],
                                    "counts": [1, 1, 1, 1]}]}}}


def test_the_generator_writes_the_same_gzip_header_on_every_python():
    """gzip.compress(mtime=0) writes OS 3 on Python 3.11 and 3.12 and OS 255 on 3.10 and 3.13
    (RFC 1952, section 2.3): the generator writes its own header, so a regeneration does not
    change the file's bytes with the interpreter."""
    import gzip

    gen = _generator()
    data = gen.encode(TABLE)
    assert data[:10] == b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\x03"
    assert gzip.decompress(data) == gen.content(TABLE)
    head, body = gen.content(TABLE).split(b"\n", 1)
    assert head.startswith(b'{"format":1,"onnx_version":"9.9",')
    assert body.startswith(b'[{"since":14,')


def test_the_check_compares_the_content_not_the_compressed_bytes(tmp_path):
    """--check holds a file whose content is the table's whatever gzip writer made it (another
    header, level, zlib), and refuses another content, a truncated file or no file."""
    import gzip

    gen = _generator()
    stored = tmp_path / "schemas.json.gz"
    ours = gen.encode(TABLE)
    os_255 = ours[:9] + b"\xff" + ours[10:]       # what Python 3.10 and 3.13 write
    fast = gzip.compress(gen.content(TABLE), compresslevel=1, mtime=12345)
    for data in (ours, os_255, fast):
        stored.write_bytes(data)
        assert gen.is_current(stored, TABLE)
    assert len({ours, os_255, fast}) == 3
    other = dict(TABLE, onnx_version="9.8")
    assert not gen.is_current(stored, other)
    stored.write_bytes(gen.encode(TABLE)[:-9])
    assert not gen.is_current(stored, TABLE)
    stored.write_bytes(b"not gzip")
    assert not gen.is_current(stored, TABLE)
    assert not gen.is_current(tmp_path / "absent.gz", TABLE)
