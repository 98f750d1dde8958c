"""Tamper evidence that names the change (issue 27, item 3): each change of a signed model is
caught by verify-signature (exit 1) and named, a tensor by name and path, the structure by
node, attribute, opset import or metadata entry (docs/signing.md, "What a difference is named
by")."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from tests.signing.helpers import MODELS, _key_pair, cli


@pytest.fixture(scope="module")
def signed(tmp_path_factory):
    d = tmp_path_factory.mktemp("tamper")
    model = d / "cnn.onnx"
    m = onnx.load(str(MODELS / "cnn_legacy.onnx"))
    m.metadata_props.add(key="author", value="alice")
    onnx.save(m, str(model))
    private, public = _key_pair(d)
    assert cli("sign", model, "--key", private).exit_code == 0
    return d, model, d / "cnn.onnx.sig", public


def _flip_bit(m):
    init = m.graph.initializer[2]  # bn_after_add.weight
    a = numpy_helper.to_array(init).copy()
    a.reshape(-1).view(np.uint32)[5] ^= 1 << 20
    init.CopyFrom(numpy_helper.from_array(a, init.name))


def _attribute(m):
    node = m.graph.node[6]  # BatchNormalization
    next(a for a in node.attribute if a.name == "epsilon").f = 1e-3


def _added_node(m):
    m.graph.node.insert(3, helper.make_node("Identity", ["a"], ["b"], name="extra"))


def _removed_node(m):
    del m.graph.node[3]


def _opset(m):
    m.opset_import[0].version = 18


def _metadata(m):
    m.metadata_props[0].value = "mallory"


def _added_tensor(m):
    m.graph.initializer.append(numpy_helper.from_array(np.ones(3, np.float32), "extra_w"))


def _removed_tensor(m):
    del m.graph.initializer[1]


def _renamed(m):
    old = m.graph.initializer[1].name  # conv2.bias, and its one use
    m.graph.initializer[1].name = "renamed"
    for n in m.graph.node:
        n.input[:] = ["renamed" if i == old else i for i in n.input]


def _swapped(m):  # conv2.weight and onnx::Conv_46, both [16, 16, 3, 3]
    a, b = m.graph.initializer[0], m.graph.initializer[12]
    assert a.dims == b.dims
    a.raw_data, b.raw_data = b.raw_data, a.raw_data


CASES = [
    (_flip_bit, ["tensor bn_after_add.weight at graph.initializers[2] differs"]),
    (_attribute, ["structure: graph node 6 (BatchNormalization "
                  "'/bn_after_add/BatchNormalization') attribute 0 (epsilon) f: epsilon: "]),
    (_added_node, ["structure: graph nodes: 14 vs 15 items: added node 3 (Identity 'extra')"]),
    (_removed_node, ["structure: graph nodes: 14 vs 13 items: removed node 3 (Relu '/Relu')"]),
    (_opset, ["structure: opset import 0 (ai.onnx version 17) version: 17 vs 18"]),
    (_metadata, ["structure: metadata entry 0 (key 'author') value: 'alice' vs 'mallory'"]),
    (_added_tensor, ["tensor extra_w at graph.initializers[14] was not signed (added)",
                     "structure: graph initializers: 14 vs 15 items: added initializer 14 "
                     "(extra_w)"]),
    (_removed_tensor, ["tensor conv2.bias (signed at graph.initializers[1]) is missing",
                       "structure: graph initializers: 14 vs 13 items: removed initializer 1 "
                       "(conv2.bias)"]),
    (_renamed, ["tensor conv2.bias at graph.initializers[1] was renamed to renamed",
                "structure: graph node 4 (Conv '/conv2/Conv') inputs: /conv2/Conv: "
                "['/Relu_output_0', 'conv2.weight', 'conv2.bias'] vs ['/Relu_output_0', "
                "'conv2.weight', 'renamed']",
                "structure: graph initializer 1 (conv2.bias) name: 'conv2.bias' vs 'renamed'"]),
    (_swapped, ["tensor conv2.weight at graph.initializers[0] differs: it holds the contents "
                "signed for tensor onnx::Conv_46 at graph.initializers[12]",
                "tensor onnx::Conv_46 at graph.initializers[12] differs: it holds the contents "
                "signed for tensor conv2.weight at graph.initializers[0]"]),
]


@pytest.mark.parametrize("tamper, said", CASES, ids=[c[0].__name__.strip("_") for c in CASES])
def test_tamper_is_caught_and_named(signed, tmp_path, tamper, said):
    _, model, sig, public = signed
    m = onnx.load(str(model))
    tamper(m)
    bad = tmp_path / "bad.onnx"
    onnx.save(m, str(bad))
    r = cli("verify-signature", bad, "--signature", sig, "--key", public)
    assert r.exit_code == 1, r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == len(said), r.output
    for line, want in zip(lines, said):
        assert line.startswith("invalid: " + want), (line, want)


def test_tamper_named_in_another_layout_and_partly(signed, tmp_path):
    """The same naming when the tampered model is a OneModel file, and with --tensors (the
    structure is always checked; a tensor only when read)."""
    import onemodel

    _, model, sig, public = signed
    m = onnx.load(str(model))
    _attribute(m)
    _flip_bit(m)
    src = tmp_path / "bad.onnx"
    onnx.save(m, str(src))
    om = tmp_path / "bad.onemodel"
    onemodel.convert(str(src), str(om))
    r = cli("verify-signature", om, "--signature", sig, "--key", public)
    assert r.exit_code == 1
    lines = r.output.strip().splitlines()
    assert lines[0] == "invalid: tensor bn_after_add.weight at graph.initializers[2] differs"
    assert lines[1].startswith("invalid: structure: graph node 6 (BatchNormalization")
    r = cli("verify-signature", om, "--signature", sig, "--key", public, "--tensors", "fc.bias")
    assert r.exit_code == 1
    assert [x.split(" (")[0] for x in r.output.strip().splitlines()] == [
        "invalid: structure: graph node 6"]


def test_a_bundle_without_structure_says_what_it_can(signed, tmp_path):
    """A bundle whose onemodel field has no structure (signed by an earlier onemodel) still
    catches a structural change, and says it cannot name it."""
    import base64
    import json

    from model_signing import hashing
    from model_signing._signing import sign_ec_key
    from model_signing._signing import signing as ms_signing

    from onemodel.signing.sign import content_field

    d, model, _, _ = signed
    private, public = _key_pair(tmp_path, stem="old")
    content = content_field(str(model))
    del content["structure"]
    payload = ms_signing.Payload(hashing.Config().use_file_serialization().hash(model))
    payload.statement.pb.predicate.update({"onemodel": content})
    sig = tmp_path / "old.sig"
    sign_ec_key.Signer(private).sign(payload).write(sig)
    statement = json.loads(base64.b64decode(json.loads(sig.read_text())
                                            ["dsseEnvelope"]["payload"]))
    assert "structure" not in statement["predicate"]["onemodel"]
    m = onnx.load(str(model))
    _opset(m)
    bad = tmp_path / "bad.onnx"
    onnx.save(m, str(bad))
    r = cli("verify-signature", bad, "--signature", sig, "--key", public)
    assert r.exit_code == 1
    assert r.output.strip() == (
        "invalid: the structure differs (graph, nodes, attributes or metadata); every tensor "
        "is as signed: this bundle carries no signed structure to name what differs")


def test_a_structure_that_is_not_the_signed_digest_is_malformed(signed, tmp_path):
    """The structure must hash to the signed model digest (a signer's inconsistent field)."""
    import base64

    from model_signing import hashing
    from model_signing._signing import sign_ec_key
    from model_signing._signing import signing as ms_signing

    from onemodel.signing.sign import content_field

    _, model, _, _ = signed
    private, public = _key_pair(tmp_path, stem="odd")
    content = content_field(str(model))
    content["structure"]["base64"] = base64.b64encode(b"\x08\x07").decode()
    payload = ms_signing.Payload(hashing.Config().use_file_serialization().hash(model))
    payload.statement.pb.predicate.update({"onemodel": content})
    sig = tmp_path / "odd.sig"
    sign_ec_key.Signer(private).sign(payload).write(sig)
    other = tmp_path / "other.onemodel"  # another layout: the content is compared
    import onemodel

    onemodel.convert(str(model), str(other))
    r = cli("verify-signature", other, "--signature", sig, "--key", public)
    assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1
    assert "structure does not hash to its model digest" in r.output
