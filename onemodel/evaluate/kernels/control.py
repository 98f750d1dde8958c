"""Control-flow operators: If, Loop and Scan (ONNX operators, default domain).

Each kernel evaluates its body graph (a GRAPH attribute, an :class:`onemodel.ir.Graph`) through
``ctx.run_graph(graph, inputs)``, which sees the enclosing scope (ONNX Part 1, Clause 5.4.3).
Values are numpy arrays, Python lists for sequences and ``None`` for an empty optional.
"""

from __future__ import annotations

import numpy as np

from ...errors import EvaluationError, InvalidModelError
from ...ir.dtypes import INFO
from ...operators import kernel
from ..memory import Accumulation, memory_budget
from ._util import axis_index


def _nbytes(value) -> int:
    """The bytes of a scan output slice (a tensor; another value counts nothing)."""
    return getattr(value, "nbytes", 0)


def _sequence_bytes(seq: list, before: tuple | None) -> tuple:
    """``(length, last element, bytes of its tensors)`` of a loop-carried sequence, from the
    same of the previous iteration: a sequence grown by one at the end (SequenceInsert's usual
    use in a Loop) adds its last tensor's bytes, one left as it was costs nothing, anything
    else is summed again."""
    n = len(seq)
    if before is not None:
        length, last, total = before
        if length and n >= length and seq[length - 1] is last:
            if n == length:
                return before
            if n == length + 1:
                return n, seq[-1], total + _nbytes(seq[-1])
    return n, seq[-1] if n else None, sum(_nbytes(x) for x in seq)


class _Stacker:
    """A scan output built in place: each iteration's value is written into one array of shape
    ``[capacity, *value shape]`` as it comes (and the value is dropped), so the stacked result
    is never held twice (an ``np.stack`` of the kept values would need the values and the
    stack at once: twice what the budget counts).

    The array is allocated once the first value gives the shape and dtype. With ``count`` known
    (a Scan's steps; a Loop's trip count M when ``count`` values fit the memory budget) it is
    allocated for all of them at once: memory pages are taken only as they are written. Else it
    grows by an eighth at a time with ``ndarray.resize`` (``realloc``: a large block is moved
    by the kernel, not copied), never past the budget's room unless the values written already
    pass it (the Accumulation then refuses). A Scan output stacked on another axis
    (``scan_output_axes``) is allocated in that final layout, its ``count`` entries at once, and
    written through a view. ``kept`` counts the bytes written; :meth:`result` gives the stack
    ([n, ...] trimmed to the n values written, or the entries on ``axis``).
    """

    __slots__ = ("kept", "count", "reverse", "axis", "buf", "full", "n", "what")

    def __init__(self, kept: Accumulation, count: int | None, what: str, reverse: bool = False,
                 axis: int = 0):
        self.kept, self.count, self.what, self.reverse = kept, count, what, reverse
        self.axis = axis  # (another than 0 only with ``count``: a Scan's scan_output_axes)
        self.buf: np.ndarray | None = None  # entries on axis 0
        self.full: np.ndarray | None = None  # the same array, entries on ``axis`` (not 0)
        self.n = 0

    def append(self, value) -> None:
        """Write one iteration's value (a tensor) as the next entry; EvaluationError when its
        shape differs from the first value's or the budget is passed."""
        v = np.asarray(value)
        buf = self.buf
        if buf is None:
            cap = self.count
            if not self.reverse and not self.axis:  # (else all ``count`` entries are needed)
                room = memory_budget()
                if cap is None or room is None or cap * v.nbytes > room:
                    cap = 8 if cap is None else min(8, cap)
            self.axis = axis_index(self.axis, v.ndim + 1, "Scan output axis")
            if self.axis:  # written in the final layout through a view
                self.full = np.empty(v.shape[:self.axis] + (cap,) + v.shape[self.axis:],
                                     dtype=v.dtype)
                buf = self.buf = np.moveaxis(self.full, self.axis, 0)
            else:
                buf = self.buf = np.empty((cap,) + v.shape, dtype=v.dtype)
        elif v.shape != buf.shape[1:]:
            raise EvaluationError(f"{self.what}: iterations gave values of different shapes "
                                  f"({list(buf.shape[1:])} and {list(v.shape)})")
        elif v.dtype != buf.dtype:
            wider = np.result_type(buf.dtype, v.dtype)
            if self.full is not None:
                self.full = self.full.astype(wider)
                buf = self.buf = np.moveaxis(self.full, self.axis, 0)
            else:
                buf = self.buf = buf.astype(wider)
        self.kept.add(v.nbytes)
        if self.n == len(buf):
            self._grow(v.nbytes)
            buf = self.buf
        buf[len(buf) - 1 - self.n if self.reverse else self.n] = v
        self.n += 1

    def _grow(self, item: int) -> None:
        cap = len(self.buf)
        new = cap + max(cap >> 3, 1)
        if self.count is not None:
            new = min(new, self.count)
        room = memory_budget()
        if room is not None and item:
            new = min(new, max(room // item, cap + 1))
        self.buf.resize((new,) + self.buf.shape[1:], refcheck=False)

    def result(self) -> np.ndarray:
        """The values written, stacked on a new axis 0 (``axis`` when given; in reverse order
        with ``reverse``)."""
        if self.full is not None:  # (a Scan's: all ``count`` entries written)
            return self.full
        buf = self.buf
        if self.n < len(buf):
            if self.reverse:  # (a Scan writes all its steps: only the count given is reversed)
                return buf[len(buf) - self.n:]
            buf.resize((self.n,) + buf.shape[1:], refcheck=False)
        return buf


def _truth(value, what: str) -> bool:
    """The single boolean held by a condition tensor (shape [] or [1])."""
    arr = np.asarray(value)
    if arr.size != 1:
        raise EvaluationError(f"{what} must hold one element, not shape {list(arr.shape)}")
    return bool(arr.reshape(-1)[0])


def _check_count(got: list, want: int, what: str) -> None:
    if len(got) != want:
        raise EvaluationError(f"{what} gave {len(got)} values where {want} are needed")


def _empty_like_output(graph, index: int) -> np.ndarray:
    """An empty stack (0 iterations) for body output ``index``: shape [0, *dims], its dtype.

    Dims the body does not fix are taken as 0; a body without a declared tensor type gives
    float32 of shape [0].
    """
    dtype, dims = np.dtype(np.float32), []
    try:
        ttype = graph.outputs[index].type.tensor_type
    except (AttributeError, IndexError):
        ttype = None
    if ttype is not None:
        info = INFO.get(ttype.elem_type or 0)
        if info is not None:
            dtype = info.dtype
        if ttype.shape is not None:
            dims = [d.dim_value if d.dim_value is not None else 0 for d in ttype.shape.dims]
    return np.empty([0] + dims, dtype=dtype)


@kernel("If")
def if_(ctx, cond):
    """If: evaluate ``then_branch`` when ``cond`` (bool, one element) is true, else ``else_branch``.

    Returns the chosen branch's outputs, one per node output. Every opset version (1, 11, 13,
    16, 19, 21, 23, 24) has these semantics; later versions only widen the allowed types.
    """
    branch = ctx.attrs["then_branch"] if _truth(cond, "If condition") else ctx.attrs["else_branch"]
    outs = ctx.run_graph(branch, [])
    _check_count(outs, ctx.num_outputs, "If branch")
    return tuple(outs)


@kernel("Loop")
def loop(ctx, max_trip_count=None, cond=None, *carried):
    """Loop: run ``body`` while ``i < M`` and ``cond`` holds.

    Inputs: ``M`` (int64 scalar, optional), ``cond`` (bool scalar, optional), then N
    loop-carried initial values (tensors, sequences or optionals). The body takes
    ``(iteration_num, cond, v_1..v_N)`` and returns ``(cond, v_1..v_N, scan_1..scan_K)``.
    Outputs: the N final loop-carried values, then K scan outputs, each the per-iteration values
    stacked on a new axis 0 (a tensor of shape [iterations, ...]).

    When ``cond`` is given, the body's condition output decides whether to go on; when only
    ``M`` is given the body's condition is ignored. When neither is given the ONNX text describes
    a loop without end; this kernel then stops when the body's condition output becomes false.
    A scan output of zero iterations is an empty tensor of shape [0, *dims] (dims the body
    declares, unknown dims as 0). Each scan output value is written into its stack as it comes
    (:class:`_Stacker`: the stack is the only copy held). The scan outputs kept, and the
    tensors of loop-carried sequences (grown by SequenceInsert), are counted against the memory
    budget as they grow (:class:`..memory.Accumulation`): EvaluationError naming the Loop when
    they would pass it, before the machine runs out.
    """
    body = ctx.attrs["body"]
    n_carried = len(carried)
    limit = None if max_trip_count is None else int(np.asarray(max_trip_count).reshape(-1)[0])
    keep_going = True if cond is None else _truth(cond, "Loop condition")
    use_body_cond = cond is not None or max_trip_count is None
    values = list(carried)
    scans: list[_Stacker] | None = None
    kept = Accumulation("the Loop scan outputs")
    carried = Accumulation("the Loop's carried sequences")
    sequences: dict[int, tuple] = {}  # carried index -> _sequence_bytes
    held = 0
    i = 0
    while keep_going and (limit is None or i < limit):
        outs = ctx.run_graph(body, [np.array(i, dtype=np.int64),
                                    np.array(keep_going, dtype=np.bool_)] + values)
        if len(outs) < 1 + n_carried:
            raise InvalidModelError(f"Loop body gave {len(outs)} outputs; it needs at least "
                                    f"{1 + n_carried}")
        if use_body_cond:
            keep_going = _truth(outs[0], "Loop body condition")
        values = list(outs[1:1 + n_carried])
        for k, v in enumerate(values):
            if type(v) is list:
                sequences[k] = _sequence_bytes(v, sequences.get(k))
        if sequences:
            now = sum(s[2] for s in sequences.values())
            if now > held:
                carried.add(now - held)
            held = now
        if scans is None:
            scans = [_Stacker(kept, limit, "Loop scan output") for _ in outs[1 + n_carried:]]
        elif len(outs) - 1 - n_carried != len(scans):
            raise InvalidModelError("Loop body gave a different number of scan outputs")
        for acc, v in zip(scans, outs[1 + n_carried:]):
            acc.append(v)
        del outs
        i += 1
    n_scan = ctx.num_outputs - n_carried
    results: list = list(values)
    for k in range(n_scan):
        if scans is None:
            results.append(_empty_like_output(body, 1 + n_carried + k))
        else:
            results.append(scans[k].result())
    return tuple(results)


def _stack(items: list, axis: int, what: str) -> np.ndarray:
    try:
        return np.stack([np.asarray(x) for x in items], axis=axis)
    except ValueError as e:
        raise EvaluationError(f"{what}: iterations gave values of different shapes ({e})") \
            from None


def _scan_once(ctx, body, states: list, scan_inputs: list, in_axes, in_dirs, out_axes,
               out_dirs):
    """One Scan-9 style pass: iterate along each scan input's axis; returns states and stacks."""
    n_states = len(states)
    lengths = {int(x.shape[a]) for x, a in zip(scan_inputs, in_axes)}
    if len(lengths) > 1:
        raise EvaluationError(f"Scan inputs have different sequence lengths {sorted(lengths)}")
    steps = lengths.pop() if lengths else 0
    scans: list[_Stacker] | None = None
    kept = Accumulation("the Scan outputs")
    for t in range(steps):
        slices = []
        for x, a, d in zip(scan_inputs, in_axes, in_dirs):
            idx = steps - 1 - t if d else t
            slices.append(np.take(x, idx, axis=a))
        outs = ctx.run_graph(body, list(states) + slices)
        if len(outs) < n_states:
            raise InvalidModelError(f"Scan body gave {len(outs)} outputs; it needs at least "
                                    f"{n_states}")
        states = list(outs[:n_states])
        if scans is None:
            scans = [_Stacker(kept, steps, "Scan output", bool(d), a)
                     for _, d, a in zip(outs[n_states:], out_dirs, out_axes)]
        for acc, v in zip(scans, outs[n_states:]):
            acc.append(v)
        del outs
    n_scan_out = len(body.outputs) - n_states
    stacks = []
    for k in range(n_scan_out):
        if not scans:
            stacks.append(_empty_like_output(body, n_states + k))
            continue
        stacks.append(scans[k].result())
    return states, stacks


def _list_attr(ctx, name: str, count: int, default: int) -> list[int]:
    value = ctx.attr(name, None)
    if value is None:
        return [default] * count
    value = list(value)
    if len(value) != count:
        raise InvalidModelError(f"Scan attribute {name} has {len(value)} entries, not {count}")
    return value


@kernel("Scan", since=9)
def scan(ctx, *inputs):
    """Scan (opset 9 and later): N state variables, M scan inputs.

    Inputs: N initial states, then M scan inputs (``num_scan_inputs``). Each iteration the body
    takes the states and one slice of every scan input (along ``scan_input_axes``, default 0;
    backwards where ``scan_input_directions`` is 1) and returns the new states and K scan output
    slices. Outputs: the N final states, then K scan outputs, the slices stacked along
    ``scan_output_axes`` (default 0; negative counts from the end of the stacked rank), in
    reverse order where ``scan_output_directions`` is 1.
    """
    body = ctx.attrs["body"]
    m = int(ctx.attrs["num_scan_inputs"])
    n = len(inputs) - m
    if n < 0:
        raise InvalidModelError(f"Scan has {len(inputs)} inputs but num_scan_inputs is {m}")
    states, scan_inputs = list(inputs[:n]), [np.asarray(x) for x in inputs[n:]]
    k = len(body.outputs) - n
    in_axes = [axis_index(a, x.ndim, "Scan input axis")
               for a, x in zip(_list_attr(ctx, "scan_input_axes", m, 0), scan_inputs)]
    in_dirs = _list_attr(ctx, "scan_input_directions", m, 0)
    out_axes = _list_attr(ctx, "scan_output_axes", k, 0)
    out_dirs = _list_attr(ctx, "scan_output_directions", k, 0)
    states, stacks = _scan_once(ctx, body, states, scan_inputs, in_axes, in_dirs, out_axes,
                                out_dirs)
    return tuple(states + stacks)


@kernel("Scan")
def scan8(ctx, sequence_lens, *inputs):
    """Scan, opset 8: like opset 9 with a leading batch axis and optional ``sequence_lens``.

    Inputs: ``sequence_lens`` (int64 [batch], optional), N initial states of shape
    [batch, ...], M scan inputs of shape [batch, sequence, ...]. Each batch entry is scanned on
    its own over its first ``sequence_lens[b]`` steps (``directions`` 1 scans backwards).
    Outputs: final states [batch, ...] and scan outputs [batch, sequence, ...]; steps past a
    shorter sequence length are zero.
    """
    body = ctx.attrs["body"]
    m = int(ctx.attrs["num_scan_inputs"])
    n = len(inputs) - m
    if n < 0:
        raise InvalidModelError(f"Scan has {len(inputs)} inputs but num_scan_inputs is {m}")
    states = [np.asarray(x) for x in inputs[:n]]
    scan_inputs = [np.asarray(x) for x in inputs[n:]]
    dirs = _list_attr(ctx, "directions", m, 0)
    k = len(body.outputs) - n
    if not scan_inputs:
        raise InvalidModelError("Scan-8 needs at least one scan input")
    batch, max_len = scan_inputs[0].shape[0], scan_inputs[0].shape[1]
    lens = (np.full(batch, max_len, dtype=np.int64) if sequence_lens is None
            else np.asarray(sequence_lens).reshape(-1).astype(np.int64))
    if lens.size != batch or (lens < 0).any() or (lens > max_len).any():
        raise EvaluationError(f"Scan sequence_lens {lens.tolist()} do not fit batch {batch} "
                              f"and sequence length {max_len}")
    final_states: list[list] = [[] for _ in range(n)]
    outputs: list[list] = [[] for _ in range(k)]
    kept = Accumulation("the Scan outputs of the batch")
    for b in range(batch):
        length = int(lens[b])
        seqs = [x[b, :length] for x in scan_inputs]
        st, stacks = _scan_once(ctx, body, [s[b] for s in states], seqs, [0] * m, dirs,
                                [0] * k, [0] * k)
        for acc, v in zip(final_states, st):
            acc.append(np.asarray(v))
        for acc, v in zip(outputs, stacks):
            if length < max_len:
                pad = np.zeros((max_len - length,) + v.shape[1:], dtype=v.dtype)
                v = np.concatenate([v, pad], axis=0)
            acc.append(v)
            kept.add(v.nbytes)
    return tuple([_stack(s, 0, "Scan state") for s in final_states]
                 + [_stack(o, 0, "Scan output") for o in outputs])
