"""RNN, GRU and LSTM computed in float64 from their definitions (ONNX Part 2: RNN, GRU, LSTM,
opsets 7-22), with a first-order bound on the error of a float32 computation of them.

Test helper only: the exact oracle of tests/evaluate/test_rnn.py. It reads the node of a
one-node model (onnx.ModelProto) and its feeds, and returns ``(outputs, scales)``: the outputs
Y, Y_h (and LSTM's Y_c) in float64, in the node's layout, and for each an array ``scale`` of the
same shape such that a float32 computation of the definition, rounding each operation once
(unit roundoff u = EPS32 / 2), is within ``m * u * scale`` of the exact value, to first order in
u, where ``m`` bounds the number of roundings of any one quantity in one step (see
:func:`roundings_per_step`).

How ``scale`` is carried through a step (per element, all magnitudes in float64):

* a gate's pre-activation ``a`` (a sum of products: X W^T, H R^T, biases, peephole P (.) C) gets
  ``sum |terms|`` (each term is rounded at most m times: its product, the sums it goes through)
  plus the previous state's scale carried through the weights: ``S_h |R|^T + |P| S_c``;
* ``clip`` is a contraction: the scale passes unchanged;
* an activation ``y = phi(a)`` gets ``L * S_a``, L the largest ``|phi'|`` on the interval
  ``a +- ulps * EPS32 * S_a`` where the rounded input lies (mean value theorem), plus the
  magnitude its own few roundings are relative to (``|y|`` for the library functions tanh,
  exp, log1p, within a few ulps, and for the products and sums inside phi);
* a product or sum of gates (GRU ``(1 - z) (.) h + z (.) H``, LSTM ``f (.) C + i (.) c``,
  ``o (.) h(C)``) gets the partial derivatives times the operands' scales plus ``|products|``.

Past a sequence's length the state (and its scale) is carried unchanged and Y is 0 with scale 0
(so it must be exactly 0). ThresholdedRelu is not continuous: :func:`recurrent64` refuses
(AssertionError) an input that comes within the bound of its threshold, where no float32
computation can be judged.

Readings of the definition where its text leaves a choice: ``clip`` bounds the inputs of the
gate activations f and g (every gate's pre-activation); LSTM's cell state enters h unclipped
(as onnxruntime's CPU kernel computes it). ``activation_alpha`` / ``activation_beta`` are
consumed in the order of the activation functions (all of the forward direction's, then the
reverse's), each by the functions that take one (Affine, LeakyRelu, ThresholdedRelu,
ScaledTanh, HardSigmoid, Elu take alpha; Affine, ScaledTanh, HardSigmoid take beta); a
function left without one takes its default (the ONNX operator's: LeakyRelu 0.01,
ThresholdedRelu 1, HardSigmoid 0.2 / 0.5, Elu 1; Affine 1 / 0 and ScaledTanh 1 / 1, after the
experimental operators of those names). LSTM ``input_forget`` couples the gates: f = 1 - i.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper

#: float32 machine epsilon, 2u
EPS32 = float(np.finfo(np.float32).eps)
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
DEFAULT_ACTIVATIONS = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"],
                       "LSTM": ["Sigmoid", "Tanh", "Tanh"]}


def roundings_per_step(input_size: int, hidden_size: int) -> int:
    """m: the most float32 roundings any one quantity goes through in one step.

    A gate's pre-activation sums input_size + hidden_size + 2 terms (X W^T, H R^T, Wb, Rb),
    plus LSTM's peephole product P (.) C, or GRU's reset product r (.) H before R^T: in any
    order of summation a term goes through at most (number of terms - 1) sums and 2 products,
    so at most input_size + hidden_size + 3 roundings. An activation rounds its result at
    most 6 times (ScaledTanh: beta*x, tanh, alpha*; Elu: exp, -1, alpha*; libm within 2-4
    ulps), a gate product or sum 3 times: fewer.
    """
    return input_size + hidden_size + 3


class _Activation:
    """One activation function of the definition: value, slope bound, rounding magnitude."""

    def __init__(self, name: str, alpha: float | None, beta: float | None):
        self.name = name.lower()
        self.alpha, self.beta = alpha, beta
        known = ("relu", "tanh", "sigmoid", "affine", "leakyrelu", "thresholdedrelu",
                 "scaledtanh", "hardsigmoid", "elu", "softsign", "softplus")
        if self.name not in known:
            raise ValueError(f"{name!r} is not an activation function of the definition")

    def slope(self, x: np.ndarray, delta: np.ndarray) -> np.ndarray:
        """The largest |phi'| on [x - delta, x + delta] (where the rounded input lies)."""
        a, b, n = self.alpha, self.beta, self.name
        dist = np.maximum(np.abs(x) - delta, 0.0)  # the distance of the interval from 0
        lo, hi = x - delta, x + delta
        if n == "relu":
            return np.where(hi > 0, 1.0, 0.0)
        if n == "tanh":
            return 1.0 - np.tanh(dist) ** 2
        if n == "sigmoid":
            sd = 1.0 / (1.0 + np.exp(-dist))
            return sd * (1.0 - sd)
        if n == "affine":
            return np.full_like(x, abs(a))
        if n == "leakyrelu":
            return np.maximum(np.where(hi >= 0, 1.0, 0.0), np.where(lo < 0, abs(a), 0.0))
        if n == "thresholdedrelu":
            return np.where(hi >= a, 1.0, 0.0)  # the interval does not hold a: _guard
        if n == "scaledtanh":
            return abs(a * b) * (1.0 - np.tanh(abs(b) * dist) ** 2)
        if n == "hardsigmoid":
            ends = np.stack([a * lo + b, a * hi + b])
            return np.where((ends.max(0) > 0) & (ends.min(0) < 1), abs(a), 0.0)
        if n == "elu":
            return np.maximum(np.where(hi >= 0, 1.0, 0.0),
                              np.where(lo < 0, abs(a) * np.exp(np.minimum(hi, 0.0)), 0.0))
        if n == "softsign":
            return 1.0 / (1.0 + dist) ** 2
        return 1.0 / (1.0 + np.exp(-hi))  # softplus' = sigmoid, increasing

    def value(self, x: np.ndarray) -> np.ndarray:
        a, b, n = self.alpha, self.beta, self.name
        if n == "relu":
            return np.maximum(x, 0.0)
        if n == "tanh":
            return np.tanh(x)
        if n == "sigmoid":
            return 1.0 / (1.0 + np.exp(-x))
        if n == "affine":
            return a * x + b
        if n == "leakyrelu":
            return np.where(x >= 0, x, a * x)
        if n == "thresholdedrelu":
            return np.where(x >= a, x, 0.0)
        if n == "scaledtanh":
            return a * np.tanh(b * x)
        if n == "hardsigmoid":
            return np.minimum(np.maximum(a * x + b, 0.0), 1.0)
        if n == "elu":
            return np.where(x >= 0, x, a * (np.exp(np.minimum(x, 0.0)) - 1.0))
        if n == "softsign":
            return x / (1.0 + np.abs(x))
        return np.logaddexp(0.0, x)  # softplus: log(1 + e^x)

    def rounding(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """The magnitude phi's own roundings (at most 6) are relative to."""
        a, b, n = self.alpha, self.beta, self.name
        if n in ("relu", "thresholdedrelu"):
            return np.zeros_like(y)  # selections: exact
        if n in ("affine", "hardsigmoid"):
            return np.abs(a * x) + abs(b)  # a*x and +b rounded
        if n == "scaledtanh":
            return np.abs(y) + np.abs(a * b * x)  # b*x rounded, carried by a*tanh' <= |a|
        if n == "elu":
            return np.where(x >= 0, 0.0, abs(a) * (1.0 + np.exp(np.minimum(x, 0.0))))
        return np.abs(y)  # tanh, sigmoid, leakyrelu, softsign, softplus: relative

    def __call__(self, x, s, ulps):
        """(phi(x), its scale) from the input and its scale; ``ulps * EPS32 * s`` bounds how
        far the rounded input lies from ``x``."""
        y = self.value(x)
        return y, self.slope(x, ulps * EPS32 * s) * s + self.rounding(x, y)


def _activations(op: str, attrs: dict, num_dir: int) -> list[list[_Activation]]:
    per = len(DEFAULT_ACTIVATIONS[op])
    names = attrs.get("activations") or DEFAULT_ACTIVATIONS[op] * num_dir
    if len(names) != per * num_dir:
        raise ValueError(f"{op} takes {per * num_dir} activations, not {names}")
    alphas = list(attrs.get("activation_alpha") or [])
    betas = list(attrs.get("activation_beta") or [])
    defaults = {"affine": (1.0, 0.0), "leakyrelu": (0.01, None), "thresholdedrelu": (1.0, None),
                "scaledtanh": (1.0, 1.0), "hardsigmoid": (0.2, 0.5), "elu": (1.0, None)}
    funcs = []
    for name in names:
        da, db = defaults.get(name.lower(), (None, None))
        a = (alphas.pop(0) if alphas else da) if da is not None else None
        b = (betas.pop(0) if betas else db) if db is not None else None
        funcs.append(_Activation(name, a, b))
    return [funcs[d * per:(d + 1) * per] for d in range(num_dir)]


class _Node:
    """The node's inputs in float64, layout 0, and its attributes."""

    def __init__(self, model: onnx.ModelProto, feeds: dict):
        node = model.graph.node[0]
        self.op = node.op_type
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        for k in ("activations", "direction"):
            if k in attrs:
                v = attrs[k]
                attrs[k] = [s.decode() for s in v] if isinstance(v, list) else v.decode()
        self.attrs = attrs
        names = list(node.input) + [""] * (8 - len(node.input))

        def get(i):
            return np.asarray(feeds[names[i]], np.float64) if names[i] else None

        self.layout = int(attrs.get("layout", 0))
        direction = attrs.get("direction", "forward")
        self.reverse = {"forward": [False], "reverse": [True],
                        "bidirectional": [False, True]}[direction]
        nd = len(self.reverse)
        g = GATES[self.op]
        x = get(0)
        self.x = x.transpose(1, 0, 2) if self.layout else x
        self.w, self.r = get(1), get(2)
        self.hidden = int(attrs.get("hidden_size", self.r.shape[-1]))
        n = self.hidden
        self.seq, self.batch, self.input_size = self.x.shape
        b = get(3)
        self.b = np.zeros((nd, 2 * g * n)) if b is None else b
        lens = feeds[names[4]] if names[4] else None
        self.lens = (np.full(self.batch, self.seq) if lens is None
                     else np.asarray(lens).astype(np.int64).reshape(-1))
        if (self.lens <= 0).any():
            raise ValueError("the definition gives no Y_h for an empty sequence")
        states = [5, 6] if self.op == "LSTM" else [5]
        self.states = []
        for i in states:
            s = get(i)
            if s is None:
                s = np.zeros((nd, self.batch, n))
            elif self.layout:
                s = s.transpose(1, 0, 2)
            self.states.append(s)
        p = get(7) if self.op == "LSTM" else None
        self.p = np.zeros((nd, 3 * n)) if p is None else p
        self.clip = attrs.get("clip")
        self.acts = _activations(self.op, attrs, nd)

    def clipped(self, a):
        return a if self.clip is None else np.clip(a, -self.clip, self.clip)


def _affine(x, h, sh, w, r, bias):
    """A sum of products x w^T + h r^T + sum(bias): (value, sum |terms|, carried scale)."""
    value = x @ w.T + h @ r.T + sum(bias)
    terms = np.abs(x) @ np.abs(w).T + np.abs(h) @ np.abs(r).T + sum(np.abs(b) for b in bias)
    return value, terms, sh @ np.abs(r).T


def _guard(act: _Activation, a, s, ulps: float) -> None:
    if act.name == "thresholdedrelu":
        bound = ulps * EPS32 * s
        assert (np.abs(a - act.alpha) > bound).all(), \
            "a ThresholdedRelu input lies within the float32 bound of its threshold"


def _rnn_step(node, d, x, states, scales, ulps):
    (h,), (sh,) = states, scales
    n = node.hidden
    (f,) = node.acts[d]
    a, t, carried = _affine(x, h, sh, node.w[d], node.r[d], [node.b[d][:n], node.b[d][n:]])
    a = node.clipped(a)
    _guard(f, a, t + carried, ulps)
    y, sy = f(a, t + carried, ulps)
    return y, sy, [y], [sy]


def _gru_step(node, d, x, states, scales, ulps):
    (h,), (sh,) = states, scales
    n = node.hidden
    f, g = node.acts[d]
    w, r, b = node.w[d], node.r[d], node.b[d]
    wz, wr, wh = w[:n], w[n:2 * n], w[2 * n:]
    rz, rr, rh = r[:n], r[n:2 * n], r[2 * n:]
    wbz, wbr, wbh, rbz, rbr, rbh = (b[k * n:(k + 1) * n] for k in range(6))
    gates = []
    for wk, rk, bias in ((wz, rz, [wbz, rbz]), (wr, rr, [wbr, rbr])):
        a, t, carried = _affine(x, h, sh, wk, rk, bias)
        a = node.clipped(a)
        _guard(f, a, t + carried, ulps)
        gates.append(f(a, t + carried, ulps))
    (z, sz), (rg, sr) = gates
    if node.attrs.get("linear_before_reset", 0):
        inner = h @ rh.T + rbh
        t_in, c_in = np.abs(h) @ np.abs(rh).T + np.abs(rbh), sh @ np.abs(rh).T
        a = x @ wh.T + rg * inner + wbh
        t = np.abs(x) @ np.abs(wh).T + np.abs(rg) * t_in + np.abs(wbh)
        carried = np.abs(rg) * c_in + np.abs(inner) * sr
    else:
        q, sq = rg * h, np.abs(rg) * sh + np.abs(h) * sr
        a, t, _ = _affine(x, q, sq, wh, rh, [rbh, wbh])
        carried = sq @ np.abs(rh).T
    a = node.clipped(a)
    _guard(g, a, t + carried, ulps)
    hh, shh = g(a, t + carried, ulps)
    new = (1 - z) * hh + z * h
    s_new = (np.abs(1 - z) * shh + np.abs(h - hh) * sz + np.abs(z) * sh
             + np.abs((1 - z) * hh) + np.abs(z * h))
    return new, s_new, [new], [s_new]


def _lstm_step(node, d, x, states, scales, ulps):
    (h, c), (sh, sc) = states, scales
    n = node.hidden
    f, g, hf = node.acts[d]
    w, r, b, p = node.w[d], node.r[d], node.b[d], node.p[d]
    pi, po, pf = p[:n], p[n:2 * n], p[2 * n:]

    def pre(k, peep, cell, s_cell):
        rows = slice(k * n, (k + 1) * n)
        bias = [b[rows], b[4 * n + k * n:4 * n + (k + 1) * n]]
        a, t, carried = _affine(x, h, sh, w[rows], r[rows], bias)
        if peep is not None:
            a, t, carried = (a + peep * cell, t + np.abs(peep * cell),
                             carried + np.abs(peep) * s_cell)
        return node.clipped(a), t + carried

    def gate(act, a_s):
        _guard(act, *a_s, ulps)
        return act(*a_s, ulps)

    i, si = gate(f, pre(0, pi, c, sc))
    if node.attrs.get("input_forget", 0):
        fg, sf = 1 - i, si + np.abs(1 - i)
    else:
        fg, sf = gate(f, pre(2, pf, c, sc))
    cc, scc = gate(g, pre(3, None, None, None))
    c_new = fg * c + i * cc
    sc_new = (np.abs(fg) * sc + np.abs(c) * sf + np.abs(i) * scc + np.abs(cc) * si
              + np.abs(fg * c) + np.abs(i * cc))
    o, so = gate(f, pre(1, po, c_new, sc_new))
    _guard(hf, c_new, sc_new, ulps)
    hc, shc = hf(c_new, sc_new, ulps)  # h's input is the cell state, unclipped
    h_new = o * hc
    sh_new = np.abs(o) * shc + np.abs(hc) * so + np.abs(h_new)
    return h_new, sh_new, [h_new, c_new], [sh_new, sc_new]


def recurrent64(model: onnx.ModelProto, feeds: dict, *, ulps: float):
    """The exact outputs of the RNN, GRU or LSTM node of ``model`` on ``feeds`` and their
    float32 rounding scales (see the module doc): ``([Y, Y_h(, Y_c)], [scale, ...])``, float64
    arrays in the node's layout.

    Inputs are read by position (X, W, R, B, sequence_lens, initial_h, initial_c, P; ``""``
    or absent: the definition's default: zero biases, full lengths, zero states, zero
    peepholes), attributes from the node. ``ulps`` is the rounding count the caller multiplies
    ``scale`` by (``roundings_per_step`` or more), used only to refuse (AssertionError)
    ThresholdedRelu inputs within the bound of the threshold. ValueError for an empty
    sequence (the definition gives no Y_h for it) or an activation list of the wrong length.
    """
    node = _Node(model, feeds)
    step = {"RNN": _rnn_step, "GRU": _gru_step, "LSTM": _lstm_step}[node.op]
    nd, n, seq, batch = len(node.reverse), node.hidden, node.seq, node.batch
    y = np.zeros((seq, nd, batch, n))
    sy = np.zeros_like(y)
    finals = [np.zeros((nd, batch, n)) for _ in node.states]
    sfinals = [np.zeros_like(f) for f in finals]
    for d, backwards in enumerate(node.reverse):
        states = [s[d] for s in node.states]
        scales = [np.zeros_like(s) for s in states]  # the initial state is given: exact
        for t in (range(seq - 1, -1, -1) if backwards else range(seq)):
            live = (t < node.lens)[:, None]
            out, s_out, new, s_new = step(node, d, node.x[t], states, scales, ulps)
            states = [np.where(live, v, o) for v, o in zip(new, states)]
            scales = [np.where(live, v, o) for v, o in zip(s_new, scales)]
            y[t, d] = np.where(live, out, 0.0)
            sy[t, d] = np.where(live, s_out, 0.0)
        for k in range(len(finals)):
            finals[k][d], sfinals[k][d] = states[k], scales[k]
    if node.layout:
        y, sy = y.transpose(2, 0, 1, 3), sy.transpose(2, 0, 1, 3)
        finals = [f.transpose(1, 0, 2) for f in finals]
        sfinals = [f.transpose(1, 0, 2) for f in sfinals]
    want = [o for o in model.graph.node[0].output]
    outs, scs = [y, *finals], [sy, *sfinals]
    return ([o for o, name in zip(outs, want) if name],
            [s for s, name in zip(scs, want) if name])
