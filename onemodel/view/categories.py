"""The kind of each operator, which colours its node on the page and in the SVG picture (the
legend names them). One table, sent to the page's script in its data (``categories``)."""

from __future__ import annotations

_KINDS = {
    "conv": "Conv ConvTranspose ConvInteger QLinearConv DeformConv",
    "matmul": "MatMul Gemm MatMulInteger QLinearMatMul Attention MultiHeadAttention Einsum",
    "act": "Relu Sigmoid Tanh Gelu Softmax LogSoftmax LeakyRelu Elu Selu HardSigmoid HardSwish "
           "Mish Softplus Erf PRelu Clip",
    "norm": "BatchNormalization LayerNormalization InstanceNormalization GroupNormalization "
            "RMSNormalization SimplifiedLayerNormalization SkipLayerNormalization "
            "LpNormalization",
    "shape": "Reshape Transpose Squeeze Unsqueeze Flatten Concat Split Slice Gather Shape Expand "
             "Identity Cast Constant ConstantOfShape Range Tile Pad Resize",
    "pool": "MaxPool AveragePool GlobalAveragePool GlobalMaxPool ReduceMean ReduceSum ReduceMax "
            "ReduceMin",
    "control": "If Loop Scan",
}

#: op_type -> kind (``conv``, ``matmul``, ``act``, ``norm``, ``shape``, ``pool``, ``control``);
#: other operators are ``other``, a call of a model-local function ``call``, inputs and outputs
#: ``io``.
CATEGORY = {op: kind for kind, ops in _KINDS.items() for op in ops.split()}

#: Fill colour of each kind (the page's style sheet and the SVG picture).
COLOURS = {"conv": "#cfe0fb", "matmul": "#e2d4f5", "act": "#fbd3cf", "norm": "#d2f0d2",
           "shape": "#e8e8e8", "pool": "#d4eef0", "control": "#ffe0b8", "call": "#c9f2e5",
           "io": "#444444", "other": "#f7f7f7"}


def category(node: dict, kinds: dict | None = None) -> str:
    """The kind of a page node (``{"o", "k", "fn"?}``): ``io``, ``call``, else its op type's in
    ``kinds`` (default :data:`CATEGORY`), else ``other``. The page's script does the same."""
    if node["k"] != "op":
        return "io"
    if "fn" in node:
        return "call"
    return (CATEGORY if kinds is None else kinds).get(node["o"], "other")
