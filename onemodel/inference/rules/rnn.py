"""Inference rules of the recurrent operators (the kernels of
``onemodel/evaluate/kernels/rnn.py``, same keys and versions): RNN, GRU, LSTM.

Shapes (ONNX Part 1, operator definitions of Clause 14.3), ``layout`` 0 (the only one before
opset 14): X ``[seq, batch, input]``; W ``[num_directions, gates * hidden, input]``; R
``[num_directions, gates * hidden, hidden]``; B ``[num_directions, 2 * gates * hidden]``;
sequence_lens ``[batch]``; initial_h / initial_c ``[num_directions, batch, hidden]``; LSTM's P
``[num_directions, 3 * hidden]``. Outputs Y ``[seq, num_directions, batch, hidden]``, Y_h (and
LSTM's Y_c) ``[num_directions, batch, hidden]``. ``layout`` 1 puts the batch first: X ``[batch,
seq, input]``, Y ``[batch, seq, num_directions, hidden]``, Y_h ``[batch, num_directions,
hidden]`` (initial states likewise). ``num_directions`` is 2 for ``direction="bidirectional"``,
else 1; ``hidden`` is ``hidden_size`` or R's last extent. Gates: 1 (RNN), 3 (GRU), 4 (LSTM).

Contradictions (Clause 9.4): X not of rank 3, an unknown direction, and weight, bias, state or
length extents that differ from the ones above.
"""

from __future__ import annotations

from ...operators import rule
from .. import dims as D
from ._util import int_attr


def _check(ctx, v, want, what):
    """Unify the extents of input ``v`` with ``want`` (a list of extents, None where free)."""
    s = v.shape if v is not None else None
    if s is None:
        return None
    if len(s) != len(want):
        ctx.contradiction(f"{what} has rank {len(s)}; {len(want)} is needed")
        return None
    return [ctx.unify(w, d, f"{what} extents") if w is not None and d is not None
            else (w if w is not None else d) for w, d in zip(want, s)]


def _recurrent(ctx, gates, n_states, x, w, r, b, seq_lens, states, p=None):
    layout = int_attr(ctx, "layout", 0) if ctx.opset >= 14 else 0
    direction = ctx.attr("direction") or "forward"
    if direction not in ("forward", "reverse", "bidirectional"):
        ctx.contradiction(f"direction {direction!r} is not forward, reverse or bidirectional")
        nd = None
    else:
        nd = 2 if direction == "bidirectional" else 1
    seq = batch = inp = None
    if x.shape is not None:
        if len(x.shape) != 3:
            ctx.contradiction(f"X has rank {len(x.shape)}; 3 is needed")
        else:
            seq, batch, inp = x.shape if not layout else (x.shape[1], x.shape[0], x.shape[2])
    hidden = int_attr(ctx, "hidden_size")
    if hidden is None and r is not None and r.shape is not None and len(r.shape) == 3:
        hidden = r.shape[2]
    gh = D.mul(gates, hidden) if hidden is not None else None
    got = _check(ctx, w, [nd, gh, inp], "W")
    if got is not None:
        inp = got[2]
    _check(ctx, r, [nd, gh, hidden], "R")
    if b is not None:
        _check(ctx, b, [nd, D.mul(2 * gates, hidden) if hidden is not None else None], "B")
    if seq_lens is not None:
        got = _check(ctx, seq_lens, [batch], "sequence_lens")
        if got is not None:
            batch = got[0]
    for s in states:
        if s is not None:
            want = [nd, batch, hidden] if not layout else [batch, nd, hidden]
            got = _check(ctx, s, want, "an initial state")
            if got is not None:
                batch = got[1] if not layout else got[0]
    if p is not None:
        _check(ctx, p, [nd, D.mul(3, hidden) if hidden is not None else None], "P")
    if layout:
        y, final = [batch, seq, nd, hidden], [batch, nd, hidden]
    else:
        y, final = [seq, nd, batch, hidden], [nd, batch, hidden]
    return (y,) + tuple(list(final) for _ in range(n_states))


@rule("RNN")
def rnn(ctx, x, w, r, b=None, sequence_lens=None, initial_h=None):
    """RNN: Y, Y_h (module doc)."""
    return _recurrent(ctx, 1, 1, x, w, r, b, sequence_lens, [initial_h])


@rule("GRU")
def gru(ctx, x, w, r, b=None, sequence_lens=None, initial_h=None):
    """GRU: Y, Y_h (module doc)."""
    return _recurrent(ctx, 3, 1, x, w, r, b, sequence_lens, [initial_h])


@rule("LSTM")
def lstm(ctx, x, w, r, b=None, sequence_lens=None, initial_h=None, initial_c=None, p=None):
    """LSTM: Y, Y_h, Y_c (module doc)."""
    return _recurrent(ctx, 4, 2, x, w, r, b, sequence_lens, [initial_h, initial_c], p)
