"""Inference rules of the assorted operators (onemodel/inference/rules/misc.py): Dropout (bool
mask), LRN, random generators (dtype and shape attributes, *Like, Bernoulli, Multinomial),
windows (size from data), DFT (opset 17 attribute axis, 20 input axis; onesided, inverse),
STFT, MelWeightMatrix, strings (StringConcat broadcast, StringSplit unknown extent,
StringNormalizer, RegexFullMatch), TfIdfVectorizer, Col2Im; contradictions; the evaluator
agreeing (``sound``) and onnx agreeing where it has an answer."""

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper

from onemodel.inference import Expr
from tests.infer.harness import inferred, node_model, sound
from tests.infer.rules_check import (
    check_family_registered,
    check_unknown_inputs,
    contradicts,
    expect,
)
from tests.infer.test_rules_shape import graph_model

F, D64, F16, I64, I32, B, STR = (T.FLOAT, T.DOUBLE, T.FLOAT16, T.INT64, T.INT32, T.BOOL,
                                 T.STRING)
N, S = Expr.var("N"), Expr.var("S")


def i64(v):
    return np.array(v, dtype=np.int64)


def test_every_kernel_has_a_rule_at_its_versions():
    assert check_family_registered("misc") == 20


def test_unknown_inputs_never_raise():
    assert check_unknown_inputs("misc") >= 90


@pytest.mark.parametrize("opset,mask", [(6, F), (7, F), (10, B), (12, B), (13, B), (22, B)])
def test_dropout(opset, mask):
    m = node_model("Dropout", [("x", F, ["N", 3])], 2, opset=opset)
    expect(m, ["N", 3], F, out="y0")
    expect(m, ["N", 3], mask, out="y1")


@pytest.mark.parametrize("opset", [1, 13])
def test_lrn(opset):
    expect(node_model("LRN", [("x", F, ["N", 3, "S"])], opset=opset, size=3), ["N", 3, "S"], F)


@pytest.mark.parametrize("op", ["RandomUniform", "RandomNormal"])
@pytest.mark.parametrize("opset", [1, 22])
def test_random_generators(op, opset):
    expect(node_model(op, [], opset=opset, shape=[2, 3]), [2, 3], F)
    expect(node_model(op, [], opset=opset, shape=[4], dtype=D64), [4], D64)
    contradicts(node_model(op, [], opset=opset, shape=[-1]), "negative")


@pytest.mark.parametrize("op", ["RandomUniformLike", "RandomNormalLike"])
@pytest.mark.parametrize("opset", [1, 22])
def test_random_like(op, opset):
    expect(node_model(op, [("x", F16, ["N", 2])], opset=opset), ["N", 2], F16)
    expect(node_model(op, [("x", F16, ["N", 2])], opset=opset, dtype=D64), ["N", 2], D64)


def test_bernoulli_and_multinomial():
    expect(node_model("Bernoulli", [("p", F, ["N", 2])], opset=15), ["N", 2], F)
    expect(node_model("Bernoulli", [("p", F, ["N", 2])], opset=15, dtype=B), ["N", 2], B)
    for opset in (7, 22):
        expect(node_model("Multinomial", [("x", F, ["N", 5])], opset=opset, sample_size=3),
               ["N", 3], I32)
        expect(node_model("Multinomial", [("x", F, ["N", 5])], opset=opset, dtype=I64),
               ["N", 1], I64)
    contradicts(node_model("Multinomial", [("x", F, [5])], opset=22), "rank 1")


@pytest.mark.parametrize("op", ["HannWindow", "HammingWindow", "BlackmanWindow"])
def test_windows(op):
    expect(node_model(op, [("n", np.array(7, np.int64))], opset=17), [7], F)
    expect(node_model(op, [("n", np.array(4, np.int32))], opset=17, output_datatype=D64),
           [4], D64)
    # the size from a shape's data: symbolic
    nodes = [helper.make_node("Shape", ["x"], ["s"], start=0, end=1),
             helper.make_node("Squeeze", ["s", "z"], ["n"]),
             helper.make_node(op, ["n"], ["y"], periodic=0)]
    m = graph_model(nodes, [("x", F, ["N", 2])], inits={"z": i64([0])}, opset=17)
    v = inferred(m)["y"]
    assert v.shape == (N,) and v.elem == F
    assert sound(m) > 0
    contradicts(node_model(op, [("n", np.array(-1, np.int64))], opset=17), "negative")


@pytest.mark.parametrize("opset", [17, 20])
def test_dft(opset):
    x = [("x", F, ["N", 8, 1])]
    expect(node_model("DFT", x, opset=opset), ["N", 8, 2], F)
    expect(node_model("DFT", x, opset=opset, onesided=1), ["N", 5, 2], F)
    expect(node_model("DFT", x + [("n", i64(6))], opset=opset), ["N", 6, 2], F)
    x2 = [("x", F, ["N", 5, 2])]
    expect(node_model("DFT", x2, opset=opset, inverse=1, onesided=1), ["N", 8, 1], F)
    expect(node_model("DFT", x2 + [("n", i64(7))], opset=opset, inverse=1, onesided=1),
           ["N", 7, 1], F)
    contradicts(node_model("DFT", [("x", F, ["N", 8, 3])], opset=opset), "last extent is 3")


def test_dft_symbolic_and_axes():
    from onemodel.inference import dims as D
    m = node_model("DFT", [("x", F, [2, "S", 1])], opset=17, onesided=1)
    expect(m, [2, D.add(D.floordiv(S, 2), 1), 2], F)
    m = node_model("DFT", [("x", F, [2, "S", 2])], opset=20, inverse=1, onesided=1)
    v = inferred(m)["y"]
    assert v.shape == (2, D.mul(2, D.sub(S, 1)), 1) and v.elem == F
    assert sound(m, low=2) > 0   # S = 1 gives no samples: the kernel refuses
    # opset 17: axis attribute on the signal rank; 20: axis input on the full rank
    expect(node_model("DFT", [("x", F, [3, 4, 5, 1])], opset=17, axis=2), [3, 4, 5, 2], F)
    expect(node_model("DFT", [("x", F, [3, 4, 5, 1]), ("", ), ("a", i64(1))], opset=20),
           [3, 4, 5, 2], F)
    contradicts(node_model("DFT", [("x", F, [3, 4, 1])], opset=17, axis=2), "axis 2")
    contradicts(node_model("DFT", [("x", F, [3, 4, 1]), ("", ), ("a", i64(-1))], opset=20),
                "axis -1")


def test_stft():
    sig = [("x", F, ["N", 16, 1]), ("st", i64(4))]
    # onnx's inference gives 8 bins here, ignoring onesided's default of 1; the kernel (and
    # the conformance vectors) have floor(8 / 2) + 1
    expect(node_model("STFT", sig + [("w", np.hanning(8).astype(np.float32))], opset=17),
           ["N", 3, 5, 2], F, check_onnx=False)
    expect(node_model("STFT", sig + [("", ), ("fl", i64(6))], opset=17, onesided=0),
           ["N", 3, 6, 2], F)
    from onemodel.inference import dims as D
    m = node_model("STFT", [("x", F, ["N", "S", 1]), ("st", i64(2)), ("", ), ("fl", i64(1))],
                   opset=17)
    expect(m, ["N", D.add(D.floordiv(D.sub(S, 1), 2), 1), 1, 2], F)
    contradicts(node_model("STFT", [("x", F, ["N", 16]), ("st", i64(4))], opset=17), "rank 2")


def test_mel_weight_matrix():
    ins = [("b", np.array(8, np.int64)), ("n", np.array(16, np.int64)),
           ("r", np.array(8000, np.int64)), ("lo", np.array(0, np.float32)),
           ("hi", np.array(4000, np.float32))]
    expect(node_model("MelWeightMatrix", ins, opset=17), [9, 8], F)
    expect(node_model("MelWeightMatrix", ins, opset=17, output_datatype=D64), [9, 8], D64)


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


def test_col2im():
    m = node_model("Col2Im", [("x", F, ["N", 12, 9]), ("i", i64([4, 4])), ("b", i64([2, 2]))],
                   opset=18)
    expect(m, ["N", 3, 4, 4], F)
    contradicts(node_model("Col2Im", [("x", F, ["N", 10, 9]), ("i", i64([4, 4])),
                                      ("b", i64([2, 2]))], opset=18), "block size 4")


FAMILIES_D = ("reduce", "attention", "rnn", "misc", "ml")


def _operator_versions():
    """(op, domain, version, schema, allowed element type codes per input) of every operator
    version of the reduce, attention, rnn, misc and ml families."""
    import onnx

    from onemodel.schemas import get as get_schema
    from tests.infer.rules_check import family_keys

    for family in FAMILIES_D:
        for (domain, op), versions in family_keys(family).items():
            for v in versions:
                schema = get_schema(op, domain, v)
                codes = []
                for f in schema.inputs:
                    allowed = schema.constraints.get(f.type_str, (f.type_str,))
                    names = [a[len("tensor("):-1] for a in allowed if a.startswith("tensor(")]
                    codes.append([getattr(onnx.TensorProto, n.upper(), 1)
                                  for n in names or ["float"]])
                yield op, domain, v, schema, codes


def test_wrong_attribute_types_never_raise():
    """Every operator of the five families, each attribute its definition lists given a value
    of another type (a list for a single value, an int for a list), on inputs of unknown rank:
    contradictions at most, never an exception."""
    from onemodel.inference import Value
    from tests.infer.rules_check import infer_values

    n = 0
    for op, domain, v, schema, codes in _operator_versions():
        ins = [Value.tensor(c[0], None) for c in codes]
        for attr, spec in schema.attributes.items():
            if spec.type in ("GRAPH", "GRAPHS", "TENSOR", "TENSORS", "SPARSE_TENSOR",
                             "TYPE_PROTO", "TYPE_PROTOS"):
                continue
            wrong = 3 if spec.type.endswith("S") else [1, 2]
            outs, _ = infer_values(op, ins, max(1, len(schema.outputs)),
                                   opset=v if not domain else 21, domain=domain,
                                   **{attr: wrong})
            assert len(outs) == max(1, len(schema.outputs))
            n += 1
    assert n >= 490   # 499 with the schema table of onnx 1.23


def test_random_inputs_and_attributes_never_raise():
    """Every operator version of the five families on random inputs (ranks 0 to 5; extents 0,
    small ints, variables, expressions, unknown; some omitted; small int64 tensors with
    elements that are negative, symbolic or unknown) and random attribute values (in and out
    of range): contradictions at most, never an exception (a fixed seed, 10 draws each)."""
    import random

    from onemodel.inference import UNKNOWN, Value
    from tests.infer.rules_check import infer_values

    rng = random.Random(1)
    extents = [0, 1, 2, 3, 4, 8, None, N, N + 1]

    def value(code):
        r = rng.choice([None, 0, 1, 2, 3, 4, 5])
        if r is None:
            return Value.tensor(code, None)
        shape = [rng.choice(extents) for _ in range(r)]
        data = None
        if code == I64 and r <= 1 and all(type(d) is int for d in shape):
            data = [rng.choice([-3, -1, 0, 1, 2, N, None]) for _ in range(shape[0] if r else 1)]
        return Value.tensor(code, shape, data)

    picks = {"INT": lambda: rng.choice([-2, -1, 0, 1, 2, 3]),
             "INTS": lambda: [rng.choice([-1, 0, 1, 2]) for _ in range(rng.randint(1, 3))],
             "FLOAT": lambda: rng.choice([0.0, 0.5, -1.0]),
             "FLOATS": lambda: [0.5] * rng.randint(1, 4),
             "STRING": lambda: rng.choice(["", "forward", "bidirectional", "SPARSE",
                                           "TO_FLOAT", "LOWER", "x"]),
             "STRINGS": lambda: ["a", "b"][:rng.randint(1, 2)]}
    n = 0
    for op, domain, v, schema, codes in _operator_versions():
        n_out = max(1, len(schema.outputs))
        for _ in range(10):
            ins = [value(rng.choice(c)) if rng.random() < 0.9 else None for c in codes]
            if ins and ins[0] is None:
                ins[0] = UNKNOWN
            attrs = {a: picks[spec.type]() for a, spec in schema.attributes.items()
                     if spec.type in picks and rng.random() < 0.4}
            outs, _ = infer_values(op, ins, n_out, opset=v if not domain else 21,
                                   domain=domain, **attrs)
            assert len(outs) == n_out
            n += 1
    assert n >= 1300
