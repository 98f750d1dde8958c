"""The same bundle verified against S3 copies of the signed model on the moto server (issue
27): the file as signed, a OneModel copy and an external-data copy verify by content, wholly or
by --sample; a tampered copy is named."""

from __future__ import annotations

import shutil

import numpy as np
import onnx
from onnx import numpy_helper

import onemodel
from tests.signing.helpers import MODELS, _key_pair, cli


def test_bundle_verifies_s3_copies(s3, tmp_path):
    server, bucket = s3
    opts = server.storage_options
    model = tmp_path / "cnn.onnx"
    shutil.copyfile(MODELS / "cnn_legacy.onnx", model)
    private, public = _key_pair(tmp_path)
    assert cli("sign", model, "--key", private).exit_code == 0
    sig = str(tmp_path / "cnn.onnx.sig")
    om = tmp_path / "cnn.onemodel"
    onemodel.convert(str(model), str(om))
    ext = tmp_path / "ext"
    ext.mkdir()
    onnx.save(onnx.load(str(model)), str(ext / "cnn.onnx"), save_as_external_data=True,
              all_tensors_to_one_file=True, location="cnn.onnx.data", size_threshold=0)
    fs = server.filesystem()
    fs.put(str(model), f"{bucket}/signed/cnn.onnx")
    fs.put(str(om), f"{bucket}/om/cnn.onemodel")
    fs.put(str(ext / "cnn.onnx"), f"{bucket}/ext/cnn.onnx")
    fs.put(str(ext / "cnn.onnx.data"), f"{bucket}/ext/cnn.onnx.data")
    for key in ("signed/cnn.onnx", "om/cnn.onemodel", "ext/cnn.onnx"):
        url = f"s3://{bucket}/{key}"
        r = onemodel.verify_signature(url, sig, str(public), storage_options=opts)
        assert r.valid and r.how == "content", (key, r.problems)
        assert len(r.checked) == len(onemodel.digest(str(model)).tensors)
        r = onemodel.verify_signature(url, sig, str(public), sample=0.2, storage_options=opts)
        assert r.valid and r.how == "partial" and len(r.checked) == 3, (key, r.problems)
    # a tampered copy on S3: named, from the command line with -S options
    m = onnx.load(str(model))
    init = m.graph.initializer[3]
    a = numpy_helper.to_array(init).copy()
    a.reshape(-1).view(np.uint32)[0] ^= 1
    init.CopyFrom(numpy_helper.from_array(a, init.name))
    bad = tmp_path / "bad.onnx"
    onnx.save(m, str(bad))
    fs.put(str(bad), f"{bucket}/bad/cnn.onnx")
    options = [x for k, v in (("key", "testing"), ("secret", "testing"),
                              ("endpoint_url", server.endpoint))
               for x in ("-S", f"{k}={v}")]
    r = cli("verify-signature", f"s3://{bucket}/bad/cnn.onnx", "--signature", sig,
            "--key", public, *options)
    assert r.exit_code == 1, r.output
    assert r.output.strip() == f"invalid: tensor {init.name} at graph.initializers[3] differs"
