"""The ``onnxruntime`` engine: onnxruntime's CPU execution provider, one thread, no graph
optimizations, imported only when this engine is used (``pip install onnxruntime``).

onnxruntime gives graph outputs only, so :meth:`~.base.Engine.observe` is the default one: a
temporary copy of the model with every typed node output as a graph output
(:func:`~.base.exposed_copy`). External weights are copied inline first (onnxruntime takes the
model as one buffer).
"""

from __future__ import annotations

import re

from ..errors import EvaluationError, UnsupportedError, quote
from ..ir import Model
from .base import Engine

#: onnxruntime's exception types (their class names) that a session's ``run`` raises when a
#: valid model fails on the inputs given (a Reshape whose target does not hold for those extents:
#: status FAIL or RUNTIME_EXCEPTION), as onemodel's evaluator raises EvaluationError.
RUN_FAILURES = ("Fail", "RuntimeException")

_NOT_INSTALLED = "engine onnxruntime is not installed: pip install onnxruntime"


def _ort():
    try:
        import onnxruntime
    except ImportError:
        raise UnsupportedError(_NOT_INSTALLED) from None
    return onnxruntime


class OnnxruntimeEngine(Engine):
    """Runs a model with onnxruntime (a test oracle and a second opinion, never a dependency).

    :meth:`run` raises UnsupportedError when onnxruntime is not installed, refuses the model
    when making the session (an operator it lacks: NOT_IMPLEMENTED, INVALID_GRAPH) or fails while
    running it for a reason other than the inputs (INVALID_ARGUMENT ...); EvaluationError (with
    the node's path when the message names one node of the main graph) for FAIL or
    RUNTIME_EXCEPTION while running, so that :func:`onemodel.evaluate.inputs.add_inputs_hint`
    can say which generated input did not fit."""

    name = "onnxruntime"

    def check(self) -> None:
        _ort()

    def run(self, model, feeds):
        ort = _ort()
        from ..formats.onnx import encode_model
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        opts.log_severity_level = 4  # errors are raised, not logged
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        try:
            sess = ort.InferenceSession(encode_model(inlined(model)), opts,
                                        providers=["CPUExecutionProvider"])
            names = [o.name for o in sess.get_outputs()]
        except Exception as e:  # onnxruntime's own exception types
            raise UnsupportedError(f"onnxruntime cannot run the model: "
                                   f"{str(e).strip()[:500]}") from None
        quiet = ort.RunOptions()
        quiet.log_severity_level = 4
        try:
            return dict(zip(names, sess.run(names, feeds, quiet)))
        except Exception as e:  # onnxruntime's own exception types
            detail = str(e).strip()[:500]
            if type(e).__name__ in RUN_FAILURES:
                raise EvaluationError(f"onnxruntime failed while running the model: {detail}",
                                      path=node_path(model, detail)) from None
            raise UnsupportedError(f"onnxruntime cannot run the model: {detail}") from None


_ORT_NODE = re.compile(r"running (\S+) node\. Name:'([^']*)'")


def node_path(model: Model, detail: str) -> str | None:
    """``graph.nodes[i] (Reshape 'name')`` of the main-graph node an onnxruntime failure names
    (``... while running Reshape node. Name:'name' ...``), or None when it names none or no
    one node of the main graph has that name."""
    m = _ORT_NODE.search(detail)
    if m is None or model.graph is None or not m.group(2):
        return None
    found = [i for i, n in enumerate(model.graph.nodes) if n.name == m.group(2)]
    if len(found) != 1:
        return None
    node = model.graph.nodes[found[0]]
    return f"graph.nodes[{found[0]}] ({node.op_type} {quote(node.name)})"


def inlined(model: Model) -> Model:
    """A shallow view of ``model`` whose external tensors carry their bytes inline (for engines
    that take one buffer). Copies the external weights; ``model`` itself when it has none."""
    from ..ir import iter_tensors
    external = [t for _, t in iter_tensors(model) if t.is_external]
    if not external:
        return model
    copy = model.copy()
    for _, t in iter_tensors(copy):
        if t.is_external:
            t.raw_data = bytes(t.raw_view())
            t.data_location = None
            t.external_data = []
    return copy


ENGINE = OnnxruntimeEngine()
