"""The version adapters of GRU, LSTM, RNN (1 -> 3 -> 7), Scan (8 -> 9), Upsample (1 -> 7) and
GroupNormalization (18 -> 21), proved by execution: a small model converted up and down,
``check`` clean after each step, and the evaluator's outputs equal to the original's (float
arithmetic within rtol 1e-5 of float64 references computed here), or the refusal naming the
node and the reason."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper
from opset_models import F64, F, model, ops, run, through, value

from onemodel.opset_convert import ConversionRefused, convert

RNG = np.random.default_rng(2026)


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def gru64(x, w, r, b, lbr=0):
    """GRU, forward, one direction, f = sigmoid, g = tanh, in float64: (Y, Y_h)."""
    n = r.shape[-1]
    w, r, b = w[0].astype(np.float64), r[0].astype(np.float64), b[0].astype(np.float64)
    wb, rb = b[:3 * n], b[3 * n:]
    h = np.zeros((x.shape[1], n))
    ys = []
    for t in range(x.shape[0]):
        xt = x[t].astype(np.float64)
        z = sigmoid(xt @ w[:n].T + h @ r[:n].T + wb[:n] + rb[:n])
        rg = sigmoid(xt @ w[n:2 * n].T + h @ r[n:2 * n].T + wb[n:2 * n] + rb[n:2 * n])
        if lbr:
            hh = np.tanh(xt @ w[2 * n:].T + rg * (h @ r[2 * n:].T + rb[2 * n:]) + wb[2 * n:])
        else:
            hh = np.tanh(xt @ w[2 * n:].T + (rg * h) @ r[2 * n:].T + rb[2 * n:] + wb[2 * n:])
        h = (1 - z) * hh + z * h
        ys.append(h)
    return np.stack(ys)[:, None], h[None]


SEQ, BATCH, IN, HID = 4, 2, 3, 5
XS = RNG.standard_normal((SEQ, BATCH, IN)).astype(np.float32)


def rnn_weights(gates):
    return {"W": RNG.standard_normal((1, gates * HID, IN)).astype(np.float32) * 0.5,
            "R": RNG.standard_normal((1, gates * HID, HID)).astype(np.float32) * 0.5,
            "B": RNG.standard_normal((1, 2 * gates * HID)).astype(np.float32) * 0.1}


def test_gru_1_up_to_7_and_14_and_back_to_1():
    """GRU-1 with its default direction (the misspelt 'foward': forward) computes as GRU-3
    with 'forward'; output_sequence goes at 7; down again, direction is written out and
    output_sequence=1 says Y is given."""
    wts = rnn_weights(3)
    m = model([helper.make_node("GRU", ["x", "W", "R", "B"], ["y", "y_h"], hidden_size=HID,
                                output_sequence=1)],
              [value("x", F, [SEQ, BATCH, IN])], [value("y"), value("y_h")], 1,
              initializers=wts)
    want = gru64(XS, wts["W"], wts["R"], wts["B"])
    for got, w in zip(run(m, {"x": XS}), want):
        np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-6)
    up = through(m, [3, 7, 14, 22], {"x": XS}, want, rtol=1e-5, atol=1e-6)
    node = up.graph.nodes[0]
    assert node.attribute("output_sequence") is None and node.attribute("direction") is None
    low = through(up, [7, 3, 1], {"x": XS}, want, rtol=1e-5, atol=1e-6)
    node = low.graph.nodes[0]
    assert node.attribute("direction").s == b"forward"
    assert node.attribute("output_sequence").i == 1


def test_gru_7_without_y_h_goes_down_to_1_with_y_h_named():
    """GRU-1 requires Y_h: a GRU-7 that omits it gets a fresh name for it going down."""
    wts = rnn_weights(3)
    m = model([helper.make_node("GRU", ["x", "W", "R", "B"], ["y"], hidden_size=HID,
                                direction="forward")],
              [value("x", F, [SEQ, BATCH, IN])], [value("y")], 7, initializers=wts)
    want = gru64(XS, wts["W"], wts["R"], wts["B"])[:1]
    low = through(m, [3, 1], {"x": XS}, want, rtol=1e-5, atol=1e-6)
    outs = low.graph.nodes[0].outputs
    assert outs[0] == "y" and len(outs) == 2 and outs[1] and outs[1] != "y"
    through(low, [7], {"x": XS}, want, rtol=1e-5, atol=1e-6)


def test_gru_linear_before_reset_1_is_refused_below_3_naming_the_node():
    wts = rnn_weights(3)
    m = model([helper.make_node("GRU", ["x", "W", "R", "B"], ["y", "y_h"], hidden_size=HID,
                                linear_before_reset=1)],
              [value("x", F, [SEQ, BATCH, IN])], [value("y"), value("y_h")], 7,
              initializers=wts)
    want = gru64(XS, wts["W"], wts["R"], wts["B"], lbr=1)
    for got, w in zip(run(m, {"x": XS}), want):
        np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-6)
    through(m, [3], {"x": XS}, want, rtol=1e-5, atol=1e-6)
    with pytest.raises(ConversionRefused, match=r"graph\.nodes\[0\].*GRU-7 -> 1.*"
                       r"linear_before_reset=1 has no equivalent before opset 3"):
        convert(m, {"": 1})


@pytest.mark.parametrize("op", ["RNN", "LSTM"])
def test_rnn_and_lstm_1_up_to_7_and_back(op):
    gates = 1 if op == "RNN" else 4
    wts = rnn_weights(gates)
    outs = ["y", "y_h"] + (["y_c"] if op == "LSTM" else [])
    m = model([helper.make_node(op, ["x", "W", "R", "B"], outs, hidden_size=HID,
                                output_sequence=1)],
              [value("x", F, [SEQ, BATCH, IN])], [value(o) for o in outs], 1,
              initializers=wts)
    # the reference: the same cell in float64 (tanh for RNN; gates i, o, f, c for LSTM)
    w, r, b = (wts[k][0].astype(np.float64) for k in "WRB")
    g = gates * HID
    h, c = np.zeros((BATCH, HID)), np.zeros((BATCH, HID))
    ys = []
    for t in range(SEQ):
        pre = XS[t].astype(np.float64) @ w.T + h @ r.T + b[:g] + b[g:]
        if op == "RNN":
            h = np.tanh(pre)
        else:
            i, o, f, cc = (pre[:, k * HID:(k + 1) * HID] for k in range(4))
            c = sigmoid(f) * c + sigmoid(i) * np.tanh(cc)
            h = sigmoid(o) * np.tanh(c)
        ys.append(h)
    want = [np.stack(ys)[:, None], h[None]] + ([c[None]] if op == "LSTM" else [])
    for got, wv in zip(run(m, {"x": XS}), want):
        np.testing.assert_allclose(got, wv, rtol=1e-5, atol=1e-6)
    up = through(m, [7, 14], {"x": XS}, want, rtol=1e-5, atol=1e-6)
    assert up.graph.nodes[0].attribute("output_sequence") is None
    low = through(up, [1], {"x": XS}, want, rtol=1e-5, atol=1e-6)
    assert low.graph.nodes[0].attribute("output_sequence").i == 1


# -- Scan 8 <-> 9 -------------------------------------------------------------------------------

def scan_body():
    """State s [2] accumulates the scanned rows x [2]; the scan output is the running sum."""
    return helper.make_graph(
        [helper.make_node("Add", ["s", "xi"], ["s2"]),
         helper.make_node("Identity", ["s2"], ["out"])], "body",
        [value("s", F, [2]), value("xi", F, [2])], [value("s2", F, [2]), value("out", F, [2])])


def scan8(batch, directions=None, lens=False):
    attrs = {"num_scan_inputs": 1, "body": scan_body()}
    if directions is not None:
        attrs["directions"] = directions
    inputs = [value("init", F, [batch, 2]), value("xs", F, [batch, 3, 2])]
    if lens:
        inputs.append(value("lens", 7, [batch]))
    return model([helper.make_node("Scan", ["lens" if lens else "", "init", "xs"],
                                   ["final", "ys"], **attrs)],
                 inputs, [value("final"), value("ys")], 8)


INIT = RNG.standard_normal((1, 2)).astype(np.float32)
XSCAN = RNG.standard_normal((1, 3, 2)).astype(np.float32)


@pytest.mark.parametrize("reverse", [0, 1])
def test_scan_8_of_batch_1_up_to_9_and_later_and_back(reverse):
    """Squeeze, Scan-9, Unsqueeze compute what the Scan-8 of batch 1 did; down again, the
    Scan-8 between Unsqueeze and Squeeze."""
    m = scan8(1, [reverse] if reverse else None)
    rows = XSCAN[0, ::-1] if reverse else XSCAN[0]
    run_sum = INIT[0] + np.cumsum(rows.astype(np.float64), axis=0)
    want = [run_sum[-1][None], run_sum[None]]
    feeds = {"init": INIT, "xs": XSCAN}
    for got, w in zip(run(m, feeds), want):
        np.testing.assert_allclose(got, w, rtol=1e-6, atol=1e-6)
    up = through(m, [9, 11, 16, 21], feeds, want, rtol=1e-6, atol=1e-6)
    assert ops(up) == ["Squeeze", "Squeeze", "Scan", "Unsqueeze", "Unsqueeze"]
    scan = up.graph.nodes[2]
    assert (scan.attribute("scan_input_directions") is not None) == bool(reverse)
    low = through(up, [10, 8], feeds, want, rtol=1e-6, atol=1e-6)
    scan = next(n for n in low.graph.nodes if n.op_type == "Scan")
    assert scan.inputs[0] == "" and (scan.attribute("directions") is not None) == bool(reverse)
    through(low, [9], feeds, want, rtol=1e-6, atol=1e-6)


def test_scan_9_goes_down_to_8_and_up_again():
    m = model([helper.make_node("Scan", ["init", "xs"], ["final", "ys"], num_scan_inputs=1,
                                body=scan_body())],
              [value("init", F, [2]), value("xs", F, [3, 2])], [value("final"), value("ys")],
              9)
    feeds = {"init": INIT[0], "xs": XSCAN[0]}
    run_sum = INIT[0] + np.cumsum(XSCAN[0].astype(np.float64), axis=0)
    want = [run_sum[-1], run_sum]
    low = through(m, [8], feeds, want, rtol=1e-6, atol=1e-6)
    assert ops(low) == ["Unsqueeze", "Unsqueeze", "Scan", "Squeeze", "Squeeze"]
    through(low, [9, 11], feeds, want, rtol=1e-6, atol=1e-6)


def test_scan_refusals_name_the_node_and_reason():
    with pytest.raises(ConversionRefused, match=r"Scan-8 -> 9.*batch extent of 'init' is 2, "
                       r"not 1"):
        convert(scan8(2), {"": 9})
    with pytest.raises(ConversionRefused, match=r"sequence_lens 'lens' is not a constant "
                       r"equal to the sequence length"):
        convert(scan8(1, lens=True), {"": 9})
    m = model([helper.make_node("Scan", ["init", "xs"], ["final", "ys"], num_scan_inputs=1,
                                body=scan_body(), scan_output_directions=[1])],
              [value("init", F, [2]), value("xs", F, [3, 2])], [value("final"), value("ys")],
              9)
    with pytest.raises(ConversionRefused, match=r"Scan-9 -> 8.*scan_output_directions \[1\]"):
        convert(m, {"": 8})


# -- Upsample 1 <-> 7 ---------------------------------------------------------------------------

def test_upsample_1_up_to_7_and_9_and_back():
    """Upsample-1 has no kernel (operators.families.UNIMPLEMENTED_VERSIONS): its nearest
    upsampling by 2 and 3 is computed here by repetition, and the converted models must give
    it exactly; down, the attributes come back."""
    x = RNG.standard_normal((1, 2, 2, 3)).astype(np.float32)
    want = [np.repeat(np.repeat(x, 2, axis=2), 3, axis=3)]
    m = model([helper.make_node("Upsample", ["x"], ["y"], height_scale=2.0, width_scale=3.0)],
              [value("x", F, [1, 2, 2, 3])], [value("y")], 1)
    up = through(m, [7, 9], {"x": x}, want)
    low = convert(up, {"": 1}).model
    node = low.graph.nodes[0]
    assert node.attribute("height_scale").f == 2.0 and node.attribute("width_scale").f == 3.0
    assert node.attribute("scales") is None and node.inputs == ["x"]
    through(low, [7], {"x": x}, want)


def test_upsample_bilinear_is_linear_at_7_and_other_scales_are_refused():
    m = model([helper.make_node("Upsample", ["x"], ["y"], height_scale=2.0, width_scale=2.0,
                                mode="bilinear")], [value("x", F, [1, 1, 2, 2])], [value("y")], 1)
    up = convert(m, {"": 7}).model
    assert up.graph.nodes[0].attribute("mode").s == b"linear"
    assert list(up.graph.nodes[0].attribute("scales").floats) == [1.0, 1.0, 2.0, 2.0]
    x = np.array([[[[0.0, 1.0], [2.0, 3.0]]]], np.float32)
    # asymmetric linear: output coordinate o maps to o / 2, the last row/column clamped
    axis = np.array([0.0, 0.5, 1.0, 1.0])
    want = 2 * axis[:, None] + axis[None, :]
    np.testing.assert_allclose(run(up, {"x": x})[0][0, 0], want, rtol=0, atol=1e-6)
    assert convert(up, {"": 1}).model.graph.nodes[0].attribute("mode").s == b"bilinear"
    m = model([helper.make_node("Upsample", ["x"], ["y"], scales=[1.0, 2.0, 2.0, 2.0])],
              [value("x", F, [1, 1, 2, 2])], [value("y")], 7)
    with pytest.raises(ConversionRefused, match=r"Upsample-7 -> 1.*scales \[1.0, 2.0, 2.0, "
                       r"2.0\]: Upsample-1 scales only H and W"):
        convert(m, {"": 1})


# -- GroupNormalization 18 <-> 21 ---------------------------------------------------------------

XG = RNG.standard_normal((2, 6, 3, 2))


def group_norm64(x, groups, scale_c, bias_c, eps=1e-5):
    n, c = x.shape[:2]
    g = x.reshape(n, groups, -1)
    y = ((g - g.mean(2, keepdims=True)) / np.sqrt(g.var(2, keepdims=True) + eps))
    y = y.reshape(x.shape)
    return y * scale_c[None, :, None, None] + bias_c[None, :, None, None]


@pytest.mark.parametrize("elem,dtype,tol", [(F, np.float32, 1e-5), (F64, np.float64, 1e-12)])
def test_group_norm_18_constant_per_group_up_and_back(elem, dtype, tol):
    scale = np.array([0.5, 2.0, -1.0], dtype)
    bias = np.array([0.1, 0.0, 0.3], dtype)
    m = model([helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=3)],
              [value("x", elem, [2, 6, 3, 2])], [value("y", elem)], 18,
              initializers={"s": scale, "b": bias})
    x = XG.astype(dtype)
    want = [group_norm64(x.astype(np.float64), 3, np.repeat(scale, 2).astype(np.float64),
                         np.repeat(bias, 2).astype(np.float64))]
    np.testing.assert_allclose(run(m, {"x": x})[0], want[0], rtol=tol, atol=tol)
    up = through(m, [21, 23], {"x": x}, want, rtol=tol, atol=tol)
    assert ops(up) == ["GroupNormalization"]
    scales = {t.name: t.numpy() for t in up.graph.initializers}
    assert [scales[n].tolist() for n in up.graph.nodes[0].inputs[1:]] == \
        [np.repeat(scale, 2).tolist(), np.repeat(bias, 2).tolist()]
    stash = up.graph.nodes[0].attribute("stash_type")
    assert (stash.i if stash is not None else 1) == (11 if dtype == np.float64 else 1)
    low = through(up, [18], {"x": x}, want, rtol=tol, atol=tol)
    assert ops(low) == ["GroupNormalization"]
    kept = {t.name: t.numpy() for t in low.graph.initializers}
    assert kept[low.graph.nodes[0].inputs[1]].tolist() == scale.tolist()


def test_group_norm_18_computed_scale_goes_up_by_reshape_expand_reshape():
    scale = np.array([0.5, 2.0, -1.0], np.float32)
    bias = np.array([0.1, 0.0, 0.3], np.float32)
    m = model([helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=3)],
              [value("x", F, [2, 6, 3, 2]), value("s", F, [3]), value("b", F, [3])],
              [value("y")], 18)
    x = XG.astype(np.float32)
    feeds = {"x": x, "s": scale, "b": bias}
    want = [group_norm64(XG, 3, np.repeat(scale, 2).astype(np.float64),
                         np.repeat(bias, 2).astype(np.float64))]
    up = through(m, [21], feeds, want, rtol=1e-5, atol=1e-5)
    assert ops(up) == ["Reshape", "Expand", "Reshape"] * 2 + ["GroupNormalization"]
    # down again: the per-channel scale is computed, so Mul and Add apply it after
    low = through(up, [18], feeds, want, rtol=1e-5, atol=1e-5)
    assert ops(low)[-5:] == ["GroupNormalization", "Reshape", "Reshape", "Mul", "Add"]


def test_group_norm_21_scale_differing_within_a_group_goes_down_by_mul_and_add():
    scale = np.arange(1, 7, dtype=np.float32) / 4
    bias = np.array([0.0, 0.1, 0.2, 0.3, 0.4, 0.5], np.float32)
    m = model([helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=2)],
              [value("x", F, [2, 6, 3, 2])], [value("y")], 21,
              initializers={"s": scale, "b": bias})
    x = XG.astype(np.float32)
    want = [group_norm64(XG, 2, scale.astype(np.float64), bias.astype(np.float64))]
    np.testing.assert_allclose(run(m, {"x": x})[0], want[0], rtol=1e-5, atol=1e-5)
    low = through(m, [18], {"x": x}, want, rtol=1e-5, atol=1e-5)
    assert ops(low) == ["GroupNormalization", "Reshape", "Reshape", "Mul", "Add"]
    through(low, [21], {"x": x}, want, rtol=1e-5, atol=1e-5)


def test_group_norm_21_stash_type_18_cannot_express_is_refused():
    m = model([helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=2,
                                stash_type=11)],
              [value("x", F, [2, 6, 3, 2])], [value("y")], 21,
              initializers={"s": np.ones(6, np.float32), "b": np.zeros(6, np.float32)})
    with pytest.raises(ConversionRefused, match=r"GroupNormalization-21 -> 18.*stash_type=11 "
                       r"for 'x' of element type 1: GroupNormalization-18 computes the "
                       r"statistics in float"):
        convert(m, {"": 18})


def test_scan_11_negative_axes_go_down_to_9_made_non_negative():
    """Scan-11 admits negative scan axes; down, they are made non-negative with the ranks of
    the scan input and output, and the values stay (rows of xs^T scanned, stacked along the
    last axis)."""
    m = model([helper.make_node("Scan", ["init", "xs"], ["final", "ys"], num_scan_inputs=1,
                                body=scan_body(), scan_input_axes=[-1],
                                scan_output_axes=[-1])],
              [value("init", F, [2]), value("xs", F, [2, 3])], [value("final"), value("ys")],
              11)
    xt = np.ascontiguousarray(XSCAN[0].T)
    feeds = {"init": INIT[0], "xs": xt}
    run_sum = INIT[0] + np.cumsum(XSCAN[0].astype(np.float64), axis=0)
    want = [run_sum[-1], run_sum.T]
    for got, w in zip(run(m, feeds), want):
        np.testing.assert_allclose(got, w, rtol=1e-6, atol=1e-6)
    low = through(m, [10, 9], feeds, want, rtol=1e-6, atol=1e-6)
    node = low.graph.nodes[0]
    assert list(node.attribute("scan_input_axes").ints) == [1]
    assert list(node.attribute("scan_output_axes").ints) == [1]
    with pytest.raises(ConversionRefused, match=r"Scan-9 -> 8.*scan_input_axes \[1\]"):
        convert(low, {"": 8})


# -- the ONNX node conformance cases of these operators -----------------------------------------

#: operator -> the opsets its cases are converted to (each of its definitions' versions)
CONFORMANCE = {"GRU": (1, 3, 7, 14), "LSTM": (1, 7, 14), "RNN": (1, 7, 14),
               "Scan": (8, 9, 11, 16, 25), "GroupNormalization": (18, 21)}


def test_conformance_cases_of_these_operators_convert_and_reproduce(conformance_cases):
    """Every node conformance case of GRU, LSTM, RNN, Scan and GroupNormalization, converted
    to each version of its operator: refused (every node named, a batch-first ``layout`` below
    14 the only reason) or ``check`` clean and the case's expected outputs
    within its tolerances; and converted back to the case's opset, the same again."""
    from test_conformance_sample import _reproduces

    import onemodel
    from onemodel.formats.onnx import decode_model

    tally, failures = {}, []
    for case in conformance_cases:
        if case.kind != "node" or "_expanded" in case.name:
            continue
        m = decode_model(case.model_path.read_bytes())
        if len(m.graph.nodes) != 1 or m.graph.nodes[0].op_type not in CONFORMANCE:
            continue
        op, source = m.graph.nodes[0].op_type, m.opset_version("")
        for v in CONFORMANCE[op]:
            if v == source:
                continue
            try:
                conv = convert(m, {"": v}).model
            except ConversionRefused as e:
                reasons = [r for _, _, r in e.refusals]
                assert all("layout=1" in r for r in reasons), (case.name, v, reasons)
                tally["refused"] = tally.get("refused", 0) + 1
                continue
            errors = onemodel.check(conv).errors
            problem = f"check: {errors[0]}" if errors else _reproduces(case, conv)
            if problem is None:
                problem = _reproduces(case, convert(conv, {"": source}).model)
            if problem:
                failures.append(f"{case.name} -> {v}: {problem}")
            else:
                tally[op, v] = tally.get((op, v), 0) + 1
    assert not failures, "\n".join(failures)
    # the new pairs, reproduced on the conformance data
    assert tally.get(("GRU", 1), 0) >= 5 and tally.get(("GRU", 3), 0) >= 5, tally
    assert tally.get(("LSTM", 1), 0) >= 5 and tally.get(("RNN", 1), 0) >= 5, tally
    assert tally.get(("Scan", 8), 0) == 3 and tally.get(("Scan", 9), 0) == 1, tally
    assert tally.get(("GroupNormalization", 18), 0) == 2, tally


# -- If 11 and Mod 28 down: refused only for the nodes that use what the later one admits ------

def if_model(else_const_shape):
    """If(c): then x + x ([2, 3]); else a constant of ``else_const_shape`` plus x."""
    then = helper.make_graph([helper.make_node("Add", ["x", "x"], ["t"])], "then", [],
                             [value("t", F, None)])
    k = np.full(else_const_shape, 0.5, np.float32)
    other = helper.make_graph(
        [helper.make_node("Constant", [], ["k"], value=helper.make_tensor(
            "kv", F, list(k.shape), k.reshape(-1).tolist())),
         helper.make_node("Add", ["x", "k"], ["e"])], "else", [], [value("e", F, None)])
    return model([helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)],
                 [value("c", 9, []), value("x", F, [2, 3])], [value("y")], 13)


def test_if_down_below_11_when_the_branch_shapes_are_the_same():
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    m = if_model([2, 3])
    for cond, want in ((True, x.astype(np.float64) * 2), (False, x.astype(np.float64) + 0.5)):
        feeds = {"c": np.array(cond), "x": x}
        np.testing.assert_allclose(run(m, feeds)[0], want, rtol=1e-6, atol=1e-6)
        low = through(m, [10, 1], feeds, [want], rtol=1e-6, atol=1e-6)
        through(low, [11, 13], feeds, [want], rtol=1e-6, atol=1e-6)


def test_if_with_branch_shapes_that_differ_is_refused_naming_the_output():
    m = if_model([1, 3])   # the else branch broadcasts to [2, 3] too: shapes [2,3] and [2,3]
    assert convert(m, {"": 10}).model is not None
    m = if_model([4, 2, 3])
    with pytest.raises(ConversionRefused, match=r"If-13 -> 10.*output 0 has shape \[2, 3\] "
                       r"from then_branch and \[4, 2, 3\] from else_branch"):
        convert(m, {"": 10})
    # a branch output of unknown rank: not known to be the same
    then = helper.make_graph([helper.make_node("Identity", ["z"], ["t"])], "then", [],
                             [value("t", F, None)])
    other = helper.make_graph([helper.make_node("Identity", ["z"], ["e"])], "else", [],
                              [value("e", F, None)])
    m = model([helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)],
              [value("c", 9, []), value("z", F, None)], [value("y")], 11)
    with pytest.raises(ConversionRefused, match=r"output 0 has shape \? from then_branch and "
                       r"\? from else_branch, not known to be the same"):
        convert(m, {"": 10})


def test_mod_28_down_keeps_the_fmod_each_type_had_and_refuses_the_new_pairings():
    a = np.array([7, -7, 7, -7], np.int64)
    b = np.array([3, 3, -3, -3], np.int64)
    m = model([helper.make_node("Mod", ["a", "b"], ["y"])],
              [value("a", 7, [4]), value("b", 7, [4])], [value("y", 7)], 28)
    want = [np.mod(a, b)]                      # the sign of the divisor: [1, 2, -2, -1]
    through(m, [13, 10, 28], {"a": a, "b": b}, want)
    af, bf = a.astype(np.float32), b.astype(np.float32)
    m = model([helper.make_node("Mod", ["a", "b"], ["y"], fmod=1)],
              [value("a", F, [4]), value("b", F, [4])], [value("y")], 28)
    through(m, [13, 10, 28], {"a": af, "b": bf}, [np.fmod(af, bf)])
    m = model([helper.make_node("Mod", ["a", "b"], ["y"])],
              [value("a", F, [4]), value("b", F, [4])], [value("y")], 28)
    with pytest.raises(ConversionRefused, match=r"Mod-28 -> 13.*fmod=0 on floating-point "
                       r"values: Mod-13 takes fmod=1 for them"):
        convert(m, {"": 13})
