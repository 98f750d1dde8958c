"""Recurrent operators: RNN, GRU and LSTM (ONNX operators, default domain, every opset).

Shapes (``layout`` 0, the default): X [seq_length, batch, input_size]; W [num_directions,
gates * hidden_size, input_size]; R [num_directions, gates * hidden_size, hidden_size];
B [num_directions, 2 * gates * hidden_size] (input biases then recurrence biases);
sequence_lens [batch] (int32); initial_h / initial_c [num_directions, batch, hidden_size];
P [num_directions, 3 * hidden_size] (LSTM peepholes i, o, f). Outputs: Y [seq_length,
num_directions, batch, hidden_size], Y_h (and LSTM's Y_c) [num_directions, batch, hidden_size].
``layout`` 1 (opset 14+) puts the batch axis first: X [batch, seq, input], Y [batch, seq,
num_directions, hidden], Y_h [batch, num_directions, hidden], initial states likewise.

Gates are ordered z, r, h for GRU and i, o, f, c for LSTM. ``direction`` is forward, reverse or
bidirectional; ``activations`` names one function per gate function per direction, with
``activation_alpha`` / ``activation_beta`` consumed in order by the functions that take them;
``clip`` bounds every gate's input. Past ``sequence_lens[b]`` the outputs are zero and the state
stops changing. float16 and bfloat16 inputs are computed in float32 and returned in their type.
"""

from __future__ import annotations

import numpy as np

from ...errors import EvaluationError, InvalidModelError, UnsupportedError
from ...operators import kernel


def _sigmoid(x):
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


#: name (lower case) -> (function of (x, alpha, beta), default alpha or None, default beta or None)
_ACTIVATIONS = {
    "relu": (lambda x, a, b: np.maximum(x, 0), None, None),
    "tanh": (lambda x, a, b: np.tanh(x), None, None),
    "sigmoid": (lambda x, a, b: _sigmoid(x), None, None),
    "affine": (lambda x, a, b: a * x + b, 1.0, 0.0),
    "leakyrelu": (lambda x, a, b: np.where(x >= 0, x, a * x), 0.01, None),
    "thresholdedrelu": (lambda x, a, b: np.where(x >= a, x, 0), 1.0, None),
    "scaledtanh": (lambda x, a, b: a * np.tanh(b * x), 1.0, 1.0),
    "hardsigmoid": (lambda x, a, b: np.clip(a * x + b, 0, 1), 0.2, 0.5),
    "elu": (lambda x, a, b: np.where(x >= 0, x, a * (np.exp(np.minimum(x, 0)) - 1)), 1.0, None),
    "softsign": (lambda x, a, b: x / (1 + np.abs(x)), None, None),
    "softplus": (lambda x, a, b: np.logaddexp(0, x), None, None),
}


def _activations(ctx, defaults: list[str], num_dir: int) -> list[list]:
    """Per direction, the list of gate functions (each a callable of one array)."""
    names = ctx.attr("activations", None) or defaults * num_dir
    per = len(defaults)
    if len(names) == per and num_dir == 2:
        names = names * 2
    if len(names) != per * num_dir:
        raise InvalidModelError(f"activations {names} must name {per * num_dir} functions")
    alphas = list(ctx.attr("activation_alpha", None) or [])
    betas = list(ctx.attr("activation_beta", None) or [])
    funcs = []
    for name in names:
        entry = _ACTIVATIONS.get(name.lower())
        if entry is None:
            raise UnsupportedError(f"RNN activation {name!r} is not supported")
        fn, da, db = entry
        a = alphas.pop(0) if da is not None and alphas else da
        b = betas.pop(0) if db is not None and betas else db
        funcs.append(lambda x, fn=fn, a=a, b=b: fn(x, a, b))
    return [funcs[d * per:(d + 1) * per] for d in range(num_dir)]


def _directions(ctx) -> list[bool]:
    """Per direction, whether it runs backwards."""
    d = ctx.attr("direction", "forward") or "forward"
    if d == "forward":
        return [False]
    if d == "reverse":
        return [True]
    if d == "bidirectional":
        return [False, True]
    raise InvalidModelError(f"direction {d!r} is not forward, reverse or bidirectional")


class _Common:
    """Inputs of a recurrent node after layout normalization, in the compute dtype."""

    def __init__(self, ctx, gates: int, x, w, r, b, sequence_lens, initial_states):
        self.out_dtype = np.asarray(x).dtype
        self.dtype = np.float32 if self.out_dtype.itemsize < 4 else self.out_dtype
        self.layout = int(ctx.attr("layout", 0) or 0)
        x = np.asarray(x).astype(self.dtype)
        if x.ndim != 3:
            raise EvaluationError(f"X must have rank 3, not shape {list(x.shape)}")
        if self.layout:
            x = x.transpose(1, 0, 2)
        self.x = x
        self.seq, self.batch, _ = x.shape
        self.reverse = _directions(ctx)
        self.num_dir = len(self.reverse)
        w = np.asarray(w).astype(self.dtype)
        r = np.asarray(r).astype(self.dtype)
        hidden = ctx.attr("hidden_size", None)
        hidden = int(hidden) if hidden is not None else r.shape[-1]
        self.hidden = hidden
        if w.shape != (self.num_dir, gates * hidden, x.shape[2]):
            raise EvaluationError(f"W has shape {list(w.shape)}, expected "
                                  f"{[self.num_dir, gates * hidden, x.shape[2]]}")
        if r.shape != (self.num_dir, gates * hidden, hidden):
            raise EvaluationError(f"R has shape {list(r.shape)}, expected "
                                  f"{[self.num_dir, gates * hidden, hidden]}")
        self.w, self.r = w, r
        if b is None:
            b = np.zeros((self.num_dir, 2 * gates * hidden), dtype=self.dtype)
        b = np.asarray(b).astype(self.dtype)
        if b.shape != (self.num_dir, 2 * gates * hidden):
            raise EvaluationError(f"B has shape {list(b.shape)}, expected "
                                  f"{[self.num_dir, 2 * gates * hidden]}")
        self.wb, self.rb = b[:, :gates * hidden], b[:, gates * hidden:]
        if sequence_lens is None:
            self.lens = np.full(self.batch, self.seq, dtype=np.int64)
        else:
            self.lens = np.asarray(sequence_lens).reshape(-1).astype(np.int64)
            if self.lens.size != self.batch or (self.lens < 0).any() or \
                    (self.lens > self.seq).any():
                raise EvaluationError(f"sequence_lens {self.lens.tolist()} do not fit batch "
                                      f"{self.batch} and seq_length {self.seq}")
        self.states = []
        for s in initial_states:
            if s is None:
                s = np.zeros((self.num_dir, self.batch, hidden), dtype=self.dtype)
            else:
                s = np.asarray(s).astype(self.dtype)
                if self.layout:
                    s = s.transpose(1, 0, 2)
                if s.shape != (self.num_dir, self.batch, hidden):
                    raise EvaluationError(f"initial state has shape {list(s.shape)}, expected "
                                          f"{[self.num_dir, self.batch, hidden]}")
            self.states.append(s)
        clip = ctx.attr("clip", None)
        self.clip = None if clip is None else float(clip)

    def clipped(self, v):
        return v if self.clip is None else np.clip(v, -self.clip, self.clip)

    def run(self, step) -> list[np.ndarray]:
        """Run ``step(d, x_t, states) -> (h_t, new states)`` over time for every direction.

        Returns [Y, final state 0, final state 1, ...] in the node's layout and dtype.
        """
        y = np.zeros((self.seq, self.num_dir, self.batch, self.hidden), dtype=self.dtype)
        finals = [np.empty_like(s) for s in self.states]
        for d, backwards in enumerate(self.reverse):
            states = [s[d] for s in self.states]
            steps = range(self.seq - 1, -1, -1) if backwards else range(self.seq)
            for t in steps:
                live = (t < self.lens)[:, None]
                h, new = step(d, self.x[t], states)
                states = [np.where(live, n, o) for n, o in zip(new, states)]
                y[t, d] = np.where(live, h, 0)
            for f, s in zip(finals, states):
                f[d] = s
        if self.layout:
            y = y.transpose(2, 0, 1, 3)
            finals = [f.transpose(1, 0, 2) for f in finals]
        return [y.astype(self.out_dtype)] + [f.astype(self.out_dtype) for f in finals]


@kernel("RNN")
def rnn(ctx, x, w, r, b=None, sequence_lens=None, initial_h=None):
    """RNN: ``H_t = f(X_t W^T + H_{t-1} R^T + Wb + Rb)`` (default f = Tanh).

    Outputs: Y, Y_h (shapes in the module doc).
    """
    c = _Common(ctx, 1, x, w, r, b, sequence_lens, [initial_h])
    acts = _activations(ctx, ["Tanh"], c.num_dir)

    def step(d, xt, states):
        (h_prev,) = states
        h = acts[d][0](c.clipped(xt @ c.w[d].T + h_prev @ c.r[d].T + c.wb[d] + c.rb[d]))
        return h, [h]

    return tuple(c.run(step))


@kernel("GRU")
def gru(ctx, x, w, r, b=None, sequence_lens=None, initial_h=None):
    """GRU with gates z (update), r (reset), h (hidden); defaults f = Sigmoid, g = Tanh.

    ``z = f(X Wz^T + H Rz^T + Wbz + Rbz)``, ``r = f(X Wr^T + H Rr^T + Wbr + Rbr)``;
    ``h = g(X Wh^T + (r * H) Rh^T + Rbh + Wbh)``, or with ``linear_before_reset``
    ``h = g(X Wh^T + r * (H Rh^T + Rbh) + Wbh)``; ``H' = (1 - z) * h + z * H``.
    Outputs: Y, Y_h.
    """
    c = _Common(ctx, 3, x, w, r, b, sequence_lens, [initial_h])
    acts = _activations(ctx, ["Sigmoid", "Tanh"], c.num_dir)
    lbr = int(ctx.attr("linear_before_reset", 0) or 0)
    n = c.hidden

    def step(d, xt, states):
        (h_prev,) = states
        f, g = acts[d]
        wz, wr, wh = c.w[d][:n], c.w[d][n:2 * n], c.w[d][2 * n:]
        rz, rr, rh = c.r[d][:n], c.r[d][n:2 * n], c.r[d][2 * n:]
        wbz, wbr, wbh = c.wb[d][:n], c.wb[d][n:2 * n], c.wb[d][2 * n:]
        rbz, rbr, rbh = c.rb[d][:n], c.rb[d][n:2 * n], c.rb[d][2 * n:]
        z = f(c.clipped(xt @ wz.T + h_prev @ rz.T + wbz + rbz))
        rg = f(c.clipped(xt @ wr.T + h_prev @ rr.T + wbr + rbr))
        if lbr:
            pre = xt @ wh.T + rg * (h_prev @ rh.T + rbh) + wbh
        else:
            pre = xt @ wh.T + (rg * h_prev) @ rh.T + rbh + wbh
        hh = g(c.clipped(pre))
        h = (1 - z) * hh + z * h_prev
        return h, [h]

    return tuple(c.run(step))


@kernel("LSTM")
def lstm(ctx, x, w, r, b=None, sequence_lens=None, initial_h=None, initial_c=None, p=None):
    """LSTM with gates i, o, f, c and optional peepholes P (i, o, f); defaults f = Sigmoid,
    g = Tanh, h = Tanh.

    ``i = f(X Wi^T + H Ri^T + Pi * C + Wbi + Rbi)``, ``f = f(... + Pf * C ...)`` (``1 - i`` with
    ``input_forget``), ``c = g(X Wc^T + H Rc^T + Wbc + Rbc)``, ``C' = f * C + i * c``,
    ``o = f(X Wo^T + H Ro^T + Po * C' + Wbo + Rbo)``, ``H' = o * h(C')``. Outputs: Y, Y_h, Y_c.
    """
    c = _Common(ctx, 4, x, w, r, b, sequence_lens, [initial_h, initial_c])
    acts = _activations(ctx, ["Sigmoid", "Tanh", "Tanh"], c.num_dir)
    n = c.hidden
    if p is None:
        p = np.zeros((c.num_dir, 3 * n), dtype=c.dtype)
    p = np.asarray(p).astype(c.dtype)
    if p.shape != (c.num_dir, 3 * n):
        raise EvaluationError(f"P has shape {list(p.shape)}, expected {[c.num_dir, 3 * n]}")
    coupled = int(ctx.attr("input_forget") or 0)

    def step(d, xt, states):
        h_prev, c_prev = states
        f, g, h_act = acts[d]
        gates = xt @ c.w[d].T + h_prev @ c.r[d].T + c.wb[d] + c.rb[d]
        gi, go, gf, gc = gates[:, :n], gates[:, n:2 * n], gates[:, 2 * n:3 * n], gates[:, 3 * n:]
        pi, po, pf = p[d][:n], p[d][n:2 * n], p[d][2 * n:]
        i = f(c.clipped(gi + pi * c_prev))
        fg = 1 - i if coupled else f(c.clipped(gf + pf * c_prev))
        cc = g(c.clipped(gc))
        c_new = fg * c_prev + i * cc
        o = f(c.clipped(go + po * c_new))
        h = o * h_act(c_new)
        return h, [h, c_new]

    return tuple(c.run(step))
