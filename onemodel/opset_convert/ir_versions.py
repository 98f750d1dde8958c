"""Which IR version an operator set version requires (ONNX's versioning doc, "Released
Versions"; Part 1, Table 12 gives the IR versions and their releases but not the operator sets).

An operator set version is first published in one ONNX release, and that release's IR version
is the least a model importing it is written against: :data:`REQUIRED_IR` is that table, stored
(derived from ``onnx.helper.VERSION_TABLE`` of onnx 1.23;
``tests/opset_convert/test_opset_convert.py`` derives it again and compares). Operator sets
2 to 4 of ai.onnx were never a release's latest: they require the IR version of the next one.

========================  ==========
ai.onnx opset             IR version
========================  ==========
1 - 8                     3
9                         4
10                        5
11                        6
12 - 14                   7
15 - 18                   8
19 - 20                   9
21 - 22                   10
23                        11
24                        12
25 - 27                   13
28                        14
========================  ==========

ai.onnx.ml 1: IR 3, 2: 6, 3: 8, 4: 9, 5: 10; ai.onnx.training 1: IR 7.
"""

from __future__ import annotations

from ..ir.entries import normalize_domain

#: domain -> ((least opset version, greatest opset version, IR version required), ...)
REQUIRED_IR: dict[str, tuple[tuple[int, int, int], ...]] = {
    "": ((1, 8, 3), (9, 9, 4), (10, 10, 5), (11, 11, 6), (12, 14, 7), (15, 18, 8), (19, 20, 9),
         (21, 22, 10), (23, 23, 11), (24, 24, 12), (25, 27, 13), (28, 28, 14)),
    "ai.onnx.ml": ((1, 1, 3), (2, 2, 6), (3, 3, 8), (4, 4, 9), (5, 5, 10)),
    "ai.onnx.training": ((1, 1, 7),),
}

#: the features of a model that need a later IR version than its operator sets may require
#: (Part 1, Table 12): model-local functions (8), each element type by the IR version that
#: introduced it
FUNCTIONS_IR = 8
ELEMENT_TYPE_IR = {17: 9, 18: 9, 19: 9, 20: 9,      # FLOAT8E4M3FN ... FLOAT8E5M2FNUZ
                   21: 10, 22: 10,                    # UINT4, INT4
                   23: 11,                            # FLOAT4E2M1
                   24: 12,                            # FLOAT8E8M0
                   25: 13, 26: 13,                    # UINT2, INT2
                   27: 14, 28: 14}                    # FLOAT6E2M3, FLOAT6E3M2


#: the newest IR version the tables above know (Part 1, Table 12's last row this onemodel holds)
NEWEST_IR = max(max(ir for *_, ir in rows) for rows in REQUIRED_IR.values())


def required_ir(domain: str | None, version: int) -> int | None:
    """The IR version operator set ``version`` of ``domain`` requires (the table of the module
    docstring), or None for a domain or version the table does not know (a custom domain, an
    operator set newer than the stored table)."""
    for lo, hi, ir in REQUIRED_IR.get(normalize_domain(domain), ()):
        if lo <= version <= hi:
            return ir
    return None
