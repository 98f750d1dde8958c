"""Version adapters of the resize family (:mod:`onemodel.operators.families`)."""

from __future__ import annotations

from ...lazy import np
from ...operators import adapter
from ..generic import AttributeAdded, AttributeToInput, AttributeValues, _set_input


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


adapter("Upsample", since=9)(Upsample9)
adapter("Upsample", since=10)(Upsample10)
adapter("Resize", since=13)(Resize13)
adapter("Resize", since=18)(Resize18)
adapter("Resize", since=19)(Resize19)
