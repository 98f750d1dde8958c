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
