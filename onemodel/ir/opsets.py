"""Operator set descriptions (``OperatorProto``, ``OperatorSetProto``, Annex B.3)."""

from __future__ import annotations

from .record import INT, LIST_MSG, STR, Record


class Operator(Record):
    """``OperatorProto``: an operator of an operator set and the version it appeared in."""

    FIELDS = (
        ("op_type", STR, None),
        ("since_version", INT, None),
        ("status", INT, None),
        ("doc_string", STR, None),
    )


class OperatorSet(Record):
    """``OperatorSetProto``: the operators and functions of one version of one domain."""

    FIELDS = (
        ("magic", STR, None),
        ("ir_version", INT, None),
        ("ir_version_prerelease", STR, None),
        ("domain", STR, None),
        ("opset_version", INT, None),
        ("doc_string", STR, None),
        ("ir_build_metadata", STR, None),
        ("operators", LIST_MSG, "Operator"),
        ("functions", LIST_MSG, "Function"),
    )
