"""Version adapters of the vision family (:mod:`onemodel.operators.families`)."""

from __future__ import annotations

from ...operators import adapter
from ..function_body import FunctionBody
from ..generic import Renamed


class RoiAlign16:
    """RoiAlign at 16: ``coordinate_transformation_mode`` added, whose default
    'half_pixel' is not the earlier behaviour ('output_half_pixel'). Up: the earlier
    behaviour set explicitly; down: refused for another mode."""

    @staticmethod
    def up(step, node):
        if not step.has_attr("coordinate_transformation_mode"):
            step.set_attr("coordinate_transformation_mode", "output_half_pixel")
        return None

    @staticmethod
    def down(step, node):
        mode = step.attr("coordinate_transformation_mode")
        mode = mode.decode() if isinstance(mode, bytes) else mode
        if mode != "output_half_pixel":
            step.refuse(f"coordinate_transformation_mode {mode!r} has no equivalent before "
                        f"opset {step.source}")
        step.remove_attr("coordinate_transformation_mode")
        return None


class GridSample20(Renamed):
    """GridSample at 20: the modes renamed ('bilinear' -> 'linear', 'bicubic' -> 'cubic')
    and inputs of any rank admitted. Down: the names mapped back; an input that is not known
    to be 4-D is refused."""

    names = {"mode": {"bilinear": "linear", "bicubic": "cubic"}}

    @classmethod
    def up(cls, step, node):
        if not step.has_attr("mode"):
            step.set_attr("mode", "bilinear")
        return super().up(step, node)

    @classmethod
    def down(cls, step, node):
        if step.rank(step.input(0)) != 4:
            step.refuse(f"the input {step.input(0)!r} is not known to be 4-D, the only rank "
                        f"before opset {step.source}")
        if not step.has_attr("mode"):
            step.set_attr("mode", "linear")
        return super().down(step, node)


class NonMaxSuppression11:
    """NonMaxSuppression at 11: iou_threshold stated to lie in [0, 1]. Down: an
    iou_threshold given must be a constant in that range."""

    @staticmethod
    def up(step, node):
        return None

    @staticmethod
    def down(step, node):
        given = step.input(3)
        if given is None:
            return None
        from ...lazy import np
        v = step.constant(given)
        if v is None or not ((np.asarray(v) >= 0) & (np.asarray(v) <= 1)).all():
            step.refuse(f"iou_threshold {given!r} is computed or outside [0, 1]")
        return None


adapter("NonMaxSuppression", since=11)(NonMaxSuppression11)
adapter("RoiAlign", since=16)(RoiAlign16)
adapter("GridSample", since=20)(GridSample20)


class AffineGrid20(FunctionBody):
    """AffineGrid, introduced at 20: below it, its function body (the base grid from Range,
    If on the 2-D or 3-D case and align_corners, MatMul with theta)."""


adapter("AffineGrid", since=20)(AffineGrid20)
