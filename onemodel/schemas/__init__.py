"""Operator signatures of ONNX Part 2 (ONNX 1-2), stored with the package.

Every definition of every operator of the domains onnx defines -- ``""`` (ai.onnx),
``ai.onnx.ml``, ``ai.onnx.preview.training``, ``ai.onnx.preview`` -- at every ``since_version``:
formal inputs and outputs, attributes with their defaults, type constraints, deprecation, and
the input/output count limits. The table was extracted from the onnx package named by
:func:`onnx_version` by tools/gen_schemas.py (onnx is never imported here) and is read from the
package data on first use, not at ``import onemodel``.

    >>> from onemodel import schemas
    >>> s = schemas.get("Softmax", "", 12)      # the definition in force at opset 12
    >>> s.since_version, s.default("axis")
    (11, 1)
    >>> schemas.get("Softmax", "", 13).default("axis")
    -1
    >>> schemas.get("Gelu", "", 19) is None, schemas.introduced("Gelu")
    (True, 20)

onnxruntime's contrib operators (``com.microsoft``, ``com.microsoft.nchwc``,
``com.ms.internal.nhwc``, and those it adds to the default domain that onnx lacks, such as
``SimplifiedLayerNormalization``) are stored apart, in data/contrib.json.gz (from the onnxruntime
:func:`onnxruntime_version` names), and served by :func:`contrib` and :func:`contrib_operators`;
:func:`get`, :func:`domains` and the other ONNX lookups never return them.

    >>> schemas.contrib("Attention", "com.microsoft", 1).attributes["num_heads"].required
    True

A node is bound to the definition with the greatest ``since_version`` not above the version of
its domain that the model imports (Part 1, Clause 14.3 and 14.4).

This package imports nothing from onemodel's storage, formats, evaluate or cli packages.
"""

from __future__ import annotations

import bisect
import functools

from ..errors import UsageError
from .types import UNBOUNDED, AttributeSpec, Formal, Schema

__all__ = ["get", "definitions", "contrib", "contrib_domains", "contrib_operators",
           "attribute_default", "versions", "introduced", "domains", "operators", "onnx_version",
           "onnxruntime_version", "Schema", "Formal", "AttributeSpec", "UNBOUNDED"]

_table = None
_contrib = None


def _tab():
    global _table
    if _table is None:
        from .table import Table
        _table = Table()
    return _table


def _contrib_tab():
    """onnxruntime's contrib table (``data/contrib.json.gz``), or None when the package has none."""
    global _contrib
    if _contrib is None:
        import os

        from .table import CONTRIB_PATH, Table
        _contrib = Table(CONTRIB_PATH) if os.path.exists(CONTRIB_PATH) else False
    return _contrib or None


def _domain(domain: str | None) -> str:
    return "" if not domain or domain == "ai.onnx" else domain


def get(op_type: str, domain: str | None = "", version: int | None = None) -> Schema | None:
    """The definition of ``op_type`` in ``domain`` in force at operator set ``version``.

    That is the schema with the greatest ``since_version <= version`` (Part 1, Clause 14.3), the
    latest one when ``version`` is None. A deprecated definition is returned like any other,
    with ``deprecated`` set (Clause 14.5). ``domain`` ``""``, ``None`` and ``"ai.onnx"`` are the
    default domain.

    Returns None when the domain has no such operator, or when ``version`` is below the version
    that introduced it (:func:`introduced` says which). Raises :class:`~onemodel.errors.UsageError`
    when ``version`` is not an int >= 1.
    """
    return _in_force(_tab().schemas(_domain(domain), op_type), version)


def _in_force(found: tuple, version: int | None) -> Schema | None:
    """Of ``found`` (by ``since_version`` ascending), the definition in force at ``version``."""
    if version is not None and (type(version) is not int or version < 1):
        raise UsageError(f"an operator set version is an int >= 1, not {version!r}")
    if not found:
        return None
    if version is None:
        return found[-1]
    i = bisect.bisect_right(found, version, key=lambda s: s.since_version)
    return found[i - 1] if i else None


def definitions(op_type: str, domain: str | None = "") -> tuple[Schema, ...]:
    """Every definition of ``op_type`` in ``domain``, by ``since_version`` ascending; ``()``
    when the domain has no such operator. Unlike :func:`get`, onnxruntime's contrib operators
    are served too, from their own table: those of its domains (:func:`contrib_domains`) and
    those it adds to the default domain (``SimplifiedLayerNormalization``, ...)."""
    d = _domain(domain)
    found = _tab().schemas(d, op_type)
    if not found:
        c = _contrib_tab()
        found = c.schemas(d, op_type) if c is not None else ()
    return found


def contrib(op_type: str, domain: str | None = "com.microsoft",
            version: int | None = None) -> Schema | None:
    """onnxruntime's definition of the contrib operator ``op_type`` in ``domain`` in force at
    operator set ``version``, as :func:`get` does for ONNX's (the greatest ``since_version <=
    version``, the latest when ``version`` is None; Part 1, Clause 14.3), from the contrib table
    (``data/contrib.json.gz``, generated from the onnxruntime :func:`onnxruntime_version` names).

    ``domain`` is one of :func:`contrib_domains`, or ``""`` for the operators onnxruntime adds to
    the default domain that onnx does not define (``SimplifiedLayerNormalization``, ``Affine``,
    ...); an ONNX operator is not served here (use :func:`get`). The inputs' ``min_arity`` is 1:
    onnxruntime does not publish it. Returns None when the table has no such operator (or the
    package stores no contrib table) or ``version`` is below its first definition; raises
    :class:`~onemodel.errors.UsageError` when ``version`` is not an int >= 1. The table is read
    on the first call, not at import.
    """
    c = _contrib_tab()
    return _in_force(c.schemas(_domain(domain), op_type) if c is not None else (), version)


def contrib_operators(domain: str | None = "com.microsoft") -> tuple[str, ...]:
    """The operator names of ``domain`` in the contrib table, sorted (every one any version
    defined; for ``""`` only those onnx does not define); ``()`` for a domain it does not hold."""
    c = _contrib_tab()
    return c.operators(_domain(domain)) if c is not None else ()


def onnxruntime_version() -> str | None:
    """The version of the onnxruntime package the contrib table was generated from
    (``"1.32.0"``), None when the package stores no contrib table."""
    c = _contrib_tab()
    return c.onnxruntime_version if c is not None else None


def contrib_domains() -> tuple[str, ...]:
    """The domains of onnxruntime's contrib operators whose definitions the package stores
    (``com.microsoft``, ...; not the default domain, where onnxruntime adds a few); ``()`` when
    it stores none."""
    c = _contrib_tab()
    return tuple(d for d in c.domains() if d) if c is not None else ()


@functools.lru_cache(maxsize=None)
def _defaults(domain: str, op_type: str, version) -> dict:
    s = get(op_type, domain, version) if type(version) is int and version >= 1 else None
    return s.defaults if s is not None else {}


def attribute_default(domain: str | None, op_type: str, version: int, name: str):
    """The default of attribute ``name`` in the definition of ``op_type`` in force at operator
    set ``version`` (:func:`get`), as kernels and inference rules take attribute values (FLOAT
    the float32 value the definition stores, a list the caller's own); None when the definition
    gives none or there is none (a custom domain, a version before the operator). The table is
    read on the first call, not at import."""
    d = _defaults(_domain(domain), op_type, version).get(name)
    return list(d) if type(d) is list else d


def versions(op_type: str, domain: str | None = "") -> tuple[int, ...]:
    """The ``since_version`` of every definition of the operator, ascending; ``()`` if the
    domain has no such operator."""
    return tuple(s.since_version for s in _tab().schemas(_domain(domain), op_type))


def introduced(op_type: str, domain: str | None = "") -> int | None:
    """The operator set version that introduced the operator (its first definition), or None
    when the domain has no such operator."""
    v = versions(op_type, domain)
    return v[0] if v else None


def domains() -> tuple[str, ...]:
    """The domains the table holds, ``""`` standing for ai.onnx, sorted."""
    return _tab().domains()


def operators(domain: str | None = "") -> tuple[str, ...]:
    """The operator names of ``domain`` (every one any version defined), sorted; ``()`` for a
    domain the table does not hold."""
    return _tab().operators(_domain(domain))


def onnx_version() -> str:
    """The version of the onnx package the table was generated from (``"1.23.2"``)."""
    return _tab().onnx_version


def function_bodies(op_type: str, domain: str | None, since: int) -> tuple:
    """The function bodies ONNX gives the definition of ``op_type`` introduced at ``since``
    (Part 2: an operator "defined as a function"): ``((opset, FunctionProto bytes), ...)``, one
    per operator set version the body is written for, ascending; ``()`` when the definition has
    none stored (context-dependent bodies, built by onnx from a node's attributes and input
    types, are not stored: tools/gen_schemas.py)."""
    return _tab().function_bodies(_domain(domain), op_type, since)
