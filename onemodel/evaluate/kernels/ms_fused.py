"""Kernels of the fused activations, normalizations, convolutions and matrix products of onnxruntime's com.microsoft domain (com.microsoft, opset 1)."""

from __future__ import annotations
