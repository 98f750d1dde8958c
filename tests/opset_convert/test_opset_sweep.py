"""tools/opset_sweep.py, the whole conformance sweep of opset conversion, on the cases of two
operators: what it counts and how it groups refusals (the whole run is minutes: its counts are
in docs/opset-sweep.json, rendered into docs/opset-conversion.md)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("opset_sweep", ROOT / "tools" / "opset_sweep.py")
sweep = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sweep)


def test_the_sweep_counts_conversions_refusals_and_round_trips(tmp_path, capsys):
    out = tmp_path / "sweep.json"
    assert sweep.main(["--quick", "--ops", "Softmax,Unsqueeze", "--jobs", "1",
                       "--json", str(out)]) == 0
    s = json.loads(out.read_text())
    c = s["counts"]
    assert s["command"] == "python tools/opset_sweep.py --quick --ops Softmax,Unsqueeze --jobs 1"
    # the node cases of both operators (test_softmax_*, test_unsqueeze_*, their _expanded ones)
    assert c["cases"] == c["cases converted"] >= 20
    outcomes = sum(v for k, v in c.items() if k.split(" ")[0] in sweep.OUTCOMES
                   or k.startswith("not runnable"))
    assert outcomes == c["conversions"] > 40
    assert c["passed up"] > 0 and c["passed down"] > 0
    assert c["round trip passed"] == c["passed down"]
    assert s["problem count"] == 0 and s["problems"] == []
    # Softmax-1..12 normalize over the flattened trailing axes: a non-last axis is refused,
    # and an Unsqueeze whose axes input is computed cannot go below 13
    kinds = s["refusal kinds"]
    assert kinds["an input the target needs constant is computed"] > 0
    assert any(k.startswith("a behaviour the target defines otherwise") for k in kinds)
    assert sum(kinds.values()) == sum(s["refusal reasons"].values()) + \
        s["refusal reasons left out"]
    printed = capsys.readouterr().out
    assert f"conversions {c['conversions']}" in printed and "problems: 0" in printed


def test_targets_reach_every_version_where_the_operators_exist():
    from onnx import TensorProto, helper

    from onemodel.formats.onnx import decode_model

    g = helper.make_graph([helper.make_node("Softmax", ["x"], ["y"]),
                           helper.make_node("Gelu", ["y"], ["z"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2])])
    m = decode_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)])
                     .SerializeToString())
    got = sweep.targets(m)
    # Gelu (20) decomposes below its first definition: every version down to Softmax's 1
    assert got[0] == ("", 20, sweep.latest(""))
    assert [v for _, _, v in got[1:]] == list(range(19, 0, -1))
    assert [v for _, _, v in sweep.targets(m, quick=True)[1:]] == [19, 1]
    assert sweep.reason_kind("input 1 'axes' (axes) is computed, not a constant") == \
        "an input the target needs constant is computed"
