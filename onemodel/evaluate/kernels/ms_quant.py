"""Kernels of the quantized matrix products and QLinear operators of onnxruntime's com.microsoft domain (com.microsoft, opset 1)."""

from __future__ import annotations
