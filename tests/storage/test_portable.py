"""Portable by construction: with the POSIX/Linux calls other platforms lack hidden (``fcntl``,
``os.splice``, ``os.copy_file_range``, ``os.posix_fallocate``, ``os.O_PATH``), the package
imports, loads a model with external data and converts ONNX -> OneModel -> ONNX through the
portable paths (the buffered copy), giving the same bytes as the fast paths on this machine.
This stands in for the platforms CI cannot run (macOS, Windows)."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")  # builds the fixture only
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import onemodel  # noqa: E402

HIDDEN = ("splice", "copy_file_range", "posix_fallocate", "O_PATH")

SCRIPT = textwrap.dedent("""
    import os, sys
    sys.modules["fcntl"] = None          # import fcntl raises ImportError, as on Windows
    for name in {hidden!r}:
        if hasattr(os, name):
            delattr(os, name)
    import numpy as np
    import onemodel
    from onemodel.storage.local import LocalSink
    buffered = []
    real = LocalSink._buffer_copy
    def counting(self, *a):
        buffered.append(a[-1])
        return real(self, *a)
    LocalSink._buffer_copy = counting
    src, out = sys.argv[1], sys.argv[2]
    m = onemodel.load(src)
    for name, path in (("w0", sys.argv[3]),):
        t = next(t for t in m.graph.initializers if t.name == name)
        want = np.load(path)
        assert t.external is not None and bytes(t.external) == want.tobytes(), name
    m.close()
    onemodel.convert(src, os.path.join(out, "m.onemodel"))
    os.mkdir(os.path.join(out, "back"))
    onemodel.convert(os.path.join(out, "m.onemodel"), os.path.join(out, "back", "m.onnx"))
    assert sum(buffered) >= {big}, buffered   # the portable copy carried the weights
    print("ok")
""")


def _model(tmp_path):
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal((512, 1024)).astype(np.float32)   # 2 MiB: the file-to-file path
    b0 = rng.standard_normal((1024,)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w0"], ["m"]),
         helper.make_node("Add", ["m", "b0"], ["y"])],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 512])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1024])],
        initializer=[numpy_helper.from_array(w0, "w0"), numpy_helper.from_array(b0, "b0")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    src = tmp_path / "src" / "m.onnx"
    src.parent.mkdir()
    onnx.save_model(model, str(src), save_as_external_data=True, location="m.data",
                    size_threshold=0)
    np.save(tmp_path / "w0.npy", w0)
    return src, w0


def _files(root):
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def test_a_conversion_and_an_external_data_load_without_the_posix_fast_paths(tmp_path):
    src, w0 = _model(tmp_path)
    fast, portable = tmp_path / "fast", tmp_path / "portable"
    (fast / "back").mkdir(parents=True)
    portable.mkdir()
    onemodel.convert(src, fast / "m.onemodel")
    onemodel.convert(fast / "m.onemodel", fast / "back" / "m.onnx")
    script = SCRIPT.format(hidden=HIDDEN, big=w0.nbytes)
    run = subprocess.run([sys.executable, "-c", script, str(src), str(portable),
                          str(tmp_path / "w0.npy")], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "ONEMODEL_REQUIRE_C": os.environ.get(
                             "ONEMODEL_REQUIRE_C", "")})
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-3000:]
    got, want = _files(portable), _files(fast)
    assert sorted(got) == ["back/m.data", "back/m.onnx", "m.onemodel"] and got == want
    assert got["back/m.onnx"] == src.read_bytes()
    assert got["back/m.data"] == (src.parent / "m.data").read_bytes()
