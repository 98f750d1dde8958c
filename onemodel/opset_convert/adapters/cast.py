"""Version adapters of the cast family (:mod:`onemodel.operators.families`)."""

from __future__ import annotations

from ...operators import adapter

#: the element types (Table 5 codes) ``saturate`` and ``round_mode`` apply to: the float8 and
#: float4 types
NARROW_FLOATS = frozenset((17, 18, 19, 20, 23, 24))


class NarrowFloatAttribute:
    """Cast, CastLike: an attribute added for conversions to float8 / float4 only (``saturate``
    at 19, ``round_mode`` at 24), meaningless for other targets. Up unchanged; down removes it
    when the target type is another, or when it holds its default (what the earlier
    definition does: the float8 types of 19 to 23 round to nearest even); else refused (a
    float8 or float4 target the earlier definition lacks is refused by the type check)."""

    attribute = ""

    @staticmethod
    def up(step, node):
        return None

    @classmethod
    def down(cls, step, node):
        if not step.has_attr(cls.attribute):
            return None
        from ...operators.table import attribute_default

        to = step.attr("to") if node.op_type == "Cast" else step.elem(step.input(1))
        value = step.attr(cls.attribute)
        if isinstance(value, bytes):  # a STRING attribute's octets (round_mode)
            value = value.decode("utf-8", "replace")
        default = attribute_default(step.domain, node.op_type, step.source, cls.attribute)
        if (to is None or to in NARROW_FLOATS) and value != default:
            step.refuse(f"attribute {cls.attribute}={value!r} has no equivalent before opset "
                        f"{step.source} (only its default {default!r})")
        step.remove_attr(cls.attribute)
        return None


class Saturate19(NarrowFloatAttribute):
    """Cast, CastLike at 19: ``saturate`` (float8 targets) added."""

    attribute = "saturate"


#: FLOAT8E4M3FNUZ and FLOAT8E5M2FNUZ (types without infinities), whose saturation of +-Inf was
#: restated at 24
FNUZ = frozenset((18, 20))
#: the element types that hold infinities (float, float16, double, bfloat16)
INFINITE = frozenset((1, 10, 11, 16))


class RoundMode24(NarrowFloatAttribute):
    """Cast, CastLike at 24: ``round_mode`` (float8 and float4 targets) added; and the
    saturation table restated: +-Inf cast with ``saturate`` to FLOAT8E4M3FNUZ or
    FLOAT8E5M2FNUZ gives NaN up to 23 and +-the largest finite value from 24. Such a cast (or
    one to a target type not known) is refused both ways unless its input cannot hold an
    infinity: an element type without them, or a constant without one."""

    attribute = "round_mode"

    @staticmethod
    def _fnuz(step, node):
        to = step.attr("to") if node.op_type == "Cast" else step.elem(step.input(1))
        if (to is None or to in FNUZ) and step.attr("saturate", 1):
            x = step.input(0)
            elem = step.elem(x)
            if elem is not None and elem not in INFINITE:
                return
            value = step.constant(x)
            if value is not None:
                from ...lazy import np
                if not np.isinf(np.asarray(value, dtype=np.float64)).any():
                    return
            what = "a target type not known" if to is None else \
                ("FLOAT8E4M3FNUZ" if to == 18 else "FLOAT8E5M2FNUZ")
            step.refuse(f"saturating cast to {what}: +-Inf gives NaN before opset 24 and the "
                        f"largest finite value from 24, and {x!r} may hold an infinity")

    @classmethod
    def up(cls, step, node):
        cls._fnuz(step, node)
        return None

    @classmethod
    def down(cls, step, node):
        cls._fnuz(step, node)
        return super().down(step, node)


class Cast6:
    """Cast at 6: ``to`` became an INT (the element type's code) instead of a STRING (its
    name)."""

    @staticmethod
    def up(step, node):
        from ...ir.dtypes import code_of_name
        to = step.attr("to")
        code = code_of_name(to)
        if code is None:
            step.refuse(f"to={to!r} names no element type")
        step.set_attr("to", code)
        return None

    @staticmethod
    def down(step, node):
        from ...ir.dtypes import DataType
        step.set_attr("to", DataType(int(step.attr("to"))).name)
        return None


class CastLike15:
    """CastLike, introduced at 15: below it, a Cast to the element type of ``target_type``
    (the definition's own function body, with that type known); refused when it is not."""

    #: attached to the first definition: converts below it
    decomposition = True

    @staticmethod
    def up(step, node):
        return None  # a first definition: nothing comes before it to go up from

    @staticmethod
    def down(step, node):
        from ...ir import Attribute, Node

        like = step.input(1)
        code = step.elem(like)
        if not code:
            step.refuse(f"the element type of {like!r} is not known")
        return [Node(op_type="Cast", inputs=[step.input(0)], outputs=list(node.outputs[:1]),
                     name=node.name, attributes=[Attribute.make("to", int(code))])]


adapter("Cast", since=6)(Cast6)
adapter("CastLike", since=15)(CastLike15)
for _op in ("Cast", "CastLike"):
    adapter(_op, since=19)(Saturate19)
    adapter(_op, since=24)(RoundMode24)
