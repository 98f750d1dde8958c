"""Kinds of version change that many operators share, as adapter base classes: an adapter in
``adapters/<family>.py`` subclasses one, names what it moves, and is attached to each
operator's definition (:func:`onemodel.operators.adapter`). Each has ``up(step, node)`` and
``down(step, node)`` (:mod:`.context`)."""

from __future__ import annotations

from ..lazy import np


def _normalized(step, value: int, name: str, what: str) -> int:
    """``value`` (an axis, possibly negative) made non-negative with the rank of ``name``;
    refused when it is negative and the rank is unknown or it is out of range."""
    if value >= 0:
        return value
    r = step.rank(name)
    if r is None:
        step.refuse(f"{what} {value} is negative and the rank of {name!r} is not known")
    if value + r < 0:
        step.refuse(f"{what} {value} is out of range for rank {r}")
    return value + r


class LegacyAttribute:
    """Attributes the earlier definition had and the later one dropped, without meaning for
    the result (``consumed_inputs``: a hint of in-place use, ONNX 1-2 before opset 6): up drops
    them, down leaves them unset (``consumed_inputs`` where the earlier definition requires
    it: 0 for every input, none used in place). ``explicit``: attributes whose default
    changed, set explicitly to the default of the definition the node comes from, so that the
    node keeps computing the same."""

    dropped: tuple = ("consumed_inputs",)
    explicit: tuple = ()

    @classmethod
    def _explicit(cls, step, node) -> None:
        for name in cls.explicit:
            if not step.has_attr(name):
                step.set_attr(name, step.attr(name))

    @classmethod
    def up(cls, step, node):
        cls._explicit(step, node)
        for name in cls.dropped:
            step.remove_attr(name)

    @classmethod
    def down(cls, step, node):
        cls._explicit(step, node)
        if "consumed_inputs" in cls.dropped and not step.has_attr("consumed_inputs"):
            from ..operators.table import definition
            spec = definition(step.domain, node.op_type, step.target)
            spec = spec.attributes.get("consumed_inputs") if spec is not None else None
            if spec is not None and spec.required:  # BatchNormalization-1 requires it
                step.set_attr("consumed_inputs", [0] * len(node.inputs))  # none in place


class AttributeAdded:
    """Attributes the later definition added whose default reproduces the earlier behaviour
    (Part 1, Table 13, first row): up changes nothing; down removes them, and refuses a node
    that sets one to another value (the earlier definition cannot express it)."""

    added: tuple = ()

    @staticmethod
    def up(step, node):
        return None

    @classmethod
    def down(cls, step, node):
        from ..operators.table import attribute_default

        for name in cls.added:
            if not step.has_attr(name):
                continue
            v = step.attr(name)
            d = attribute_default(step.domain, step.op_type, step.source, name)
            if d is None or _plain(v) != _plain(d):
                step.refuse(f"attribute {name}={_shown(v)} has no equivalent before opset "
                            f"{step.source}")
            step.remove_attr(name)


class AttributeValues:
    """The later definition admits attribute values the earlier did not (``values``: name ->
    those values): up changes nothing, down refuses a node that uses one."""

    values: dict = {}

    @staticmethod
    def up(step, node):
        return None

    @classmethod
    def down(cls, step, node):
        for name, new in cls.values.items():
            v = _plain(step.attr(name))
            if v in new:
                step.refuse(f"attribute {name}={_shown(v)} has no equivalent before opset "
                            f"{step.source}")


class NegativeAxis:
    """The later definition admits a negative axis (counted from the last; ``attribute``
    ``axis`` or ``axes``, of input ``of``): up changes nothing; down makes a negative one
    non-negative with the input's rank (refused when it is not known)."""

    attribute: str = "axis"
    of: int = 0

    @staticmethod
    def up(step, node):
        return None

    @classmethod
    def down(cls, step, node):
        if not step.has_attr(cls.attribute):
            return None
        v = step.attr(cls.attribute)
        x = step.input(cls.of)
        if isinstance(v, list):
            fixed = [_normalized(step, int(a), x, cls.attribute) for a in v]
        else:
            fixed = _normalized(step, int(v), x, cls.attribute)
        if fixed != v:
            step.set_attr(cls.attribute, fixed)
        return None


class AttributeToInput:
    """An attribute of the earlier definition became input ``index`` of the later one
    (``attribute``, an int list made an int64 tensor, a float list a float32 one by
    ``dtype``; ``scalar``: one value made a one-element tensor). Up: the attribute's value
    becomes a constant input (an absent attribute an omitted input, or ``absent`` when
    given). Down: the input must be constant (an initializer, a Constant, or folded by
    inference), else the node is refused naming it."""

    attribute: str = "axes"
    index: int = 1
    scalar: bool = False
    #: the input's element type: "int64" (ints attributes) or "float32" (floats attributes)
    dtype: str = "int64"
    #: up: the input when the attribute is absent (a list), None to leave it omitted
    absent = None

    @classmethod
    def up(cls, step, node):
        if step.has_attr(cls.attribute):
            v = step.attr(cls.attribute)
        else:
            v = cls.absent
        step.remove_attr(cls.attribute)
        if v is None:
            return None
        arr = np.asarray([v] if cls.scalar else v, dtype=cls.dtype)
        _set_input(node, cls.index, step.add_constant(arr, cls.attribute))
        return None

    @classmethod
    def down(cls, step, node):
        name = step.input(cls.index)
        if name is None:
            _set_input(node, cls.index, "")
            return None
        v = step.constant(name)
        if v is None:
            step.refuse(f"input {cls.index} {name!r} ({cls.attribute}) is computed, not a "
                        f"constant: opset {step.target} needs it as an attribute")
        convert = float if cls.dtype == "float32" else int
        v = [convert(x) for x in np.asarray(v).reshape(-1)]
        if cls.scalar:
            if len(v) != 1:
                step.refuse(f"input {name!r} holds {len(v)} values, not one")
            v = v[0]
        step.set_attr(cls.attribute, v)
        _set_input(node, cls.index, "")
        return None


def _set_input(node, index: int, name: str) -> None:
    """Input ``index`` of ``node`` set to ``name`` (``""`` omits it); trailing omitted inputs
    are dropped."""
    ins = list(node.inputs)
    while len(ins) <= index:
        ins.append("")
    ins[index] = name
    while ins and not ins[-1]:
        ins.pop()
    node.inputs = ins


def _plain(v):
    return v.decode() if isinstance(v, bytes) else v


def _shown(v) -> str:
    return repr(_plain(v))


class ExplicitWindow:
    """Conv, ConvTranspose and the pooling operators at 11: the definition states that absent
    ``strides`` and ``dilations`` are 1 along each spatial axis and restates the output extents
    of ``auto_pad``. Up unchanged. Down: ``strides`` (and ``dilations``, where the earlier
    definition has it) written out as 1s when absent, so the node does not rest on an unstated
    default; ``auto_pad`` SAME_UPPER or SAME_LOWER with a stride other than 1 is refused."""

    @staticmethod
    def up(step, node):
        return None

    @staticmethod
    def down(step, node):
        from ..operators.table import definition

        older = definition(step.domain, step.op_type, step.target)
        spatial = None
        if step.has_attr("kernel_shape"):
            spatial = len(step.attr("kernel_shape"))
        else:
            r = step.rank(step.input(1) if step.op_type in ("Conv", "ConvTranspose")
                          else step.input(0))
            spatial = None if r is None else r - 2
        for name in ("strides", "dilations"):
            if name not in older.attributes or step.has_attr(name):
                continue
            if spatial is None:
                step.refuse(f"{name} is absent and the number of spatial axes is not known")
            step.set_attr(name, [1] * spatial)
        pad = _plain(step.attr("auto_pad", "NOTSET"))
        if pad in ("SAME_UPPER", "SAME_LOWER") and any(
                s != 1 for s in step.attr("strides", [])):
            step.refuse(f"auto_pad {pad} with strides {step.attr('strides')}: the output "
                        f"extents were restated at opset {step.source}")
        return None


class InputAdded:
    """An optional input ``index`` the later definition added, whose absence is the earlier
    behaviour: up unchanged, down refused when the node gives it."""

    index: int = 0

    @staticmethod
    def up(step, node):
        return None

    @classmethod
    def down(cls, step, node):
        given = step.input(cls.index)
        if given is not None:
            step.refuse(f"input {cls.index} {given!r} has no equivalent before opset "
                        f"{step.source}")
        _set_input(node, cls.index, "")
        return None


class Renamed:
    """Attribute values renamed (``names``: attribute -> {earlier value: later value}); the
    default is set explicitly, since it was renamed too."""

    names: dict = {}

    @classmethod
    def _map(cls, step, up: bool) -> None:
        for attr, table in cls.names.items():
            v = _plain(step.attr(attr))
            table = table if up else {b: a for a, b in table.items()}
            if v in table:
                step.set_attr(attr, table[v])

    @classmethod
    def up(cls, step, node):
        cls._map(step, True)

    @classmethod
    def down(cls, step, node):
        cls._map(step, False)
