"""Version adapters of the control family (:mod:`onemodel.operators.families`)."""

from __future__ import annotations

from ...ir import Attribute, Node
from ...lazy import np
from ...operators import adapter
from ..generic import _normalized


class Loop11:
    """Loop at 11: loop-carried values became optional (none at all admitted). Down: a Loop
    without one is refused."""

    @staticmethod
    def up(step, node):
        return None

    @staticmethod
    def down(step, node):
        if len(node.inputs) < 3:
            step.refuse(f"no loop-carried value, which Loop-{step.target} requires one of")
        return None


def _node(op_type: str, inputs: list, outputs: list, **attributes) -> Node:
    return Node(op_type=op_type, inputs=list(inputs), outputs=list(outputs),
                attributes=[Attribute.make(k, v) for k, v in attributes.items()])


class Scan9:
    """Scan at 9: the batch axis removed. Scan-8 takes an optional ``sequence_lens`` [batch]
    and N states [batch, ...] and M scan inputs [batch, sequence, ...], and scans each batch
    entry on its own (``directions``); Scan-9 takes no ``sequence_lens``, states [...] and
    scan inputs scanned along ``scan_input_axes`` (default 0), and writes its outputs along
    ``scan_output_axes`` (default 0) in ``scan_output_directions``. The body is the same:
    one batch entry's states and one step's slices.

    Up: a Scan-8 whose batch is 1 (every input's first extent known to be 1) and whose
    sequence_lens is absent or a constant equal to the sequence length is written out as
    Squeeze (axis 0) of every input, the Scan-9 (``scan_input_directions`` from
    ``directions``), and Unsqueeze (axis 0) of every output. Another batch, or a
    sequence_lens that is computed or shorter, is refused: Scan-9 scans one sequence of one
    length. Down: a Scan-9 whose input and output axes are 0 and output directions forward
    is written out as Unsqueeze (axis 0), the Scan-8 of batch 1, and Squeeze (axis 0);
    other axes or reversed outputs are refused."""

    @staticmethod
    def up(step, node):
        m = int(step.attr("num_scan_inputs"))
        given = list(node.inputs[1:])
        if not given or len(given) < m:
            step.refuse(f"{len(given)} inputs after sequence_lens but num_scan_inputs {m}")
        for name in given:
            shape = step.shape(name)
            if not shape or shape[0] != 1:
                step.refuse(f"the batch extent of {name!r} is "
                            f"{'not known' if not shape or shape[0] is None else shape[0]}"
                            f", not 1: Scan-{step.target} has no batch axis, and scanning "
                            "each batch entry on its own is not written out")
        lens_name = step.input(0)
        if lens_name is not None:
            lens = step.constant(lens_name)
            seq = step.shape(given[-1])
            if lens is None or seq is None or len(seq) < 2 or seq[1] is None or \
                    np.asarray(lens).reshape(-1).tolist() != [seq[1]]:
                step.refuse(f"sequence_lens {lens_name!r} is not a constant equal to the "
                            f"sequence length: Scan-{step.target} scans the whole sequence")
        base = node.name or "Scan"
        nodes, squeezed = [], []
        for name in given:
            sq = step.fresh(f"{base}_{name}_unbatched")
            nodes.append(_node("Squeeze", [name], [sq], axes=[0]))
            shape = step.shape(name)
            step.declare(sq, step.elem(name), shape[1:])
            squeezed.append(sq)
        dirs = step.attr("directions")
        step.remove_attr("directions")
        if dirs and any(dirs):
            step.set_attr("scan_input_directions", [int(d) for d in dirs])
        outs, after = [], []
        for name in node.outputs:
            if not name:
                outs.append(name)
                continue
            un = step.fresh(f"{base}_{name}_unbatched")
            shape = step.shape(name)
            step.declare(un, step.elem(name), None if shape is None else shape[1:])
            after.append(_node("Unsqueeze", [un], [name], axes=[0]))
            outs.append(un)
        node.inputs, node.outputs = squeezed, outs
        return [*nodes, node, *after]

    @staticmethod
    def down(step, node):
        m = int(step.attr("num_scan_inputs"))
        for name in ("scan_input_axes", "scan_output_axes", "scan_output_directions"):
            v = step.attr(name)
            if v and any(v):
                step.refuse(f"{name} {list(v)}: Scan-{step.target} scans along axis 1 of its "
                            "batched inputs and writes its outputs forward along axis 1")
        dirs = step.attr("scan_input_directions")
        for name in ("scan_input_axes", "scan_output_axes", "scan_output_directions",
                     "scan_input_directions"):
            step.remove_attr(name)
        if dirs and any(dirs):
            step.set_attr("directions", [int(d) for d in dirs])
        if len(node.inputs) < m:
            step.refuse(f"{len(node.inputs)} inputs but num_scan_inputs {m}")
        base = node.name or "Scan"
        nodes, batched = [], []
        for name in node.inputs:
            b = step.fresh(f"{base}_{name}_batched")
            nodes.append(_node("Unsqueeze", [name], [b], axes=[0]))
            shape = step.shape(name)
            step.declare(b, step.elem(name), None if shape is None else (1, *shape))
            batched.append(b)
        outs, after = [], []
        for name in node.outputs:
            if not name:
                outs.append(name)
                continue
            b = step.fresh(f"{base}_{name}_batched")
            shape = step.shape(name)
            step.declare(b, step.elem(name), None if shape is None else (1, *shape))
            after.append(_node("Squeeze", [b], [name], axes=[0]))
            outs.append(b)
        node.inputs, node.outputs = ["", *batched], outs
        return [*nodes, node, *after]


class Scan11:
    """Scan at 11: negative ``scan_input_axes`` and ``scan_output_axes`` admitted (counted
    from the last axis of the scan input, and of the scan output). Up unchanged; down a
    negative axis is made non-negative with the rank of its input or output (refused when
    that rank is not known)."""

    @staticmethod
    def up(step, node):
        return None

    @staticmethod
    def down(step, node):
        m = int(step.attr("num_scan_inputs"))
        n = len(node.inputs) - m
        for name, values in (("scan_input_axes", node.inputs[n:]),
                             ("scan_output_axes", node.outputs[n:])):
            axes = step.attr(name)
            if not axes or all(a >= 0 for a in axes):
                continue
            fixed = [int(a) if a >= 0 else _normalized(step, int(a), v, name)
                     for a, v in zip(axes, values)]
            step.set_attr(name, fixed)
        return None


def _branch_shape(step, graph, name: str):
    """The extents of ``name``, an output of branch ``graph``: as inference gave them to the
    branch node that computes it, else as the branch declares the output, else as the
    enclosing graph knows the value (an outer-scope value); None when the rank is not
    known."""
    for n in graph.nodes:
        if name in n.outputs:
            dims = step.inferred_dims(n, n.outputs.index(name))
            if dims is not None and all(d is not None for d in dims):
                return list(dims)
            break
    for vi in graph.outputs:
        if vi.name == name and vi.type is not None and vi.type.tensor_type is not None and \
                vi.type.tensor_type.shape is not None:
            return vi.type.tensor_type.shape.extents
    dims = step.dims(name)
    return None if dims is None else list(dims)


class If11:
    """If at 11: the branches may give outputs of different shapes; before, an output had the
    same shape from either branch. Up unchanged. Down: each output's shape from the two
    branches (as inference gives it, or as the branch declares it) must be known and the
    same, else the node is refused naming the output."""

    @staticmethod
    def up(step, node):
        return None

    @staticmethod
    def down(step, node):
        then, other = step.attr("then_branch"), step.attr("else_branch")
        if then is None or other is None:
            step.refuse("a branch is missing")
        for k, (a, b) in enumerate(zip(then.outputs, other.outputs)):
            sa, sb = _branch_shape(step, then, a.name), _branch_shape(step, other, b.name)
            if sa is None or sb is None or None in sa or None in sb or sa != sb:
                shown = ["?" if s is None else [("?" if d is None else d) for d in s]
                         for s in (sa, sb)]
                step.refuse(f"output {k} has shape {shown[0]} from then_branch and {shown[1]} "
                            f"from else_branch, not known to be the same, which "
                            f"If-{step.target} requires")
        return None


adapter("Loop", since=11)(Loop11)
adapter("If", since=11)(If11)
adapter("Scan", since=11)(Scan11)
adapter("Scan", since=9)(Scan9)
