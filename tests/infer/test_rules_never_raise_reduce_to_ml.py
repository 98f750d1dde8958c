"""Inference rules given wrong or random attributes and inputs never raise: every operator
version of the reduce, attention, rnn, random, signal, text, ml_linear, ml_trees and ml_features
families, and LRN (norm) and Col2Im (conv), gives contradictions at most."""

from onnx import TensorProto as T

from onemodel.inference import Expr

I64 = T.INT64
N = Expr.var("N")

#: the families whose every operator is put through these tests
FAMILIES_D = ("reduce", "attention", "rnn", "random", "signal", "text", "ml_linear", "ml_trees",
              "ml_features")
#: operators of other families put through them too: family -> op_types
OPERATORS_D = {"norm": ("LRN",), "conv": ("Col2Im",)}


def _operator_versions():
    """(op, domain, version, schema, allowed element type codes per input) of every operator
    version of :data:`FAMILIES_D` and :data:`OPERATORS_D`."""
    import onnx

    from onemodel.schemas import get as get_schema
    from tests.infer.rules_check import family_keys

    for family in FAMILIES_D + tuple(OPERATORS_D):
        for (domain, op), versions in family_keys(family).items():
            if family in OPERATORS_D and op not in OPERATORS_D[family]:
                continue
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

