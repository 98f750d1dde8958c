"""The families of operators: which module of ``onemodel/evaluate/kernels/`` and of
``onemodel/inference/rules/`` holds an operator's kernel and rule (the same name in both trees).

This is the one hand-written list an operator appears in: its signatures come from the stored
schema tables (:mod:`onemodel.schemas`), its kernel and rule attach to those by reference
(:func:`onemodel.operators.kernel`, :func:`onemodel.operators.rule`). The table imports a
family's module when one of its operators is first looked up, so a model of five families
loads five rule modules. To add an operator: add its name to a family here (or a new family,
with both modules), then write one kernel and one rule (docs/architecture.md, "Adding an
operator").
"""

from __future__ import annotations

#: family -> domain ("" is ai.onnx) -> operator names. A family names one module in each tree.
FAMILIES: dict[str, dict[str, tuple[str, ...]]] = {
    "elementwise": {
        "": (
            "Abs", "Acos", "Acosh", "Add", "And", "Asin", "Asinh", "Atan", "Atanh", "BitShift",
            "BitwiseAnd", "BitwiseNot", "BitwiseOr", "BitwiseXor", "Ceil", "Clip", "Cos", "Cosh",
            "Div", "Equal", "Erf", "Exp", "Floor", "Greater", "GreaterOrEqual", "IsInf", "IsNaN",
            "Less", "LessOrEqual", "Log", "Max", "Mean", "Min", "Mod", "Mul", "Neg", "Not", "Or",
            "Pow", "Reciprocal", "Round", "Sign", "Sin", "Sinh", "Sqrt", "Sub", "Sum", "Tan",
            "Tanh", "Where", "Xor"
        ),
    },
    "activations": {
        "": (
            "Celu", "Elu", "Gelu", "HardSigmoid", "HardSwish", "Hardmax", "LeakyRelu", "LogSoftmax",
            "Mish", "PRelu", "Relu", "Selu", "Shrink", "Sigmoid", "Softmax", "Softplus", "Softsign",
            "Swish", "ThresholdedRelu"
        ),
    },
    "shape": {
        "": (
            "CenterCropPad", "Compress", "Concat", "Constant", "ConstantOfShape", "DepthToSpace",
            "Expand", "EyeLike", "Flatten", "Gather", "GatherElements", "GatherND", "Identity",
            "NonZero", "OneHot", "Pad", "Range", "Reshape", "ReverseSequence", "Scatter",
            "ScatterElements", "ScatterND", "Shape", "Size", "Slice", "SpaceToDepth", "Split",
            "Squeeze", "Tile", "Transpose", "Trilu", "Unique", "Unsqueeze"
        ),
    },
    "reduce": {
        "": (
            "ArgMax", "ArgMin", "CumProd", "CumSum", "ReduceL1", "ReduceL2", "ReduceLogSum",
            "ReduceLogSumExp", "ReduceMax", "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSum",
            "ReduceSumSquare", "TopK"
        ),
    },
    "cast": {
        "": ("BitCast", "Cast", "CastLike"),
    },
    "linalg": {
        "": ("Det", "Einsum", "Gemm", "MatMul"),
    },
    "conv": {
        "": ("CausalConvWithState", "Col2Im", "Conv", "ConvTranspose", "DeformConv"),
    },
    "pool": {
        "": (
            "AveragePool", "GlobalAveragePool", "GlobalLpPool", "GlobalMaxPool", "LpPool",
            "MaxPool", "MaxUnpool"
        ),
    },
    "norm": {
        "": (
            "BatchNormalization", "GroupNormalization", "InstanceNormalization", "LRN",
            "LayerNormalization", "LpNormalization", "MeanVarianceNormalization", "RMSNormalization"
        ),
    },
    "control": {
        "": ("If", "Loop", "Scan"),
    },
    "sequence": {
        "": (
            "ConcatFromSequence", "Optional", "OptionalGetElement", "OptionalHasElement",
            "SequenceAt", "SequenceConstruct", "SequenceEmpty", "SequenceErase", "SequenceInsert",
            "SequenceLength", "SequenceMap", "SplitToSequence"
        ),
    },
    "quant": {
        "": (
            "ConvInteger", "DequantizeLinear", "DynamicQuantizeLinear", "MatMulInteger",
            "QLinearConv", "QLinearMatMul", "QuantizeLinear"
        ),
    },
    "rnn": {
        "": ("GRU", "LSTM", "RNN"),
    },
    "resize": {
        "": ("Resize", "Upsample"),
    },
    "ml_linear": {
        "ai.onnx.ml": (
            "LinearClassifier", "LinearRegressor", "SVMClassifier", "SVMRegressor"
        ),
    },
    "ml_trees": {
        "ai.onnx.ml": ("TreeEnsemble", "TreeEnsembleClassifier", "TreeEnsembleRegressor"),
    },
    "ml_features": {
        "ai.onnx.ml": (
            "ArrayFeatureExtractor", "Binarizer", "CastMap", "DictVectorizer", "FeatureVectorizer",
            "Imputer", "LabelEncoder", "Normalizer", "OneHotEncoder", "Scaler", "ZipMap"
        ),
    },
    "random": {
        "": (
            "Bernoulli", "Dropout", "Multinomial", "RandomNormal", "RandomNormalLike",
            "RandomUniform", "RandomUniformLike"
        ),
    },
    "signal": {
        "": ("BlackmanWindow", "DFT", "HammingWindow", "HannWindow", "MelWeightMatrix", "STFT"),
    },
    "text": {
        "": (
            "RegexFullMatch", "StringConcat", "StringNormalizer", "StringSplit", "TfIdfVectorizer"
        ),
    },
    "vision": {
        "": ("AffineGrid", "GridSample", "NonMaxSuppression", "RoiAlign"),
    },
    "attention": {
        "": ("Attention", "LinearAttention", "RotaryEmbedding", "SwiGLU", "TensorScatter"),
        "ai.onnx.preview": ("FlexAttention",),
    },
    "loss": {
        "": ("NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"),
    },
    "training": {
        "ai.onnx.preview.training": ("Adagrad", "Adam", "Momentum"),
    },
    "ms_quant": {
        "com.microsoft": (
            "DynamicQuantizeMatMul", "GatherBlockQuantized", "MatMulIntegerToFloat", "MatMulNBits",
            "QLinearAdd", "QLinearConcat", "QLinearGlobalAveragePool", "QLinearMul",
            "QLinearSigmoid"
        ),
    },
    "ms_fused": {
        "": ("SimplifiedLayerNormalization",),   # onnxruntime defines it in the default domain
        "com.microsoft": (
            "BiasAdd", "BiasGelu", "EmbedLayerNormalization", "FastGelu", "FusedConv",
            "FusedMatMul", "Gelu", "NhwcConv", "QuickGelu", "SkipLayerNormalization",
            "SkipSimplifiedLayerNormalization", "Trilu"
        ),
    },
    "ms_attention": {
        "com.microsoft": (
            "Attention", "GroupQueryAttention", "MultiHeadAttention", "RotaryEmbedding"
        ),
    },
    "ms_transformers": {
        "com.microsoft": ("FusedGemm", "QAttention", "QEmbedLayerNormalization"),
    },
}

#: (domain, op_type) -> why no kernel or rule serves any of its definitions.
UNIMPLEMENTED: dict[tuple[str, str], str] = {
    ("", "ImageDecoder"): "decoding JPEG, JPEG 2000, WebP, TIFF, PNG, BMP and PNM needs image "
                          "codecs, which are not among onemodel's dependencies",
    ("", "MaxRoiPool"): "not implemented yet (no conformance case exercises it)",
    ("ai.onnx.ml", "CategoryMapper"): "not implemented yet",
    ("ai.onnx.preview.training", "Gradient"): "needs automatic differentiation of a graph",
}

#: (domain, op_type, since_version) -> why the definition of that version has no kernel or rule
#: although later ones do.
UNIMPLEMENTED_VERSIONS: dict[tuple[str, str, int], str] = {
    ("", "Upsample", 1): "Upsample-1 takes height_scale and width_scale attributes of a "
                         "definition no exporter writes; Upsample-7 and -9 are served",
}
