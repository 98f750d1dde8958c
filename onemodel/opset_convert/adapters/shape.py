"""Version adapters of the shape family (:mod:`onemodel.operators.families`)."""

from __future__ import annotations

from ...lazy import np
from ...operators import adapter
from ..function_body import FunctionBody
from ..generic import (
    AttributeAdded,
    AttributeToInput,
    AttributeValues,
    LegacyAttribute,
    NegativeAxis,
    _set_input,
)


class Axes13(AttributeToInput):
    """Squeeze, Unsqueeze at 13: the ``axes`` attribute became input 1."""

    attribute = "axes"
    index = 1


class Split13(AttributeToInput):
    """Split at 13: the ``split`` attribute became the optional input 1."""

    attribute = "split"
    index = 1


class Split18:
    """Split at 18: ``num_outputs`` added; without a ``split`` input it is required, and an
    extent that does not divide makes the last part smaller (before, it had to divide).

    Up: without ``split``, ``num_outputs`` is the number of outputs. Down: ``num_outputs`` is
    removed when the extent along ``axis`` divides into that many equal parts; when it does
    not, the sizes go in a constant ``split`` input; when the extent is not known, refused."""

    @staticmethod
    def up(step, node):
        if step.input(1) is None:
            step.set_attr("num_outputs", len(node.outputs))
        return None

    @staticmethod
    def down(step, node):
        if not step.has_attr("num_outputs"):
            return None
        n = int(step.attr("num_outputs"))
        step.remove_attr("num_outputs")
        x = step.input(0)
        shape = step.shape(x)
        axis = int(step.attr("axis", 0))
        extent = None
        if shape is not None and -len(shape) <= axis < len(shape):
            extent = shape[axis]
        if extent is None:
            step.refuse(f"num_outputs {n} along axis {axis} of {x!r}, whose extent is not "
                        "known: whether the parts are equal cannot be told")
        if extent % n == 0:
            return None
        part = -(-extent // n)
        sizes = [part] * (extent // part) + ([extent % part] if extent % part else [])
        _set_input(node, 1, step.add_constant(np.asarray(sizes, dtype=np.int64), "split"))
        return None


class Pad2:
    """Pad at 2: the attribute ``paddings`` was renamed ``pads``."""

    @staticmethod
    def up(step, node):
        if step.has_attr("paddings"):
            step.set_attr("pads", list(step.attr("paddings")))
            step.remove_attr("paddings")
        return None

    @staticmethod
    def down(step, node):
        if step.has_attr("pads"):
            step.set_attr("paddings", list(step.attr("pads")))
            step.remove_attr("pads")
        return None


class Pad11:
    """Pad at 11: the attributes ``pads`` (ints) and ``value`` (float, default 0) became input
    1 (int64) and the optional input 2 (a scalar of the data's element type). Up: ``pads``
    a constant input, ``value`` a constant of the data's type when set (that type must be
    known). Down: both must be constants, the value one a float attribute holds exactly."""

    @staticmethod
    def up(step, node):
        pads = step.attr("pads")
        step.remove_attr("pads")
        _set_input(node, 1, step.add_constant(np.asarray(pads, dtype=np.int64), "pads"))
        if step.has_attr("value"):
            v = step.attr("value")
            step.remove_attr("value")
            code = step.elem(step.input(0))
            if code is None:
                step.refuse(f"the element type of {step.input(0)!r} is not known, and the "
                            "constant_value input must have it")
            from ...ir.dtypes import info
            _set_input(node, 2, step.add_constant(np.asarray(v, dtype=info(code).dtype),
                                                  "constant_value"))
        return None

    @staticmethod
    def down(step, node):
        pads = step.constant(step.input(1))
        if pads is None:
            step.refuse(f"input 1 {step.input(1)!r} (pads) is computed, not a constant: "
                        f"Pad-{step.target} needs it as an attribute")
        step.set_attr("pads", [int(p) for p in np.asarray(pads).reshape(-1)])
        given = step.input(2)
        if given is not None:
            v = step.constant(given)
            if v is None or np.asarray(v).size != 1:
                step.refuse(f"input 2 {given!r} (constant_value) is not a constant value")
            value = np.asarray(v).reshape(()).item()
            if float(np.float32(value)) != value:
                step.refuse(f"constant_value {value!r} is not exactly a float32 value, which "
                            f"the attribute of Pad-{step.target} is")
            if value != 0:
                step.set_attr("value", float(value))
        node.inputs = node.inputs[:1]
        return None


class Pad18:
    """Pad at 18: the optional input 3 ``axes`` (which axes ``pads`` is for) added. Up
    unchanged; down: a constant ``axes`` is written out as ``pads`` for every axis (zeros for
    the others; the rank must be known), a computed one refused."""

    @staticmethod
    def up(step, node):
        return None

    @staticmethod
    def down(step, node):
        given = step.input(3)
        if given is None:
            return None
        axes, pads = step.constant(given), step.constant(step.input(1))
        if axes is None or pads is None:
            what = given if axes is None else step.input(1)
            step.refuse(f"{what!r} is computed, not a constant: Pad-{step.target} pads every "
                        "axis")
        r = step.rank(step.input(0))
        if r is None:
            step.refuse(f"the rank of {step.input(0)!r} is not known")
        axes = [int(a) + r if a < 0 else int(a) for a in np.asarray(axes).reshape(-1)]
        pads = [int(p) for p in np.asarray(pads).reshape(-1)]
        full = [0] * (2 * r)
        for k, a in enumerate(axes):
            full[a], full[a + r] = pads[k], pads[k + len(axes)]
        _set_input(node, 1, step.add_constant(np.asarray(full, dtype=np.int64), "pads"))
        _set_input(node, 3, "")
        return None


class Slice11:
    """Slice at 11: negative axes admitted, and INT_MIN as the end of a backward slice. Down:
    the axes (input 3) must be a constant, its negative values made non-negative with the
    rank; a negative step needs constant ends above INT_MIN."""

    @staticmethod
    def up(step, node):
        return None

    @staticmethod
    def down(step, node):
        given = step.input(3)
        if given is not None:
            axes = step.constant(given)
            if axes is None:
                step.refuse(f"the axes {given!r} are computed: that none is negative cannot "
                            "be told")
            axes = [int(a) for a in np.asarray(axes).reshape(-1)]
            if any(a < 0 for a in axes):
                r = step.rank(step.input(0))
                if r is None:
                    step.refuse(f"axes {axes} are negative and the rank of "
                                f"{step.input(0)!r} is not known")
                fixed = np.asarray([a + r if a < 0 else a for a in axes], dtype=np.int64)
                _set_input(node, 3, step.add_constant(fixed, "axes"))
        steps = step.constant(step.input(4)) if step.input(4) else None
        if step.input(4) and (steps is None or (np.asarray(steps) < 0).any()):
            ends = step.constant(step.input(2))
            if ends is None or (np.asarray(ends) <= -2**31).any():
                step.refuse("a backward slice whose ends are computed or at INT_MIN")
        return None


class Pad19(AttributeValues):
    """Pad at 19: mode 'wrap' added."""

    values = {"mode": ("wrap",)}


class Slice10:
    """Slice at 10: the attributes ``starts``, ``ends`` and ``axes`` became inputs 1 to 3, and
    the optional input 4 ``steps`` was added. Up: constants. Down: every input given must be a
    constant, and every step 1."""

    NAMES = ("starts", "ends", "axes")

    @staticmethod
    def up(step, node):
        for k, name in enumerate(Slice10.NAMES, 1):
            if step.has_attr(name):
                v = step.attr(name)
                step.remove_attr(name)
                _set_input(node, k, step.add_constant(np.asarray(v, dtype=np.int64), name))
        return None

    @staticmethod
    def down(step, node):
        values = {}
        for k, name in enumerate((*Slice10.NAMES, "steps"), 1):
            given = step.input(k)
            if given is None:
                continue
            v = step.constant(given)
            if v is None:
                step.refuse(f"input {k} {given!r} ({name}) is computed, not a constant: "
                            f"Slice-{step.target} needs it as an attribute")
            values[name] = [int(x) for x in np.asarray(v).reshape(-1)]
        if any(s != 1 for s in values.pop("steps", ())):
            step.refuse(f"steps {values.get('steps')} other than 1: Slice-{step.target} has "
                        "no steps")
        for name, v in values.items():
            step.set_attr(name, v)
        node.inputs = node.inputs[:1]
        return None


class Indices11:
    """Gather at 11: negative indices (and a negative axis) admitted. Down: the indices
    (input 1) must be a constant without a negative one; a negative axis is made
    non-negative with the rank."""

    @staticmethod
    def up(step, node):
        return None

    @staticmethod
    def down(step, node):
        Axis11.down(step, node)
        given = step.input(1)
        v = step.constant(given)
        if v is None:
            step.refuse(f"the indices {given!r} are computed: that none is negative, as "
                        f"{node.op_type}-{step.target} requires, cannot be told")
        if (np.asarray(v) < 0).any():
            step.refuse(f"the indices {given!r} hold negative values")
        return None


class Axis11(NegativeAxis):
    """Concat, Compress, Flatten, Split at 11: a negative axis admitted."""


class Axes11(NegativeAxis):
    """Squeeze, Unsqueeze at 11: negative axes admitted (of the output, for Unsqueeze: its
    rank is the input's plus the number of axes)."""

    attribute = "axes"

    @classmethod
    def down(cls, step, node):
        if node.op_type == "Unsqueeze" and step.has_attr("axes"):
            axes = [int(a) for a in step.attr("axes")]
            if any(a < 0 for a in axes):
                r = step.rank(step.input(0))
                if r is None:
                    step.refuse(f"axes {axes} are negative and the rank of "
                                f"{step.input(0)!r} is not known")
                step.set_attr("axes", [a + r + len(axes) if a < 0 else a for a in axes])
            return None
        return super().down(step, node)


class Reduction16(AttributeAdded):
    """ScatterElements, ScatterND at 16: ``reduction`` (default 'none') added."""

    added = ("reduction",)


class Reduction18(AttributeValues):
    """ScatterElements, ScatterND at 18: reductions 'max' and 'min' added."""

    values = {"reduction": ("max", "min")}


class Constant11(AttributeAdded):
    """Constant at 11: ``sparse_value`` added (``value`` no longer the only way)."""

    added = ("sparse_value",)


class Constant12:
    """Constant at 12: ``value_int(s)``, ``value_float(s)``, ``value_string(s)`` added. Down:
    a number or list of numbers becomes the ``value`` tensor (int64, float32); strings are
    refused."""

    @staticmethod
    def up(step, node):
        return None

    @staticmethod
    def down(step, node):
        for name, dtype in (("value_int", np.int64), ("value_ints", np.int64),
                            ("value_float", np.float32), ("value_floats", np.float32)):
            if step.has_attr(name):
                a = node.attribute(name)
                v = np.asarray(a.floats if name == "value_floats" else step.attr(name),
                               dtype=dtype)
                step.remove_attr(name)
                from ...ir import Tensor
                step.set_attr("value", Tensor.from_numpy(np.ascontiguousarray(v)))
        for name in ("value_string", "value_strings"):
            if step.has_attr(name):
                step.refuse(f"attribute {name} has no equivalent before opset 12 here")
        return None


class Reshape5(AttributeToInput):
    """Reshape at 5: the ``shape`` attribute became input 1, and ``consumed_inputs`` (a hint
    without meaning for the result) was dropped."""

    attribute = "shape"
    index = 1

    @classmethod
    def up(cls, step, node):
        step.remove_attr("consumed_inputs")
        return super().up(step, node)


class Reshape14:
    """Reshape at 14: ``allowzero`` (default 0: a 0 in the shape copies the input's extent)
    added. Up unchanged; down: ``allowzero=1`` is removed when no element of the shape is 0,
    where both readings agree: a constant without a 0, or a computed shape (``Concat`` of
    ``Shape`` extents, as exporters write) whose every element inference knows to be -1 or at
    least 1 -- under its assumption that the main graph's input extents are at least 1, which
    the conversion notes. Else refused."""

    @staticmethod
    def up(step, node):
        return None

    @staticmethod
    def down(step, node):
        if step.attr("allowzero", 0):
            shape = step.constant(step.input(1))
            if shape is not None:
                if (np.asarray(shape) == 0).any():
                    step.refuse("allowzero=1 with a 0 in its shape")
            else:
                known = step.elements(step.input(1))
                if known is None or not all(e == -1 or step.at_least_one(e) for e in known):
                    step.refuse("allowzero=1 with a computed shape that may hold a 0")
                if not all(type(e) is int for e in known):
                    step.note("Reshape's allowzero=1 dropped below opset 14 where its computed "
                              "shape holds no 0 when no input extent of the model is 0 (as "
                              "shape inference assumes)")
        step.remove_attr("allowzero")
        return None


class Shape15:
    """Shape at 15: ``start`` and ``end`` (a slice of the shape) added. Up unchanged; down: a
    node that sets them becomes Shape followed by Slice of the same range."""

    @staticmethod
    def up(step, node):
        return None

    @staticmethod
    def down(step, node):
        if not (step.has_attr("start") or step.has_attr("end")):
            return None
        from ...ir import Node
        start, end = int(step.attr("start", 0)), step.attr("end")
        end = 2**63 - 1 if end is None else int(end)
        whole = step.fresh(f"{node.name or 'Shape'}_whole")
        step.declare(whole, 7)  # int64
        starts = step.add_constant(np.asarray([start], np.int64), "starts")
        ends = step.add_constant(np.asarray([end], np.int64), "ends")
        return [Node(op_type="Shape", inputs=[step.input(0)], outputs=[whole], name=node.name),
                Node(op_type="Slice", inputs=[whole, starts, ends], outputs=list(node.outputs))]


class GatherND12(AttributeAdded):
    """GatherND at 12: ``batch_dims`` (default 0) added."""

    added = ("batch_dims",)


class DepthToSpace11(AttributeAdded):
    """DepthToSpace at 11: ``mode`` (default 'DCR', the earlier order) added."""

    added = ("mode",)


class Concat4(LegacyAttribute):
    """Concat at 4: ``axis`` became required (before, default 1, which the stored definition
    does not record): set explicitly going up."""

    dropped = ()

    @classmethod
    def up(cls, step, node):
        if not step.has_attr("axis"):
            step.set_attr("axis", 1)
        return None


class SpaceToDepth28(AttributeAdded):
    """SpaceToDepth at 28: ``mode`` (default 'DCR', the earlier order) added."""

    added = ("mode",)


class Split2:
    """Split at 2: the optional input 1 ``split`` was removed (the attribute stays). Up: a
    constant input becomes the attribute, a computed one is refused; down unchanged."""

    @staticmethod
    def up(step, node):
        given = step.input(1)
        if given is not None:
            v = step.constant(given)
            if v is None:
                step.refuse(f"input 1 {given!r} (split) is computed, not a constant: "
                            f"Split-{step.target} takes it as an attribute")
            step.set_attr("split", [int(x) for x in np.asarray(v).reshape(-1)])
            node.inputs = node.inputs[:1]
        if not step.has_attr("axis"):
            step.set_attr("axis", 0)
        return None

    @staticmethod
    def down(step, node):
        return None


class Scatter11:
    """Scatter at 11: deprecated, ScatterElements-11 its successor with the same signature
    and meaning. Up: the node becomes ScatterElements; down (a Scatter-11 node) unchanged."""

    @staticmethod
    def up(step, node):
        from ...ir import Node
        return [Node(op_type="ScatterElements", inputs=list(node.inputs),
                     outputs=list(node.outputs), name=node.name,
                     attributes=list(node.attributes))]

    @staticmethod
    def down(step, node):
        return None


class Range27:
    """Range at 27: ``stash_type`` (the precision of float16/bfloat16 computation, which the
    earlier definition does not admit) added: removed going down (the type check refuses a
    float16 Range)."""

    @staticmethod
    def up(step, node):
        return None

    @staticmethod
    def down(step, node):
        step.remove_attr("stash_type")
        return None


class Tile6:
    """Tile at 6: the inputs ``tiles`` and ``axis`` (one count along one axis, of the input's
    type) became ``repeats`` (int64, one count per axis). Up: constants and the input's rank
    give ``repeats``. Down: constant ``repeats`` repeating along one axis at most become
    ``tiles`` and ``axis``; more axes are refused."""

    @staticmethod
    def up(step, node):
        tiles, axis = step.constant(step.input(1)), step.constant(step.input(2))
        r = step.rank(step.input(0))
        if tiles is None or axis is None or r is None:
            step.refuse("tiles and axis must be constants and the input's rank known")
        reps = [1] * r
        reps[int(np.asarray(axis).reshape(-1)[0])] = int(np.asarray(tiles).reshape(-1)[0])
        node.inputs = [node.inputs[0], step.add_constant(np.asarray(reps, np.int64),
                                                         "repeats")]
        step.declare(node.inputs[1], 7)
        return None

    @staticmethod
    def down(step, node):
        reps = step.constant(step.input(1))
        if reps is None:
            step.refuse(f"the repeats {step.input(1)!r} are computed")
        reps = [int(x) for x in np.asarray(reps).reshape(-1)]
        axes = [k for k, n in enumerate(reps) if n != 1] or [0]
        if len(axes) > 1:
            step.refuse(f"repeats {reps} along more than one axis: Tile-{step.target} repeats "
                        "along one")
        code = step.elem(step.input(0))
        if code is None:
            step.refuse(f"the element type of {step.input(0)!r} is not known, and tiles and "
                        "axis must have it")
        from ...ir.dtypes import info
        dtype = info(code).dtype
        a = axes[0]
        node.inputs = [node.inputs[0],
                       step.add_constant(np.asarray([reps[a]], dtype), "tiles"),
                       step.add_constant(np.asarray([a], dtype), "axis")]
        return None


class OneHot11:
    """OneHot at 11: negative indices (counted back from depth) admitted. Down: the indices
    must be a constant without a negative one."""

    @staticmethod
    def up(step, node):
        return None

    @staticmethod
    def down(step, node):
        given = step.input(0)
        v = step.constant(given)
        if v is None or (np.asarray(v) < 0).any():
            step.refuse(f"the indices {given!r} are computed or negative: OneHot-"
                        f"{step.target} has no negative indices")
        return None


adapter("OneHot", since=11)(OneHot11)
adapter("Split", since=2)(Split2)
adapter("Scatter", since=11)(Scatter11)
adapter("Range", since=27)(Range27)
adapter("Tile", since=6)(Tile6)
adapter("Concat", since=4)(Concat4)
adapter("SpaceToDepth", since=28)(SpaceToDepth28)
adapter("Squeeze", since=13)(Axes13)
adapter("Unsqueeze", since=13)(Axes13)
adapter("Squeeze", since=11)(Axes11)
adapter("Unsqueeze", since=11)(Axes11)
adapter("Split", since=13)(Split13)
adapter("Split", since=18)(Split18)
adapter("Pad", since=2)(Pad2)
adapter("Pad", since=11)(Pad11)
adapter("Pad", since=18)(Pad18)
adapter("Pad", since=19)(Pad19)
adapter("Slice", since=11)(Slice11)
adapter("Slice", since=10)(Slice10)
adapter("Gather", since=11)(Indices11)
for _op in ("Concat", "Compress", "Flatten", "Split"):
    adapter(_op, since=11)(Axis11)
for _op in ("ScatterElements", "ScatterND"):
    adapter(_op, since=16)(Reduction16)
    adapter(_op, since=18)(Reduction18)
adapter("Constant", since=11)(Constant11)
adapter("Constant", since=12)(Constant12)
adapter("Reshape", since=5)(Reshape5)
adapter("Reshape", since=14)(Reshape14)
adapter("Shape", since=15)(Shape15)
adapter("GatherND", since=12)(GatherND12)
adapter("DepthToSpace", since=11)(DepthToSpace11)


class Range11(FunctionBody):
    """Range, introduced at 11: below it, its function body (the element count from Ceil,
    then a Loop adding ``delta`` that many times)."""


adapter("Range", since=11)(Range11)
