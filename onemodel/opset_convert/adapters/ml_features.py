"""Version adapters of the ml_features family (:mod:`onemodel.operators.families`)."""

from __future__ import annotations

from ...operators import adapter
from ..generic import AttributeAdded


class Tensors4(AttributeAdded):
    """LabelEncoder at 4: ``keys_tensor``, ``values_tensor``, ``default_tensor`` (no default)
    added: refused going down when set."""

    added = ("keys_tensor", "values_tensor", "default_tensor")


adapter("LabelEncoder", since=4, domain="ai.onnx.ml")(Tensors4)


class LabelEncoder2:
    """LabelEncoder at 2: the mapping given as ``keys_*`` and ``values_*`` lists instead of
    opset 1's ``classes_strings`` (a string maps to its index, an index to its string).

    Up: a string input gets ``keys_strings = classes_strings``, ``values_int64s = 0..n-1``;
    an int64 input ``keys_int64s = 0..n-1``, ``values_strings = classes_strings``; the default
    of the output's type is kept (set explicitly). Refused when the input's element type is not
    known, or ``classes_strings`` repeats a string (opset 1 does not say which index wins).

    Down: ``keys_strings`` with ``values_int64s`` that are ``0..n-1`` in some order (each index
    once) become the ``classes_strings`` those indices name; ``keys_int64s`` that are ``0..n-1``
    in some order with ``values_strings`` become the ``classes_strings`` at those indices.
    Anything else (floats, another pairing, values that are not such indices) is refused."""

    @staticmethod
    def up(step, node):
        classes = [_text(c) for c in (step.attr("classes_strings") or [])]
        x = step.input(0)
        code = step.elem(x)
        if code not in (7, 8):
            step.refuse(f"the element type of {x!r} is not known to be string or int64")
        if len(set(classes)) != len(classes):
            step.refuse("classes_strings repeats a string")
        index = list(range(len(classes)))
        step.remove_attr("classes_strings")
        if code == 8:
            step.set_attr("keys_strings", classes, 8)
            step.set_attr("values_int64s", index, 7)
            step.set_attr("default_int64", int(step.attr("default_int64")))
            step.remove_attr("default_string")
        else:
            step.set_attr("keys_int64s", index, 7)
            step.set_attr("values_strings", classes, 8)
            step.set_attr("default_string", _text(step.attr("default_string")))
            step.remove_attr("default_int64")
        return None

    @staticmethod
    def down(step, node):
        given = {n for n in ("keys_strings", "keys_int64s", "keys_floats", "values_strings",
                             "values_int64s", "values_floats") if step.has_attr(n)}
        if given == {"keys_strings", "values_int64s"}:
            keys = [_text(k) for k in step.attr("keys_strings")]
            values = [int(v) for v in step.attr("values_int64s")]
            if len(keys) != len(values) or sorted(values) != list(range(len(values))) \
                    or len(set(keys)) != len(keys):
                step.refuse("values_int64s are not the indices 0..n-1 of distinct keys, which "
                            "is all LabelEncoder-1 maps strings to")
            classes = [""] * len(keys)
            for k, v in zip(keys, values):
                classes[v] = k
            keep = "default_int64"
        elif given == {"keys_int64s", "values_strings"}:
            keys = [int(k) for k in step.attr("keys_int64s")]
            values = [_text(v) for v in step.attr("values_strings")]
            if len(keys) != len(values) or sorted(keys) != list(range(len(keys))):
                step.refuse("keys_int64s are not the indices 0..n-1, which is all "
                            "LabelEncoder-1 maps to strings")
            classes = [""] * len(keys)
            for k, v in zip(keys, values):
                classes[k] = v
            keep = "default_string"
        else:
            step.refuse(f"the mapping {' and '.join(sorted(given)) or '(none)'} has no "
                        "equivalent in LabelEncoder-1, which maps strings to their index and "
                        "indices to strings only")
        value = step.attr(keep)
        for n in (*given, "default_float", "default_int64", "default_string"):
            step.remove_attr(n)
        step.set_attr("classes_strings", classes, 8)
        step.set_attr(keep, value)
        return None


def _text(v) -> str:
    return v.decode("utf-8") if isinstance(v, bytes) else str(v)


adapter("LabelEncoder", since=2, domain="ai.onnx.ml")(LabelEncoder2)
