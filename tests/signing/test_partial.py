"""verify-signature --tensors / --sample (issue 27): the structure and only the chosen tensors
are checked, and only their bytes are read; over the HTTP Range server, 10% of the tensors of a
model cost at most 12% of its bytes (counted by the server). The sample is the same for the
same seed and signature."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onemodel
from tests.signing.helpers import _key_pair, cli

N = 30  # tensors of 1 MiB each: a 10% sample is 3 of them
ELEMENTS = 1 << 18


def _chain(tamper: dict | None = None) -> onnx.ModelProto:
    """x + w0 + w1 + ... + w29, each w a float32 [262144] initializer (1 MiB); ``tamper``:
    name -> index of the element whose lowest bit is flipped."""
    rng = np.random.default_rng(7)
    inits, nodes, prev = [], [], "x"
    for i in range(N):
        w = rng.standard_normal(ELEMENTS).astype(np.float32)
        if tamper and f"w{i}" in tamper:
            w.view(np.uint32)[tamper[f"w{i}"]] ^= 1
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        nodes.append(helper.make_node("Add", [prev, f"w{i}"], [f"y{i}"], name=f"add{i}"))
        prev = f"y{i}"
    graph = helper.make_graph(
        nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [ELEMENTS])],
        [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [ELEMENTS])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    d = tmp_path_factory.mktemp("chain")
    model = d / "chain.onnx"
    onnx.save(_chain(), str(model))
    private, public = _key_pair(d)
    assert cli("sign", model, "--key", private).exit_code == 0
    return d, model, d / "chain.onnx.sig", public


def _onemodel_bytes(d, proto, name) -> bytes:
    src = d / f"{name}.onnx"
    onnx.save(proto, str(src))
    out = d / f"{name}.onemodel"
    onemodel.convert(str(src), str(out))
    return out.read_bytes()


def test_sample_reads_at_most_12_percent_over_http(chain, http_server):
    d, _, sig, public = chain
    data = _onemodel_bytes(d, _chain(), "served")
    http_server.files["m.onemodel"] = data
    url = http_server.url("m.onemodel")
    r = onemodel.verify_signature(url, str(sig), str(public), sample=0.1)
    assert r.valid and r.how == "partial", r.problems
    assert len(r.checked) == 3  # ceil(0.1 * 30)
    assert http_server.bytes_sent <= 0.12 * len(data), (http_server.bytes_sent, len(data))
    # the same tensors for the same seed, others for another seed
    again = onemodel.verify_signature(url, str(sig), str(public), sample=0.1)
    assert again.checked == r.checked
    other = [onemodel.verify_signature(url, str(sig), str(public), sample=0.1, seed=s).checked
             for s in (1, 2, 3)]
    assert any(set(o) != set(r.checked) for o in other)
    # the whole model: every tensor read
    http_server.reset()
    full = onemodel.verify_signature(url, str(sig), str(public))
    assert full.valid and full.how == "content" and len(full.checked) == N
    assert http_server.bytes_sent >= N * 4 * ELEMENTS


def test_tampered_tensor_reported_inside_the_sample_only(chain, http_server):
    d, _, sig, public = chain
    url = http_server.url("m.onemodel")
    http_server.files["m.onemodel"] = _onemodel_bytes(d, _chain(), "clean")
    chosen = onemodel.verify_signature(url, str(sig), str(public), sample=0.1).checked
    paths = [f"graph.initializers[{i}]" for i in range(N)]
    inside = next(i for i, p in enumerate(paths) if p in chosen)
    outside = next(i for i, p in enumerate(paths) if p not in chosen)
    http_server.files["m.onemodel"] = _onemodel_bytes(d, _chain({f"w{outside}": 5}), "out")
    r = onemodel.verify_signature(url, str(sig), str(public), sample=0.1)
    assert r.valid, r.problems  # not read: not seen
    http_server.files["m.onemodel"] = _onemodel_bytes(d, _chain({f"w{inside}": 5}), "in")
    r = cli("verify-signature", url, "--signature", sig, "--key", public, "--sample", "0.1")
    assert r.exit_code == 1
    assert r.output.strip() == f"invalid: tensor w{inside} at graph.initializers[{inside}] differs"


def test_named_tensors_read_only_theirs(chain, http_server):
    d, model, sig, public = chain
    data = _onemodel_bytes(d, _chain({"w4": 0}), "named")
    http_server.files["m.onemodel"] = data
    url = http_server.url("m.onemodel")
    r = cli("verify-signature", url, "--signature", sig, "--key", public, "--tensors", "w1,w2")
    assert r.exit_code == 0, r.output
    assert "structure and 2 tensors checked" in r.output
    assert http_server.bytes_sent <= 0.12 * len(data)
    r = cli("verify-signature", url, "--signature", sig, "--key", public,
            "--tensors", "w1", "--tensors", "w4")
    assert r.exit_code == 1 and r.output.strip() == (
        "invalid: tensor w4 at graph.initializers[4] differs")
    # a local file: its files are not hashed whole either, the tensors are checked
    r = onemodel.verify_signature(str(model), str(sig), str(public), tensors=["w0"])
    assert r.valid and r.how == "partial" and r.checked == ["graph.initializers[0]"]


def test_structure_is_checked_whatever_the_sample(chain, tmp_path):
    _, _, sig, public = chain
    m = _chain()
    m.graph.node[7].op_type = "Sub"  # no tensor changes
    bad = tmp_path / "bad.onnx"
    onnx.save(m, str(bad))
    r = cli("verify-signature", bad, "--signature", sig, "--key", public, "--sample", "0.1")
    assert r.exit_code == 1
    assert r.output.strip() == ("invalid: structure: graph node 7 (Add 'add7') op_type: "
                                "add7: 'Add' vs 'Sub'")


def test_bad_partial_options_are_usage_errors(chain):
    _, model, sig, public = chain
    for extra, said in ((("--sample", "0"), "sample is a fraction"),
                        (("--sample", "1.5"), "sample is a fraction"),
                        (("--tensors", "nope"), "no tensor named 'nope' was signed"),
                        (("--tensors", "w1", "--sample", "0.5"), "not both"),
                        (("--sample", "0.5", "--seed", str(1 << 63)), "64-bit signed")):
        r = cli("verify-signature", model, "--signature", sig, "--key", public, *extra)
        assert r.exit_code == 2 and said in r.output, r.output
        assert len(r.output.strip().splitlines()) == 1
