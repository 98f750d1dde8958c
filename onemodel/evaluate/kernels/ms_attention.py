"""Kernels of the attention and rotary embedding operators of onnxruntime's com.microsoft domain (com.microsoft, opset 1)."""

from __future__ import annotations
