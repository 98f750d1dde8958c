"""The inference rules, one module per family of operators, named as the evaluator's kernel
modules (``onemodel/evaluate/kernels/<family>.py`` -> ``rules/<family>.py``). Importing this
package imports every module in it, which registers their rules (:mod:`..registry`)."""

from __future__ import annotations

import importlib
import pkgutil

for _m in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    if not _m.startswith("_"):
        importlib.import_module(f"{__name__}.{_m}")
