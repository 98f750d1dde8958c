"""Build of the optional C accelerators: the ONNX wire decoder (onemodel/formats/onnx/_cdecode.c),
the graph rules' one pass (onemodel/ir/_cpass.c) and the evaluator's float32 kernels
(onemodel/evaluate/_ckernels.c).

Everything else is in pyproject.toml. ``optional=True``: without a C compiler the install still
succeeds and onemodel uses its pure-Python code instead (same results, slower).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "onemodel.formats.onnx._cdecode",
            ["onemodel/formats/onnx/_cdecode.c"],
            include_dirs=["onemodel"],
            depends=["onemodel/_cslots.h"],
            optional=True,
        ),
        Extension(
            "onemodel.ir._cpass",
            ["onemodel/ir/_cpass.c"],
            include_dirs=["onemodel"],
            depends=["onemodel/_cslots.h"],
            optional=True,
        ),
        Extension(
            "onemodel.evaluate._ckernels",
            ["onemodel/evaluate/_ckernels.c"],
            optional=True,
        ),
    ]
)
