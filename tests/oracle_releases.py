"""The releases of the test oracles whose behaviour the tests rely on, as the dev extra of
pyproject.toml bounds them, and the reason a test skips where the extra installs no oracle.

onnxruntime: the tests compare with 1.32 (1.30 differs in GatherBlockQuantized with negative
indices and float8/float4 data, in the transformer optimizer's fusions and in attention
details). 1.32 has no wheel for Python 3.10 (1.23 is the last there, and it crashes on some of
the com.microsoft models of the tests), so on 3.10 the extra installs none and a test that runs
onnxruntime skips (tests/conftest.py).
"""

from __future__ import annotations

import importlib.util
import sys

import pytest

#: The onnxruntime release the tests compare with: the dev extra's ``>=1.32,<1.33``.
ONNXRUNTIME = "1.32"
#: Whether onnxruntime is installed (not on Python 3.10, where the dev extra leaves it out).
ONNXRUNTIME_INSTALLED = importlib.util.find_spec("onnxruntime") is not None
#: Why a test that runs onnxruntime skips where it is not installed.
NO_ONNXRUNTIME = (f"needs onnxruntime {ONNXRUNTIME}, the oracle the tests compare with, which "
                  f"has no wheel for Python {sys.version_info[0]}.{sys.version_info[1]} (the dev "
                  "extra installs it on Python 3.11 and later)")

#: For a test that runs onnxruntime through onemodel (``engine="onnxruntime"``) or expects its
#: refusal: skips where onnxruntime is not installed. (A test that imports it skips by itself.)
needs_onnxruntime = pytest.mark.skipif(not ONNXRUNTIME_INSTALLED, reason=NO_ONNXRUNTIME)
