"""onemodel.evaluate: a numpy evaluator for the in-memory model (ONNX Part 1, Clauses 4.4, 7, 8).

* :func:`run` evaluates a model once; :class:`Session` prepares it once and runs it many times.
* Before any computation the session lists every operator ``(domain, op_type, opset)`` it cannot
  evaluate and refuses with :class:`~onemodel.errors.UnsupportedError`; it never substitutes an
  approximation (Clause 4.4).
* Kernels are registered by ``(domain, op_type, since_version)`` (:mod:`.registry`); users add
  their own with :func:`register_kernel` or the :func:`op` decorator (``user=True``), and those
  take precedence over built-in kernels and model-local functions; ``Session(model,
  kernels=...)`` takes kernels for one session, ahead of both.
* The graph rules (:mod:`onemodel.ir.graph_rules`, function bodies included) are checked before
  planning, with the same messages and paths as the readers and ``convert``.
* A node failing on its values is an :class:`~onemodel.errors.EvaluationError`; a kernel's bug
  (an exception that is not a OneModelError nor a numpy error on the values given) an
  :class:`~onemodel.errors.InternalError` naming the node and the kernel.
* ``Session(model, tune_malloc=True)`` opts in to keeping freed memory mapped for the next run
  (a process-wide glibc setting, :mod:`.memory`); a Session leaves malloc alone by default.
* :func:`random_inputs` makes deterministic inputs from the declared input types.
"""

from .context import Context
from .inputs import random_inputs
from .registry import op, register_kernel, unregister_kernel
from .runner import Session, run

__all__ = ["Context", "Session", "op", "random_inputs", "register_kernel", "run",
           "unregister_kernel"]
