"""Safetensors files as a layout of ONNX external data and as weights in and out.

A safetensors file is an 8-octet little-endian header length, a JSON header naming each
tensor's dtype, shape and byte range, then the data region, which the ranges tile exactly
(:mod:`.header`). Its data are raw little-endian tensors, so an ONNX external data reference
can point into it (Clause 13) and any ONNX reader reads it as ordinary external data.
"""
