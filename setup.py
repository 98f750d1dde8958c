"""Build of the optional C accelerator of the ONNX wire decoder (onemodel/formats/onnx/_cdecode.c).

Everything else is in pyproject.toml. ``optional=True``: without a C compiler the install still
succeeds and onemodel uses its pure-Python decoder (same results, slower).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "onemodel.formats.onnx._cdecode",
            ["onemodel/formats/onnx/_cdecode.c"],
            optional=True,
        )
    ]
)
