"""The built-in kernels, one module per operator family.

Importing this package imports every module in :data:`MODULES`, which registers their kernels
with :mod:`onemodel.evaluate.registry`. To add a family, add its module name here.
"""

from importlib import import_module

#: Kernel modules of this package, imported in this order.
MODULES = (
    "elementwise",
    "activations",
    "shape",
    "reduce",
    "cast",
    "linalg",
    "conv",
    "pool",
    "norm",
    "control",
    "sequence",
    "quant",
    "rnn",
    "resize",
    "ml",
    "misc",
    "vision",
    "attention",
    "loss",
    "training",
    "ms_quant",
    "ms_fused",
    "ms_attention",
    "ms_transformers",
)

for _name in MODULES:
    import_module(f"{__name__}.{_name}")
