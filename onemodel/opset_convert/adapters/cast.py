"""Version adapters of the cast family (:mod:`onemodel.operators.families`)."""

from __future__ import annotations

from ...operators import adapter

#: the element types (Table 5 codes) ``saturate`` and ``round_mode`` apply to: the float8 and
#: float4 types
NARROW_FLOATS = frozenset((17, 18, 19, 20, 23, 24))


class NarrowFloatAttribute:
    """Cast, CastLike: an attribute added for conversions to float8 / float4 only (``saturate``
    at 19, ``round_mode`` at 24), meaningless for other targets. Up unchanged; down removes it
    when the target type is another (a float8 or float4 target does not exist before these
    definitions: the type check refuses it)."""

    attribute = ""

    @staticmethod
    def up(step, node):
        return None

    @classmethod
    def down(cls, step, node):
        if not step.has_attr(cls.attribute):
            return None
        to = step.attr("to") if node.op_type == "Cast" else step.elem(step.input(1))
        if to is None or to in NARROW_FLOATS:
            step.refuse(f"attribute {cls.attribute} applies to a float8 or float4 target, "
                        f"which does not exist before opset {step.source}")
        step.remove_attr(cls.attribute)
        return None


class Saturate19(NarrowFloatAttribute):
    """Cast, CastLike at 19: ``saturate`` (float8 targets) added."""

    attribute = "saturate"


#: FLOAT8E4M3FNUZ, FLOAT8E5M2FNUZ: types without infinities
FNUZ = frozenset((18, 20))
#: the element types that hold infinities (float, float16, double, bfloat16)
INFINITE = frozenset((1, 10, 11, 16))


class RoundMode24(NarrowFloatAttribute):
    """Cast, CastLike at 24: ``round_mode`` (float8 and float4 targets) added; and, to the two
    float8 FNUZ types with ``saturate=1``, +-Inf now saturates to +-the largest finite value,
    where the definitions 19 to 23 make it NaN: down refuses such a cast unless its input is
    a constant without infinities."""

    attribute = "round_mode"

    @classmethod
    def down(cls, step, node):
        to = step.attr("to") if node.op_type == "Cast" else step.elem(step.input(1))
        if to in FNUZ and step.attr("saturate", 1):
            x = step.input(0)
            elem = step.elem(x)
            if elem is None or elem in INFINITE:
                value = step.constant(x)
                from ...lazy import np
                if value is None or np.isinf(np.asarray(value, dtype=np.float64)).any():
                    step.refuse(f"{node.op_type}-24 saturates +-Inf to the largest finite "
                                "value of a float8 FNUZ type, which "
                                f"{node.op_type}-{step.target} makes NaN, and {x!r} may hold "
                                "infinities")
        return super().down(step, node)


class Cast6:
    """Cast at 6: ``to`` became an INT (the element type's code) instead of a STRING (its
    name)."""

    @staticmethod
    def up(step, node):
        from ...ir.dtypes import DataType
        to = step.attr("to")
        name = to.decode() if isinstance(to, bytes) else str(to)
        try:
            code = int(DataType[name.upper()])
        except KeyError:
            step.refuse(f"to={name!r} names no element type")
        step.set_attr("to", code)
        return None

    @staticmethod
    def down(step, node):
        from ...ir.dtypes import DataType
        step.set_attr("to", DataType(int(step.attr("to"))).name)
        return None


adapter("Cast", since=6)(Cast6)
for _op in ("Cast", "CastLike"):
    adapter(_op, since=19)(Saturate19)
    adapter(_op, since=24)(RoundMode24)
