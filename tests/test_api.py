"""onemodel.load / save: reader and writer options are checked against what the format's
plugin declares (never silently ignored), and storage_options reach a plugin only when it
declares them."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import onemodel
from onemodel import formats
from onemodel.errors import UnsupportedError
from onemodel.formats import Plugin
from onemodel.ir import Model


def _external_model(tmp_path):
    w = numpy_helper.from_array(np.arange(512, dtype=np.float32), "w")
    g = helper.make_graph([helper.make_node("Identity", ["w"], ["y"])], "g", [],
                          [helper.make_tensor_value_info("y", 1, [512])], [w])
    proto = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "m.onnx"
    onnx.save_model(proto, str(path), save_as_external_data=True, location="w.bin",
                    size_threshold=0)
    return path


def test_a_misspelt_reader_option_is_refused(tmp_path):
    path = _external_model(tmp_path)
    with pytest.raises(UnsupportedError) as e:
        onemodel.load(path, load_externall=False)
    msg = str(e.value)
    assert "load_externall does not apply to onnx input" in msg
    assert "load_external" in msg.split("it takes:")[1] and str(path) in msg
    with onemodel.load(path, load_external=False) as model:  # the right spelling works
        assert model.graph.initializers[0].external is None


def test_a_misspelt_writer_option_is_refused_before_anything_is_written(tmp_path):
    with onemodel.load(_external_model(tmp_path)) as model:
        with pytest.raises(UnsupportedError, match="layuot does not apply to onnx output"):
            onemodel.save(model, tmp_path / "out.onnx", layuot="inline")
    assert not (tmp_path / "out.onnx").exists()


def test_storage_options_go_only_to_plugins_that_declare_them(tmp_path, monkeypatch):
    """A third-party reader that takes no options is not handed storage_options or base_dir;
    one that declares storage_options gets them."""
    seen = []

    def plain_read(source):
        seen.append(("plain", bytes(source.read(0, source.size))))
        return Model(ir_version=9)

    def remote_read(source, *, storage_options=None, allow_outside=False):
        seen.append(("remote", storage_options, allow_outside))
        return Model(ir_version=9)

    for name, read in (("plain-toy", plain_read), ("remote-toy", remote_read)):
        monkeypatch.setitem(formats._PLUGINS, name,
                            Plugin(name, (), lambda head: False, read, lambda m, s: None))
    fsspec = pytest.importorskip("fsspec")
    fsspec.filesystem("memory").pipe("/toy/m.bin", b"toy bytes")  # (storage options need a URL)
    with onemodel.load("memory://toy/m.bin", format="plain-toy",
                       storage_options={"anon": True}, allow_outside=True) as m:
        assert m.format == "plain-toy"
    with onemodel.load("memory://toy/m.bin", format="remote-toy",
                       storage_options={"anon": True}, allow_outside=True):
        pass
    with onemodel.load(b"toy bytes", format="remote-toy"):
        pass
    assert seen == [("plain", b"toy bytes"), ("remote", {"anon": True}, True),
                    ("remote", None, False)]
    with pytest.raises(UnsupportedError, match=r"x does not apply to plain-toy input \(it "
                                               r"takes: no options\)"):
        onemodel.load(b"toy bytes", format="plain-toy", x=1)


def test_convert_checks_the_output_before_reading_the_source(tmp_path, monkeypatch):
    from onemodel import api

    monkeypatch.setattr(api, "load", lambda *a, **k: pytest.fail("the source was read"))
    src = tmp_path / "does-not-matter.onnx"
    with pytest.raises(UnsupportedError, match="cannot tell the output format"):
        onemodel.convert(src, tmp_path / "out.weird")
    with pytest.raises(UnsupportedError, match="inline does not apply to onemodel output"):
        onemodel.convert(src, tmp_path / "out.onemodel", inline=True)
    with pytest.raises(UnsupportedError, match="strict_v1 does not apply to onnx output"):
        onemodel.convert(src, tmp_path / "out.onnx", strict_v1=True)
    assert not any(p.name.startswith("out") for p in tmp_path.iterdir())


def test_convert_sets_the_progress_total_to_the_tensor_bytes(tmp_path):
    class Recorder:
        def __init__(self):
            self.totals, self.moved = [], 0

        def __call__(self, n):
            self.moved += n

        def set_total(self, total):
            self.totals.append(total)

    bar = Recorder()
    result = onemodel.convert(_external_model(tmp_path), tmp_path / "m.onemodel", progress=bar)
    assert result.tensors == 1 and result.tensor_bytes == 512 * 4
    assert bar.totals == [512 * 4]
    assert bar.moved == (tmp_path / "m.onemodel").stat().st_size


def test_allow_outside_serves_any_input_format(tmp_path):
    """allow_outside is a load-level policy: the ONNX reader gets it, a OneModel file (no
    external data, nothing to resolve) reads the same with or without it, so one call (the
    CLI's --allow-external-outside, verify of an .onnx against a .onemodel) serves both."""
    outside = tmp_path / "shared.bin"
    outside.write_bytes(np.arange(512, dtype=np.float32).tobytes())
    w = onnx.TensorProto(name="w", data_type=onnx.TensorProto.FLOAT, dims=[512],
                         data_location=onnx.TensorProto.EXTERNAL)
    w.external_data.add(key="location", value="../shared.bin")
    g = helper.make_graph([helper.make_node("Identity", ["w"], ["y"])], "g", [],
                          [helper.make_tensor_value_info("y", 1, [512])], [w])
    (tmp_path / "in").mkdir()
    path = tmp_path / "in" / "m.onnx"
    onnx.save_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    with pytest.raises(onemodel.InvalidModelError, match="parent-directory"):
        onemodel.load(path)
    with onemodel.load(path, allow_outside=True) as model:
        (t,) = model.graph.initializers
        assert np.array_equal(t.numpy(), np.arange(512, dtype=np.float32))
        onemodel.save(model, tmp_path / "m.onemodel")
    with onemodel.load(tmp_path / "m.onemodel", allow_outside=True) as a, \
            onemodel.load(tmp_path / "m.onemodel") as b:
        assert onemodel.compare_models(a, b) == []
    report = onemodel.verify(path, tmp_path / "m.onemodel", read_options={"allow_outside": True})
    assert report.equal


# -- bytes and file objects (issue 9, item 8) -------------------------------------------------
CNN = "testdata/models/cnn_dynamo.onnx"


def _root():
    import pathlib
    return pathlib.Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("fmt, suffix", [("onnx", ".onnx"), ("onemodel", ".onemodel")])
def test_to_bytes_and_file_objects_give_the_bytes_of_the_file(tmp_path, fmt, suffix):
    import io

    with onemodel.load(_root() / CNN) as m:
        onemodel.save(m, tmp_path / f"m{suffix}")
        expected = (tmp_path / f"m{suffix}").read_bytes()
        assert onemodel.to_bytes(m, format=fmt) == expected
        f = io.BytesIO(b"head")
        f.seek(4)
        assert onemodel.save(m, f, format=fmt) in (None, [])
        assert f.getvalue() == b"head" + expected
        with open(tmp_path / f"named{suffix}", "wb") as g:  # the format from f.name
            onemodel.save(m, g)
        assert (tmp_path / f"named{suffix}").read_bytes() == expected
    if fmt == "onnx":  # an inline ONNX file is written back byte for byte
        assert expected == (_root() / CNN).read_bytes()
    for data in (expected, io.BytesIO(expected)):
        with onemodel.load(data) as back, onemodel.load(tmp_path / f"m{suffix}") as ref:
            assert back.format == fmt and onemodel.compare_models(back, ref) == []


def test_to_bytes_without_a_format_writes_the_format_the_model_came_from(tmp_path):
    """``to_bytes(m)`` is ``to_bytes(m, format=m.format)``; a model built in memory (no
    format) gives ONNX bytes, as ``ModelProto.SerializeToString()`` would."""
    onnx_bytes = (_root() / CNN).read_bytes()
    with onemodel.load(_root() / CNN) as m:
        assert onemodel.to_bytes(m) == onnx_bytes  # inline ONNX: written back byte for byte
        onemodel.save(m, tmp_path / "m.onemodel")
    with onemodel.load(tmp_path / "m.onemodel") as m:
        assert m.format == "onemodel"
        assert onemodel.to_bytes(m) == (tmp_path / "m.onemodel").read_bytes()
        assert onemodel.to_bytes(m, format="onnx") == onnx_bytes
    built = Model(ir_version=9, producer_name="hand")
    data = onemodel.to_bytes(built)
    proto = onnx.ModelProto()
    proto.ParseFromString(data)
    assert (proto.ir_version, proto.producer_name) == (9, "hand")
    assert data == proto.SerializeToString()
    with pytest.raises(TypeError, match="format must be a format name"):
        onemodel.to_bytes(built, 3)


def test_a_file_object_without_a_name_needs_the_format(tmp_path):
    import io

    with onemodel.load(_root() / CNN) as m:
        f = io.BytesIO()
        with pytest.raises(UnsupportedError, match="no file name; give the format"):
            onemodel.save(m, f)
        assert f.getvalue() == b""
        with pytest.raises(UnsupportedError, match="unknown format 'onx'"):
            onemodel.to_bytes(m, format="onx")


def test_a_failed_write_leaves_a_seekable_file_object_as_it_was(monkeypatch):
    import io

    from onemodel.errors import IoError

    def failing_write(model, sink):
        sink.write(b"half a model")
        raise IoError("disk on fire")

    monkeypatch.setitem(formats._PLUGINS, "failing-toy",
                        Plugin("failing-toy", (), lambda head: False, None, failing_write))
    f = io.BytesIO(b"keep")
    f.seek(4)
    with pytest.raises(IoError, match="disk on fire"):
        onemodel.save(Model(ir_version=9), f, format="failing-toy")
    assert f.getvalue() == b"keep" and f.tell() == 4


def test_a_raw_file_object_that_takes_few_bytes_per_call_gets_them_all():
    import io

    class Trickle(io.RawIOBase):
        def __init__(self):
            self.data = bytearray()

        def writable(self):
            return True

        def write(self, b):
            n = min(len(b), 7)
            self.data += bytes(b[:n])
            return n

    t = Trickle()
    with onemodel.load(_root() / CNN) as m:
        onemodel.save(m, t, format="onnx")
    assert bytes(t.data) == (_root() / CNN).read_bytes()


def test_text_file_objects_are_refused(tmp_path):
    import io

    with onemodel.load(_root() / CNN) as m:
        with pytest.raises(TypeError, match="binary file object"):
            onemodel.save(m, io.StringIO(), format="onnx")
    with open(tmp_path / "t.onnx", "w") as f, pytest.raises(TypeError, match="binary"):
        onemodel.save(Model(ir_version=9), f)
    (tmp_path / "t.onnx").write_bytes((_root() / CNN).read_bytes())
    with open(tmp_path / "t.onnx") as f, pytest.raises(TypeError, match="binary"):
        onemodel.load(f)


def test_no_directory_advice_keys_on_the_class_not_the_text():
    # another UnsupportedError whose text starts as the writer's refusal is not rewritten:
    # api.py tells the refusal by its class (NoDataDirectoryError), never by its message
    import pickle

    from onemodel.api import _no_directory
    from onemodel.errors import NoDataDirectoryError

    text = "the model has external data files to write but the sink is not a file; other"
    plain = UnsupportedError(text)
    assert _no_directory(plain, "save", True).message == text
    e = _no_directory(NoDataDirectoryError("x", ["a.bin"]), "save", True)
    assert e.message.startswith('the model has external data files to write and a file '
                                'object has no directory for them: save(..., layout="inline")')
    assert e.files == ("a.bin",)
    back = pickle.loads(pickle.dumps(NoDataDirectoryError("x", ["a.bin"], path="p")))
    assert (type(back), back.message, back.files, back.path) == \
        (NoDataDirectoryError, "x", ("a.bin",), "p")


def test_external_data_cannot_go_to_a_file_object_unless_inline(tmp_path):
    import io

    path = _external_model(tmp_path)
    with onemodel.load(path) as m:
        # the message says what to pass to the call that was made; bytes have no base_dir
        with pytest.raises(UnsupportedError) as e:
            onemodel.save(m, io.BytesIO(), format="onnx")
        assert 'a file object has no directory for them: save(..., layout="inline")' in \
            e.value.message and "base_dir=" in e.value.message
        for layout in ("file", "keep", "per_tensor"):
            with pytest.raises(UnsupportedError) as e:
                onemodel.to_bytes(m, format="onnx", layout=layout)
            assert e.value.message == (
                "the model has external data files to write and bytes in memory have no "
                'directory for them: to_bytes(..., layout="inline") puts every tensor in the '
                "one buffer"), layout
            # told by its class and fields, not its text (issue 25 item 3)
            assert isinstance(e.value, onemodel.NoDataDirectoryError), layout
            # the data file each layout would write: its own name (keep), the default of a
            # sink without a name (file), one per tensor named for it (per_tensor)
            assert e.value.files == {"keep": ("w.bin",), "file": ("model.onnx.data",),
                                     "per_tensor": ("w",)}[layout], layout
        # to_bytes gives one whole model by default: every tensor inline, as an explicit
        # layout="inline" gives, read back whole by onemodel and by the onnx package
        data = onemodel.to_bytes(m, format="onnx")
        assert data == onemodel.to_bytes(m, format="onnx", layout="inline")
        proto = onnx.load_from_string(data)
        assert [t.data_location for t in proto.graph.initializer] == [onnx.TensorProto.DEFAULT]
        assert np.array_equal(numpy_helper.to_array(proto.graph.initializer[0]),
                              np.arange(512, dtype=np.float32))
        with onemodel.load(data) as back:
            (t,) = back.graph.initializers
            assert np.array_equal(t.numpy(), np.arange(512, dtype=np.float32))
        # base_dir opts out: the data file is written there, the bytes keep the reference
        out = tmp_path / "out"
        out.mkdir()
        refs = onnx.load_from_string(onemodel.to_bytes(m, format="onnx", base_dir=str(out)))
        assert refs.graph.initializer[0].data_location == onnx.TensorProto.EXTERNAL
        assert (out / "w.bin").read_bytes() == np.arange(512, dtype=np.float32).tobytes()
    # read back from a file object: no directory to resolve the data file in, unless given
    with open(path, "rb") as f, pytest.raises(onemodel.InvalidModelError, match="base_dir="):
        onemodel.load(f)
    with open(path, "rb") as f, onemodel.load(f, base_dir=str(tmp_path)) as m:
        assert m.graph.initializers[0].numpy()[511] == 511


def test_an_option_error_keeps_the_names_for_the_command_line(tmp_path):
    import pickle

    from onemodel.errors import OptionError

    with onemodel.load(_root() / CNN) as m:
        with pytest.raises(OptionError) as info:
            onemodel.save(m, tmp_path / "x.onemodel", align=64)
    e = info.value
    assert isinstance(e, UnsupportedError) and e.kind == "Unsupported"
    assert (e.options, e.accepted, e.target) == (("align",), ("digests", "strict_v1"),
                                                 "onemodel output")
    assert e.message == "align does not apply to onemodel output (it takes: digests, strict_v1)"
    flags = {"align": "--align", "strict_v1": "--strict-v1", "digests": "--digests"}
    assert e.spelled(flags.get) == "--align does not apply to onemodel output (it takes: " \
                                   "--digests, --strict-v1)"
    # names the interface does not offer are left out of what it takes
    e2 = OptionError(["inline", "x"], ["base_dir", "strict_v1"], "onemodel output")
    assert e2.message == "inline, x do not apply to onemodel output (it takes: base_dir, " \
                         "strict_v1)"
    assert e2.spelled({"strict_v1": "--strict-v1"}.get) == \
        "inline, x do not apply to onemodel output (it takes: --strict-v1)"
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is OptionError and back.options == e.options and str(back) == str(e)
    assert not (tmp_path / "x.onemodel").exists()


def _defective_onnx(tmp_path, defect):
    """An ONNX file breaking one graph rule: ``duplicate`` (two nodes define ``y``) or
    ``undefined`` (a node reads ``nowhere``, which nothing defines)."""
    if defect == "duplicate":
        nodes = [helper.make_node("Identity", ["x"], ["y"]), helper.make_node("Neg", ["x"], ["y"])]
    else:
        nodes = [helper.make_node("Add", ["x", "nowhere"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", 1, [2])],
                          [helper.make_tensor_value_info("y", 1, [2])])
    path = tmp_path / f"{defect}.onnx"
    onnx.save_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


@pytest.mark.parametrize("defect,message,path", [  # (the field in the ONNX file's terms)
    ("duplicate", "name 'y' is defined twice in one graph", "graph.node[1].output[0]"),
    ("undefined", "input 'nowhere' of node 'Add' is not defined in this graph or an enclosing one",
     "graph.node[0].input[1]"),
])
def test_convert_applies_the_graph_rules_whatever_the_output_format(tmp_path, defect, message,
                                                                    path):
    from onemodel.errors import InvalidModelError

    src = _defective_onnx(tmp_path, defect)
    with onemodel.load(src) as model:  # the ONNX reader is no validator: the file loads
        assert len(model.graph.nodes) == len(onnx.load(str(src)).graph.node)
    for suffix in (".onnx", ".onemodel"):
        dst = tmp_path / f"out{suffix}"
        with pytest.raises(InvalidModelError) as e:
            onemodel.convert(src, dst)
        assert message in str(e.value) and e.value.path == path, suffix
        assert e.value.source == str(src), suffix  # (named as the readers' errors name it)
        assert not dst.exists(), suffix


def test_an_empty_path_is_a_usage_error(tmp_path):
    from onemodel.errors import UsageError

    with pytest.raises(UsageError, match="^empty path$"):
        onemodel.load("")
    with onemodel.load(_root() / CNN) as m, pytest.raises(UsageError, match="^empty path$"):
        onemodel.save(m, "")
    for src, dst in (("", tmp_path / "x.onnx"), (_root() / CNN, "")):
        with pytest.raises(UsageError, match="^empty path$"):
            onemodel.convert(src, dst)
    assert list(tmp_path.iterdir()) == []


def test_storage_options_for_local_files_only_are_refused_by_the_api(tmp_path):
    """issue 24 item 6: the command line refused --storage-option for local files, the Python
    API ignored them silently; both refuse them now, by one check, each in its own spelling."""
    from onemodel.errors import UsageError

    path = _external_model(tmp_path)
    out = tmp_path / "out.onemodel"
    opts = {"anon": True}
    calls = [lambda: onemodel.load(path, storage_options=opts),
             lambda: onemodel.convert(path, out, storage_options=opts),
             lambda: onemodel.verify(path, path, storage_options=opts),
             lambda: onemodel.check(path, storage_options=opts),
             lambda: onemodel.infer(path, storage_options=opts),
             lambda: onemodel.digest(path, storage_options=opts),
             lambda: onemodel.load(path.read_bytes(), storage_options=opts)]
    for call in calls:
        with pytest.raises(UsageError) as e:
            call()
        assert e.value.message.startswith("storage options are for URLs (s3://, https:// ...), "
                                          "but every file of this operation is local")
        assert e.value.message.endswith("they would be ignored; drop storage_options")
    with onemodel.load(path) as model:
        with pytest.raises(UsageError, match=rf"local \({out}\): they would be ignored"):
            onemodel.save(model, out, storage_options=opts)
    assert not out.exists()
    # a URL among the files: the options serve it, the local end does not refuse them
    fsspec = pytest.importorskip("fsspec")
    onemodel.convert(path, "memory://api-opts/m.onemodel", storage_options={"skip": 1})
    assert fsspec.filesystem("memory").cat("/api-opts/m.onemodel")[:8] == \
        onemodel.to_bytes(onemodel.load(path), "onemodel")[:8]


def test_the_command_line_names_its_flag_in_the_same_refusal(tmp_path):
    import subprocess
    import sys

    path = _external_model(tmp_path)
    r = subprocess.run([sys.executable, "-m", "onemodel", "info", str(path), "-S", "anon=true"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("Usage error: storage options are for URLs")
    assert r.stderr.endswith("they would be ignored; drop --storage-option\n")


def test_load_and_check_share_one_open_detect_read_path(tmp_path, monkeypatch):
    """Issue 25 item 6: ``check`` re-implemented the reader's open-detect-read loop; both now go
    through ``formats.open_and_read``, which closes the source and names it in the error when
    the read fails."""
    calls = []
    real = formats.open_and_read

    def spy(target, read, **kw):
        calls.append(str(target))
        return real(target, read, **kw)

    monkeypatch.setattr(formats, "open_and_read", spy)
    with onemodel.load(CNN) as m:
        assert m.format == "onnx"
    assert onemodel.check(CNN).ok
    assert calls == [CNN, CNN]
    bad = tmp_path / "x.onnx"
    bad.write_bytes(b"\x0a\xff")  # a length past the end of the file
    for f in (onemodel.load, onemodel.check):
        with pytest.raises(onemodel.MalformedError) as e:
            f(str(bad))
        assert e.value.source == str(bad)
