"""Model.close() gives the files back: the map and the descriptor go at once, reading a tensor
afterwards is an Io error, and arrays taken before stay valid."""

from __future__ import annotations

import gc
import os
import pathlib

import numpy as np
import pytest
from onnx import helper, numpy_helper, save

import onemodel
from onemodel.errors import IoError


def _mapped(path) -> bool:
    with open("/proc/self/maps") as f:
        return str(path) in f.read()


def _open_fds(path) -> int:
    fd_dir = "/proc/self/fd"
    return sum(1 for fd in os.listdir(fd_dir)
               if os.path.realpath(os.path.join(fd_dir, fd)) == str(path))


@pytest.fixture
def big_models(tmp_path):
    w = numpy_helper.from_array(np.arange(1 << 19, dtype=np.float32), "w")  # 2 MiB: mapped
    g = helper.make_graph([helper.make_node("Identity", ["w"], ["y"])], "g", [],
                          [helper.make_tensor_value_info("y", 1, [1 << 19])], [w])
    onnx_path = tmp_path / "m.onnx"
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), onnx_path)
    om_path = tmp_path / "m.onemodel"
    onemodel.convert(onnx_path, om_path)
    return onnx_path, om_path


@pytest.mark.parametrize("which", [0, 1], ids=["onnx", "onemodel"])
def test_close_unmaps_and_closes(big_models, which):
    path = big_models[which].resolve()
    m = onemodel.load(path)
    assert _mapped(path)
    m.close()
    assert not _mapped(path) and _open_fds(path) == 0
    with pytest.raises(IoError):
        m.graph.initializers[0].numpy()
    m.close()  # twice is fine


@pytest.mark.parametrize("which", [0, 1], ids=["onnx", "onemodel"])
def test_arrays_taken_before_close_stay_valid(big_models, which):
    path = big_models[which].resolve()
    with onemodel.load(path) as m:
        arr = m.graph.initializers[0].numpy()
    assert arr[12345] == 12345.0  # still mapped, through the array
    del arr, m
    gc.collect()
    assert not _mapped(path) and _open_fds(path) == 0  # and gone with the last array


def test_saving_or_verifying_a_closed_model_is_io_and_writes_nothing(tmp_path):
    """A closed model's tensors are gone: save (both formats) and verify raise IoError, never a
    bare ValueError, and verify does not report the missing contents as a difference."""
    src = pathlib.Path(__file__).resolve().parent.parent / "testdata" / "models" / "cnn_dynamo.onnx"
    model = onemodel.load(src)
    model.close()
    for name in ("m.onemodel", "m.onnx"):
        with pytest.raises(IoError, match="its model was closed"):
            onemodel.save(model, tmp_path / name)
    with pytest.raises(IoError, match="its model was closed"):
        onemodel.verify(model, src)
    assert list(tmp_path.iterdir()) == []
