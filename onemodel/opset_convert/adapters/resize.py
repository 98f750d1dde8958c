"""Version adapters of the resize family (:mod:`onemodel.operators.families`)."""

from __future__ import annotations

from ...lazy import np
from ...operators import adapter
from ..generic import AttributeAdded, AttributeToInput, AttributeValues, _plain, _set_input


class Resize11:
    """Resize at 11: the inputs ``roi`` and ``sizes`` and the attributes of the coordinate
    transformation added; Resize-10 maps an output coordinate ``x`` to ``x / scale``
    ('asymmetric') and takes the nearest input element by ``floor``.

    Up: an empty ``roi`` is given, ``coordinate_transformation_mode`` 'asymmetric' and, for
    nearest, ``nearest_mode`` 'floor'. Down: only that transformation, scales given (not
    sizes), and the default of every other attribute; else refused."""

    @staticmethod
    def up(step, node):
        x, scales = step.input(0), step.input(1)
        roi = step.add_constant(np.zeros(0, np.float32), "roi")
        node.inputs = [x, roi, scales]
        step.set_attr("coordinate_transformation_mode", "asymmetric")
        mode = step.attr("mode")
        if (mode.decode() if isinstance(mode, bytes) else mode) == "nearest":
            step.set_attr("nearest_mode", "floor")
        return None

    @staticmethod
    def down(step, node):
        def text(name):
            v = step.attr(name)
            return v.decode() if isinstance(v, bytes) else v

        ctm = text("coordinate_transformation_mode")
        if ctm != "asymmetric":
            step.refuse(f"coordinate_transformation_mode {ctm!r}: Resize-{step.target} maps "
                        "coordinates as 'asymmetric' only")
        mode = text("mode")
        if mode not in ("nearest", "linear"):
            step.refuse(f"mode {mode!r} does not exist before opset {step.source}")
        if mode == "nearest" and text("nearest_mode") != "floor":
            step.refuse(f"nearest_mode {text('nearest_mode')!r}: Resize-{step.target} takes "
                        "the nearest element by 'floor'")
        if step.attr("exclude_outside", 0):
            step.refuse("exclude_outside=1 does not exist before opset 11")
        if step.input(3) is not None:
            step.refuse(f"sizes {step.input(3)!r}: Resize-{step.target} takes scales only")
        if step.input(2) is None:
            step.refuse(f"no scales, which Resize-{step.target} requires")
        for name in ("coordinate_transformation_mode", "nearest_mode", "cubic_coeff_a",
                     "exclude_outside", "extrapolation_value"):
            step.remove_attr(name)
        node.inputs = [step.input(0), step.input(2)]
        return None


class Resize13:
    """Resize at 13: ``roi`` and ``scales`` became optional (before, required, and given as
    empty tensors when unused). Up unchanged; down gives an omitted one as an empty float
    tensor."""

    @staticmethod
    def up(step, node):
        return None

    @staticmethod
    def down(step, node):
        for k, name in ((1, "roi"), (2, "scales")):
            if step.input(k) is None:
                _set_input(node, k, step.add_constant(np.zeros(0, np.float32), name))
        return None


class Resize18(AttributeAdded):
    """Resize at 18: ``antialias`` (default 0), ``axes`` (default: every axis) and
    ``keep_aspect_ratio_policy`` (default 'stretch') added."""

    added = ("antialias", "axes", "keep_aspect_ratio_policy")


class Resize19(AttributeValues):
    """Resize at 19: coordinate_transformation_mode 'half_pixel_symmetric' added."""

    values = {"coordinate_transformation_mode": ("half_pixel_symmetric",)}


class Upsample7:
    """Upsample at 7: Upsample-1's ``height_scale`` and ``width_scale`` (of a 4-D input
    [N, C, H, W], each at least 1) became ``scales``, one per axis, and its mode 'bilinear'
    (over H and W) is named 'linear'. Up: ``scales`` [1, 1, height_scale, width_scale], the
    mode renamed. Down: ``scales`` must be four values with 1 for N and C and at least 1 for
    H and W, else refused; mode 'linear' is written 'bilinear'."""

    _MODES = {"bilinear": "linear"}

    @staticmethod
    def up(step, node):
        hs, ws = step.attr("height_scale"), step.attr("width_scale")
        if hs is None or ws is None:
            step.refuse("height_scale and width_scale, which Upsample-1 requires, are not "
                        "both set")
        step.remove_attr("height_scale")
        step.remove_attr("width_scale")
        step.set_attr("scales", [1.0, 1.0, float(hs), float(ws)])
        mode = _plain(step.attr("mode"))
        if mode in Upsample7._MODES:
            step.set_attr("mode", Upsample7._MODES[mode])
        return None

    @staticmethod
    def down(step, node):
        scales = [float(s) for s in step.attr("scales") or ()]
        if len(scales) != 4 or scales[:2] != [1.0, 1.0] or min(scales[2:]) < 1:
            step.refuse(f"scales {scales}: Upsample-{step.target} scales only H and W of a "
                        "4-D input, by at least 1")
        step.remove_attr("scales")
        step.set_attr("height_scale", scales[2])
        step.set_attr("width_scale", scales[3])
        mode = _plain(step.attr("mode"))
        back = {v: k for k, v in Upsample7._MODES.items()}
        if mode in back:
            step.set_attr("mode", back[mode])
        return None


class Upsample9(AttributeToInput):
    """Upsample at 9: the ``scales`` attribute became input 1 (float32)."""

    attribute = "scales"
    index = 1
    dtype = "float32"


class Upsample10:
    """Upsample at 10: deprecated, Resize-10 its successor with the same signature and
    meaning. Up: the node becomes Resize; down (an Upsample-10 node) unchanged."""

    @staticmethod
    def up(step, node):
        from ...ir import Node
        return [Node(op_type="Resize", inputs=list(node.inputs), outputs=list(node.outputs),
                     name=node.name, attributes=list(node.attributes))]

    @staticmethod
    def down(step, node):
        return None


adapter("Upsample", since=7)(Upsample7)
adapter("Upsample", since=9)(Upsample9)
adapter("Upsample", since=10)(Upsample10)
adapter("Resize", since=11)(Resize11)
adapter("Resize", since=13)(Resize13)
adapter("Resize", since=18)(Resize18)
adapter("Resize", since=19)(Resize19)
