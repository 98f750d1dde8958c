"""The operator table: one entry per operator version ``(domain, op_type, since_version)``.

An entry owns the operator's signature (ONNX Part 1, Clause 14.3: formal inputs and outputs,
attributes with their defaults, type constraints); the evaluator's kernel, the inference rule
and the shared geometry attach to it by reference. This package imports neither numpy nor the
evaluator.
"""
