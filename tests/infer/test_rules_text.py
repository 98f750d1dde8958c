"""Inference rules of the string operators and TfIdfVectorizer (onemodel/inference/rules/text.py):
StringConcat broadcast, StringSplit unknown extent, StringNormalizer, RegexFullMatch,
TfIdfVectorizer; contradictions; the evaluator agreeing and onnx agreeing where it has an
answer."""

import numpy as np
from onnx import TensorProto as T

from tests.infer.harness import inferred, node_model
from tests.infer.rules_check import (
    check_family_registered,
    check_unknown_inputs,
    contradicts,
    expect,
)

F, I64, I32, B, STR = T.FLOAT, T.INT64, T.INT32, T.BOOL, T.STRING


def test_every_kernel_has_a_rule_at_its_versions():
    assert check_family_registered("text") == 5


def test_unknown_inputs_never_raise():
    assert check_unknown_inputs("text") >= 15


def expect_strings(model, outs: dict):
    """Assert each output's inferred (elem, shape spec) and that the evaluator's results, on
    random string inputs for 3 bindings of N, have those extents (harness.sound compares
    numpy dtypes, which strings have none of)."""
    from onemodel.evaluate import Session
    from onemodel.evaluate.inputs import random_inputs
    from tests.infer.rules_check import dims

    got = inferred(model)
    for name, (elem, shape) in outs.items():
        assert got[name].elem == elem and got[name].shape == dims(shape), (name, got[name])
    sess = Session(model)
    for n in (1, 2, 5):
        names = {d.dim_param for vi in model.graph.inputs for d in vi.type.shape.dims}
        res = sess.run(random_inputs(model, seed=n, dims={"N": n} if "N" in names else {}))
        for name, (elem, shape) in outs.items():
            want = [n if d == "N" else d for d in shape]
            have = list(np.asarray(res[name]).shape)
            assert len(have) == len(want), (name, have, want)
            assert all(w is None or w == h for w, h in zip(want, have)), (name, have, want)
            assert (np.asarray(res[name]).dtype == object) == (elem == STR), name


def test_strings():
    expect_strings(node_model("StringConcat", [("a", STR, ["N", 1]), ("b", STR, [3])],
                              opset=20), {"y": (STR, ["N", 3])})
    expect_strings(node_model("StringSplit", [("x", STR, ["N", 2])], 2, opset=20,
                              delimiter=","), {"y0": (STR, ["N", 2, None]),
                                               "y1": (I64, ["N", 2])})
    expect_strings(node_model("StringSplit", [("x", STR, ["N", 0])], 2, opset=20),
                   {"y0": (STR, ["N", 0, 0]), "y1": (I64, ["N", 0])})
    expect_strings(node_model("RegexFullMatch", [("x", STR, ["N"])], opset=20, pattern="a+"),
                   {"y": (B, ["N"])})
    expect_strings(node_model("StringNormalizer", [("x", STR, [1, 3])], opset=10,
                              case_change_action="LOWER"), {"y": (STR, [1, 3])})
    expect_strings(node_model("StringNormalizer", [("x", STR, [4])], opset=10,
                              stopwords=["a"]), {"y": (STR, [None])})
    # an unknown C may be 0, which gives [""]: not entailed to be C
    expect_strings(node_model("StringNormalizer", [("x", STR, [None])], opset=10),
                   {"y": (STR, [None])})
    expect_strings(node_model("StringNormalizer", [("x", STR, [0])], opset=10),
                   {"y": (STR, [1])})
    contradicts(node_model("StringNormalizer", [("x", STR, [2, 3])], opset=10), "[C]")


def test_tfidf_vectorizer():
    attrs = dict(mode="TF", min_gram_length=1, max_gram_length=2, max_skip_count=0,
                 ngram_counts=[0, 3], ngram_indexes=[0, 1, 2, 3, 4],
                 pool_int64s=[2, 3, 5, 2, 3, 5, 4])
    expect(node_model("TfIdfVectorizer", [("x", I64, ["N", 6])], opset=9, **attrs), ["N", 5],
           F)
    expect(node_model("TfIdfVectorizer", [("x", I32, [6])], opset=9, **attrs), [5], F)

