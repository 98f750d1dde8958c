"""The records of the operator schema table: Schema, Formal and AttributeSpec.

They describe operator definitions as ONNX Part 2 (ONNX 1-2) publishes them; an operator is
identified by its domain, name and the operator set version that introduced its definition
(Part 1, Clause 14.3).
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Mapping

#: The bound onnx uses for "no limit" in ``max_input`` / ``max_output`` (2**31 - 1).
UNBOUNDED = 2**31 - 1


class _Record:
    """Read-only fields named by ``__slots__``, set once by position or keyword; equal when of
    one class with equal fields. (Plain classes: dataclasses cost 3 ms to create at import.)"""

    __slots__ = ()

    def __init__(self, *args, **kwargs):
        names = self.__slots__
        values = dict(zip(names, args), **kwargs)
        for name in names:
            object.__setattr__(self, name, values.pop(name, self._DEFAULTS.get(name)))
        if values or len(args) > len(names):
            raise TypeError(f"{type(self).__name__}: unexpected fields {sorted(values)}")

    _DEFAULTS: dict = {}

    def __setattr__(self, name, value):
        raise AttributeError(f"{type(self).__name__} is read-only")

    def _values(self) -> tuple:
        return tuple(getattr(self, n) for n in self.__slots__)

    def __eq__(self, other):
        return type(other) is type(self) and other._values() == self._values()

    def __hash__(self):
        return hash((type(self).__name__, self.name))

    def __repr__(self):
        shown = ", ".join(f"{n.lstrip('_')}={getattr(self, n)!r}" for n in self.__slots__)
        return f"{type(self).__name__}({shown})"


class Formal(_Record):
    """A formal input or output of an operator.

    Attributes:
        name: its name in the operator definition (``"X"``).
        type_str: a type constraint parameter of the schema (``"T"``, see
            :attr:`Schema.constraints`) or a type written out (``"tensor(int64)"``).
        option: ``"single"``, ``"optional"`` (may be omitted or given an empty name) or
            ``"variadic"`` (stands for ``min_arity`` or more trailing actual parameters; Part 1,
            Clause 7.3.3).
        is_homogeneous: for a variadic parameter, whether all its actual parameters have one type.
        min_arity: for a variadic parameter, the least number of actual parameters (onnx's
            value; 1 for single and optional parameters).
    """

    __slots__ = ("name", "type_str", "option", "is_homogeneous", "min_arity")

    @property
    def optional(self) -> bool:
        """Whether the parameter may be left out (``option == "optional"``)."""
        return self.option == "optional"

    @property
    def variadic(self) -> bool:
        """Whether the parameter stands for a run of actual parameters."""
        return self.option == "variadic"


class AttributeSpec(_Record):
    """An attribute an operator defines.

    Attributes:
        name: the attribute's name.
        type: its type, the ``AttributeProto.AttributeType`` name: ``"FLOAT"``, ``"INT"``,
            ``"STRING"``, ``"TENSOR"``, ``"GRAPH"``, ``"FLOATS"``, ``"INTS"``, ``"STRINGS"`` ...
        required: whether a node must set it (Part 1, Clause 10.4).
        has_default: whether the definition gives a default (then ``required`` is False).
    """

    __slots__ = ("name", "type", "required", "has_default", "_default")
    _DEFAULTS = {"has_default": False}

    @property
    def default(self):
        """The default value as a plain value, ``None`` when there is none.

        FLOAT -> float (the float32 value the definition stores, exactly: LeakyRelu's 0.01 is
        0.009999999776482582), INT -> int, STRING -> str, FLOATS / INTS / STRINGS -> a new
        list of those (the caller's own). onnx 1.23 gives no default of another kind.
        """
        d = self._default
        return list(d) if type(d) is list else d


class Schema(_Record):
    """One definition of an operator: the signature ONNX 1-2 gives it from ``since_version`` on.

    Attributes:
        name: the operator's name (``op_type``).
        domain: its domain, ``""`` for ai.onnx.
        since_version: the operator set version that introduced this definition.
        deprecated: whether the definition marks the operator deprecated (Part 1, Clause 14.5: a
            consumer still evaluates it; onnx then lists no inputs or outputs for it).
        inputs, outputs: the formal parameters (tuples of :class:`Formal`), in order.
        attributes: name -> :class:`AttributeSpec` (read-only mapping, sorted by name).
        constraints: type parameter -> the type strings it allows, e.g. ``"T" ->
            ("tensor(double)", "tensor(float)", ...)`` (read-only mapping, sorted types).
        min_input, max_input, min_output, max_output: the number of actual inputs and outputs a
            node may have; :data:`UNBOUNDED` (2**31 - 1) is no upper limit.
    """

    __slots__ = ("name", "domain", "since_version", "deprecated", "inputs", "outputs",
                 "attributes", "constraints", "min_input", "max_input", "min_output",
                 "max_output")

    attributes: Mapping[str, AttributeSpec]
    constraints: Mapping[str, tuple]

    def default(self, name: str):
        """The default value of attribute ``name`` (see :attr:`AttributeSpec.default`), or
        ``None`` when the attribute has none or the operator does not define it."""
        spec = self.attributes.get(name)
        return spec.default if spec is not None else None

    @property
    def defaults(self) -> dict:
        """Attribute name -> default value, for every attribute that has one (a new dict)."""
        return {n: a.default for n, a in self.attributes.items() if a.has_default}

    def allowed_types(self, type_str: str) -> tuple:
        """The type strings a formal parameter typed ``type_str`` admits: its constraint's list,
        or ``(type_str,)`` when ``type_str`` is a type written out rather than a parameter."""
        return self.constraints.get(type_str, (type_str,))


def frozen_mapping(d: dict) -> Mapping:
    """A read-only view of ``d`` (the records are shared by every caller)."""
    return MappingProxyType(d)
