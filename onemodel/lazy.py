"""numpy, ml_dtypes and zstandard, imported on first use.

Importing numpy takes about 45 ms, a third of a short command's run, and ml_dtypes a few ms more
(0.5, 0.6) or half a second (0.7.0: docs/performance.md). A conversion of a model whose weights
are all ``raw_data`` and whose attributes hold no floats never needs them: the bytes are copied
file to file. The modules of the convert path therefore name numpy through :data:`np` (and
ml_dtypes through :data:`ml_dtypes`), which import the real module the first time one of its
attributes is read; after that an attribute is an ordinary lookup. The evaluator's kernels name
ml_dtypes the same way, so only a model that uses a narrow type (bfloat16, float8, int4 ...)
imports it.

    from ..lazy import np
    arr = np.frombuffer(buf, dtype="<f4")   # numpy is imported here, once

:func:`loaded` tells whether a module has been imported, so that a check such as "is this an
ndarray?" need not import numpy to answer no.
"""

from __future__ import annotations

import importlib
import sys


class LazyModule:
    """Stands for module ``name`` until an attribute is read, then imports it.

    Each attribute read is cached on the instance, so later reads cost a plain attribute lookup.
    Raises ``ImportError`` (from the import) on the first read when the module is missing.
    """

    def __init__(self, name: str):
        self.__dict__["_name"] = name

    def __getattr__(self, attr: str):
        value = getattr(importlib.import_module(self._name), attr)
        self.__dict__[attr] = value
        return value

    def __repr__(self) -> str:
        return f"<lazy module {self._name!r}>"


def loaded(name: str) -> bool:
    """True when module ``name`` has been imported in this process."""
    return name in sys.modules


def is_ndarray(value) -> bool:
    """``isinstance(value, numpy.ndarray)`` without importing numpy (nothing is one before)."""
    return loaded("numpy") and isinstance(value, np.ndarray)


#: numpy, imported on first attribute read.
np = LazyModule("numpy")
#: ml_dtypes (bfloat16, float8, int4 ...), imported on first attribute read.
ml_dtypes = LazyModule("ml_dtypes")
#: zstandard, imported on first attribute read (only ``.zst`` files need it).
zstandard = LazyModule("zstandard")
