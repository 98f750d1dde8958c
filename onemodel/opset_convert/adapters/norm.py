"""Version adapters of the norm family (:mod:`onemodel.operators.families`)."""

from __future__ import annotations

from ...ir import Attribute, Node
from ...lazy import np
from ...operators import adapter
from ..function_body import FunctionBody
from ..generic import LegacyAttribute


def _outputs(node) -> int:
    """How many outputs a node gives (named ones)."""
    return sum(1 for o in node.outputs if o)


class Consumed6(LegacyAttribute):
    """BatchNormalization, InstanceNormalization at 6: consumed_inputs dropped."""


class BatchNormalization7:
    """BatchNormalization at 7: ``is_test`` (default 0: training, batch statistics) dropped;
    from 7 a node of one output is inference. Up: a node with ``is_test`` set and one output
    drops it; training (``is_test`` 0) is refused. Down: a node of one output gets
    ``is_test=1``; one with the training outputs is refused."""

    @staticmethod
    def up(step, node):
        if not step.attr("is_test", 0) or _outputs(node) > 1:
            step.refuse("is_test=0 is training mode (batch statistics), which "
                        f"BatchNormalization-{step.target} writes with its training outputs")
        step.remove_attr("is_test")
        return None

    @staticmethod
    def down(step, node):
        if _outputs(node) > 1:
            step.refuse("the training outputs (mean, var, saved_mean, saved_var)")
        step.set_attr("is_test", 1)
        return None


class BatchNormalization9:
    """BatchNormalization at 9: ``spatial`` (default 1: one mean per channel) dropped. Up:
    ``spatial=0`` is refused; down unchanged."""

    @staticmethod
    def up(step, node):
        if not step.attr("spatial", 1):
            step.refuse("spatial=0 (statistics per element, not per channel) has no "
                        f"equivalent from opset {step.target}")
        step.remove_attr("spatial")
        return None

    @staticmethod
    def down(step, node):
        return None


class BatchNormalization14:
    """BatchNormalization at 14: ``training_mode`` added and the training outputs changed
    (running_mean, running_var instead of mean, var, saved_mean, saved_var). A node of one
    output (inference) is the same in both; one with more outputs, or with training_mode=1,
    is refused."""

    @staticmethod
    def up(step, node):
        if _outputs(node) > 1:
            step.refuse("the training outputs of opset 9 (mean, var, saved_mean, saved_var) "
                        f"differ from those of opset {step.target}")
        return None

    @staticmethod
    def down(step, node):
        if step.attr("training_mode", 0) or _outputs(node) > 1:
            step.refuse("training mode (training_mode=1 or the running_mean/running_var "
                        "outputs)")
        step.remove_attr("training_mode")
        return None


class LayerNormalization17:
    """LayerNormalization, introduced at 17: below it, written out as the definition's own
    function body for one output: with ``axes`` the axes from ``axis`` on,
    ``mean = ReduceMean(X)``, ``D = X - mean``, ``Y = D / Sqrt(ReduceMean(D * D) + epsilon)
    * Scale (+ B)``, in X's element type (float or double: ``stash_type`` computes float16
    in float, which is not written out here). Refused when the Mean or InvStdDev output is
    used, or X's element type is not float or double."""

    #: attached to the first definition: converts below it
    decomposition = True

    @staticmethod
    def up(step, node):
        return None  # a first definition: nothing comes before it to go up from

    @staticmethod
    def down(step, node):
        if any(o for o in node.outputs[1:]):
            step.refuse("the Mean and InvStdDev outputs are not written out")
        x = step.input(0)
        code = step.elem(x)
        if code not in (1, 11):
            step.refuse(f"the element type of {x!r} is not known to be float or double")
        axis = int(step.attr("axis", -1))
        r = step.rank(x)
        if axis >= 0:
            if r is None:
                step.refuse(f"axis {axis} and the rank of {x!r} is not known")
            axis -= r
        axes = list(range(axis, 0))
        base = node.name or "LayerNormalization"
        mean, d, dd, var, ve, std, n = (step.fresh(f"{base}_{k}") for k in
                                       ("mean", "d", "dd", "var", "ve", "std", "norm"))
        dtype = np.float32 if code == 1 else np.float64
        eps = step.add_constant(np.asarray(step.attr("epsilon"), dtype), "epsilon")
        y = node.outputs[0]
        scaled = step.fresh(f"{base}_scaled") if step.input(2) else y
        for name in (mean, d, dd, var, ve, std, n, scaled):
            step.declare(name, code)

        def mk(op, ins, outs, **attrs):
            return Node(op_type=op, inputs=ins, outputs=outs,
                        attributes=[Attribute.make(k, v) for k, v in attrs.items()])

        nodes = [mk("ReduceMean", [x], [mean], axes=axes, keepdims=1),
                 mk("Sub", [x, mean], [d]),
                 mk("Mul", [d, d], [dd]),
                 mk("ReduceMean", [dd], [var], axes=axes, keepdims=1),
                 mk("Add", [var, eps], [ve]),
                 mk("Sqrt", [ve], [std]),
                 mk("Div", [d, std], [n]),
                 mk("Mul", [n, step.input(1)], [scaled])]
        if step.input(2):
            nodes.append(mk("Add", [scaled, step.input(2)], [y]))
        return nodes


class GroupNormalization21:
    """GroupNormalization at 21: ``scale`` and ``bias`` hold one value per channel [C]
    instead of one per group [num_groups], and ``stash_type`` (default 1, float) says the
    precision of the statistics; GroupNormalization-18 computes them in X's type (float16 and
    bfloat16 widened to float, double in double).

    Up: constant scale and bias are repeated per channel (C / num_groups times each) into new
    constants; computed ones are repeated by Reshape [G, 1], Expand [G, C / G], Reshape [C]
    (the extent C of X must be known); a double X gets ``stash_type=11``. Down: constant scale
    and bias equal within each group become per-group constants; otherwise the node is
    written out as GroupNormalization-18 with scale 1 and bias 0, then Mul and Add of scale
    and bias reshaped to [C, 1, ...] (the rank of X must be known). X's element type must be
    known, and a ``stash_type`` other than the precision GroupNormalization-18 computes in is
    refused."""

    @staticmethod
    def _code(step):
        x = step.input(0)
        code = step.elem(x)
        if code not in (1, 10, 11, 16):
            step.refuse(f"the element type of {x!r} is not known to be float, float16, "
                        "bfloat16 or double")
        return code

    @staticmethod
    def _groups(step):
        g = int(step.attr("num_groups"))
        shape = step.shape(step.input(0))
        c = shape[1] if shape is not None and len(shape) > 1 else None
        if c is not None and (g <= 0 or c % g):
            step.refuse(f"{c} channels do not divide into num_groups {g}")
        return g, c

    @staticmethod
    def up(step, node):
        code = GroupNormalization21._code(step)
        g, c = GroupNormalization21._groups(step)
        if code == 11:
            step.set_attr("stash_type", 11)
        base = node.name or "GroupNormalization"
        ins = list(node.inputs)
        for k, what in ((1, "scale"), (2, "bias")):
            v = step.constant(step.input(k))
            if v is not None:
                v = np.asarray(v).reshape(-1)
                if v.size != g:
                    step.refuse(f"{what} {step.input(k)!r} holds {v.size} values, not "
                                f"num_groups {g}")
                if c is None:
                    step.refuse(f"the channels of {step.input(0)!r} are not known: {what} "
                                "cannot be repeated per channel")
                ins[k] = step.add_constant(np.repeat(v, c // g), what)
                continue
            if c is None:
                step.refuse(f"the channels of {step.input(0)!r} are not known: {what} "
                            f"{step.input(k)!r} cannot be repeated per channel")
            col, wide, flat = (step.fresh(f"{base}_{what}_{h}") for h in ("col", "wide", "c"))
            step.add_node("Reshape", [step.input(k),
                                      step.add_constant(np.array([g, 1], np.int64), "groups")],
                          [col])
            step.add_node("Expand", [col, step.add_constant(np.array([g, c // g], np.int64),
                                                            "per_group")], [wide])
            step.add_node("Reshape", [wide, step.add_constant(np.array([c], np.int64),
                                                              "channels")], [flat])
            for name, shape in ((col, [g, 1]), (wide, [g, c // g]), (flat, [c])):
                step.declare(name, code, shape)
            ins[k] = flat
        node.inputs = ins
        return None

    @staticmethod
    def down(step, node):
        code = GroupNormalization21._code(step)
        stash = int(step.attr("stash_type", 1))
        if stash != (11 if code == 11 else 1):
            step.refuse(f"stash_type={stash} for {step.input(0)!r} of element type {code}: "
                        f"GroupNormalization-{step.target} computes the statistics in "
                        f"{'double' if code == 11 else 'float'}")
        step.remove_attr("stash_type")
        g, c = GroupNormalization21._groups(step)
        consts = [step.constant(step.input(k)) for k in (1, 2)]
        if c is not None and all(v is not None for v in consts):
            per = [np.asarray(v).reshape(-1) for v in consts]
            if all(v.size == c for v in per) and all(
                    (v.reshape(g, -1) == v.reshape(g, -1)[:, :1]).all() for v in per):
                node.inputs = [step.input(0)] + [
                    step.add_constant(np.ascontiguousarray(v.reshape(g, -1)[:, 0]), what)
                    for v, what in zip(per, ("scale", "bias"))]
                return None
        r = step.rank(step.input(0))
        if r is None:
            step.refuse(f"the rank of {step.input(0)!r} is not known, and scale and bias "
                        "(per channel) differ within a group or are computed: they are "
                        "applied after the normalization by Mul and Add")
        from ...ir.dtypes import info
        dtype = info(code).dtype
        base = node.name or "GroupNormalization"
        normed, scale, bias, scaled = (step.fresh(f"{base}_{h}")
                                       for h in ("normalized", "scale_c", "bias_c", "scaled"))
        shape = step.add_constant(np.array([-1] + [1] * (r - 2), np.int64), "channel_shape")
        ones = step.add_constant(np.ones(g, dtype), "ones")
        zeros = step.add_constant(np.zeros(g, dtype), "zeros")
        for name in (normed, scale, bias, scaled):
            step.declare(name, code)
        y, s_in, b_in = node.outputs[0], step.input(1), step.input(2)
        node.inputs = [step.input(0), ones, zeros]
        node.outputs = [normed]

        def mk(op, ins, outs):
            return Node(op_type=op, inputs=ins, outputs=outs)

        return [node,
                mk("Reshape", [s_in, shape], [scale]),
                mk("Reshape", [b_in, shape], [bias]),
                mk("Mul", [normed, scale], [scaled]),
                mk("Add", [scaled, bias], [y])]


adapter("GroupNormalization", since=21)(GroupNormalization21)
adapter("LayerNormalization", since=17)(LayerNormalization17)
for _op in ("BatchNormalization", "InstanceNormalization"):
    adapter(_op, since=6)(Consumed6)
adapter("BatchNormalization", since=7)(BatchNormalization7)
adapter("BatchNormalization", since=9)(BatchNormalization9)
adapter("BatchNormalization", since=14)(BatchNormalization14)


class MeanVarianceNormalization9(FunctionBody):
    """MeanVarianceNormalization, introduced at 9: below it, its function body
    ((X - mean) / (sqrt(variance) + 1e-9) over ``axes``)."""


adapter("MeanVarianceNormalization", since=9)(MeanVarianceNormalization9)


class GroupNormalization18:
    """GroupNormalization, introduced at 18 (one scale and bias per group): below it, what
    its (context-dependent) function body computes, in X's element type (float or double):
    X reshaped to ``[N, num_groups, -1]``, ``D = Xg - ReduceMean(Xg)`` along the last axis,
    ``D / Sqrt(ReduceMean(D * D) + epsilon) * scale + bias`` with scale and bias reshaped to
    ``[1, num_groups, 1]``, reshaped back to X's shape. Refused when X's element type is not
    float or double."""

    #: attached to the first definition: converts below it
    decomposition = True

    @staticmethod
    def up(step, node):
        return None  # a first definition: nothing comes before it to go up from

    @staticmethod
    def down(step, node):
        x, scale, bias = step.input(0), step.input(1), step.input(2)
        code = step.elem(x)
        if code not in (1, 11):
            step.refuse(f"the element type of {x!r} is not known to be float or double")
        groups = int(step.attr("num_groups"))
        dtype = np.float32 if code == 1 else np.float64
        eps = step.add_constant(np.asarray(step.attr("epsilon", 1e-5), dtype), "epsilon")
        grouped = step.add_constant(np.asarray([0, groups, -1], np.int64), "grouped")
        per_group = step.add_constant(np.asarray([1, groups, 1], np.int64), "per_group")
        base = node.name or "GroupNormalization"
        names = {k: step.fresh(f"{base}_{k}") for k in
                 ("shape", "xg", "mean", "d", "dd", "var", "ve", "std", "norm", "s", "b",
                  "scaled", "yg")}
        for k, name in names.items():
            step.declare(name, 7 if k == "shape" else code)

        def mk(op, ins, outs, **attrs):
            return Node(op_type=op, inputs=ins, outputs=outs,
                        attributes=[Attribute.make(k, v) for k, v in attrs.items()])

        n = names
        return [mk("Shape", [x], [n["shape"]]),
                mk("Reshape", [x, grouped], [n["xg"]]),
                mk("ReduceMean", [n["xg"]], [n["mean"]], axes=[2], keepdims=1),
                mk("Sub", [n["xg"], n["mean"]], [n["d"]]),
                mk("Mul", [n["d"], n["d"]], [n["dd"]]),
                mk("ReduceMean", [n["dd"]], [n["var"]], axes=[2], keepdims=1),
                mk("Add", [n["var"], eps], [n["ve"]]),
                mk("Sqrt", [n["ve"]], [n["std"]]),
                mk("Div", [n["d"], n["std"]], [n["norm"]]),
                mk("Reshape", [scale, per_group], [n["s"]]),
                mk("Reshape", [bias, per_group], [n["b"]]),
                mk("Mul", [n["norm"], n["s"]], [n["scaled"]]),
                mk("Add", [n["scaled"], n["b"]], [n["yg"]]),
                mk("Reshape", [n["yg"], n["shape"]], [node.outputs[0]])]


adapter("GroupNormalization", since=18)(GroupNormalization18)


class RMSNormalization23:
    """RMSNormalization, introduced at 23: below it, what its function body computes:
    ``X / Sqrt(ReduceMean(X * X) + epsilon) * scale`` over the axes from ``axis`` on, in X's
    element type. Refused unless that type is the one ``stash_type`` computes in (float
    with stash_type 1, double with 11) and scale has it too."""

    #: attached to the first definition: converts below it
    decomposition = True

    @staticmethod
    def up(step, node):
        return None  # a first definition: nothing comes before it to go up from

    @staticmethod
    def down(step, node):
        x, scale = step.input(0), step.input(1)
        code = step.elem(x)
        stash = int(step.attr("stash_type", 1))
        if code not in (1, 11) or code != stash:
            step.refuse(f"the element type of {x!r} is not known to be the stash_type "
                        f"{stash}'s (float for 1, double for 11)")
        if step.elem(scale) != code:
            step.refuse(f"scale {scale!r} is not known to have X's element type")
        axis = int(step.attr("axis", -1))
        if axis >= 0:
            r = step.rank(x)
            if r is None:
                step.refuse(f"axis {axis} and the rank of {x!r} is not known")
            axis -= r
        dtype = np.float32 if code == 1 else np.float64
        eps = step.add_constant(np.asarray(step.attr("epsilon"), dtype), "epsilon")
        axes = step.add_constant(np.asarray(list(range(axis, 0)), np.int64), "axes")
        base = node.name or "RMSNormalization"
        n = {k: step.fresh(f"{base}_{k}") for k in ("xx", "ms", "mse", "rms", "norm")}
        for name in n.values():
            step.declare(name, code)

        def mk(op, ins, outs, **attrs):
            return Node(op_type=op, inputs=ins, outputs=outs,
                        attributes=[Attribute.make(k, v) for k, v in attrs.items()])

        # at opset 22 (the version before 23), ReduceMean takes its axes as an input
        return [mk("Mul", [x, x], [n["xx"]]),
                mk("ReduceMean", [n["xx"], axes], [n["ms"]], keepdims=1),
                mk("Add", [n["ms"], eps], [n["mse"]]),
                mk("Sqrt", [n["mse"]], [n["rms"]]),
                mk("Div", [x, n["rms"]], [n["norm"]]),
                mk("Mul", [n["norm"], scale], [node.outputs[0]])]


adapter("RMSNormalization", since=23)(RMSNormalization23)
