"""Write docs/conformance-statement.md, the conformance statement of ONNX Part 1, Annex A
(Table A.1), from the code: the package version, the messages of the wire schema, the operator
definitions of the schema table (:mod:`onemodel.schemas`) and the kernels of the evaluator's
registry (:mod:`onemodel.evaluate.registry`) per domain, the codes of ``onemodel check``
(:data:`onemodel.validation.codes.CODES`), the resource limits (:mod:`onemodel.limits`, with
their :data:`~onemodel.limits.DESCRIPTIONS`), and the totals of the conformance run that
docs/make_conformance.py wrote into docs/conformance.md. What no code knows (the divergences,
the external data policy) is text here.

Run from the repository root (``make docs`` runs it)::

    .venv/bin/python docs/make_statement.py            # writes docs/conformance-statement.md
    .venv/bin/python docs/make_statement.py --check    # exit 1 if the file is out of date

tests/test_docs_statement.py checks that the committed file is this script's output.
"""

from __future__ import annotations

import argparse
import pathlib
import re
import sys
from typing import NamedTuple

ROOT = pathlib.Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "conformance-statement.md"
CONFORMANCE = ROOT / "docs" / "conformance.md"

#: The IR version whose Annex B the wire schema (onemodel/formats/onnx/schema.py) and the IR
#: records implement (Clause 14.1.2; the ``IR_VERSION`` of the onnx the schema table comes from,
#: which tests/test_docs_statement.py checks).
IR_VERSION = 14

#: The conditions of ONNX Part 1, Clause 10 (quoted) and the codes of ``onemodel check`` that
#: report them: ``(clause, condition, codes, how)``.
CLAUSE_10 = [
    ("10.2", "a graph that is not acyclic", ("OM114",), ""),
    ("10.2", "a node that consumes a value with no producer", ("OM112",), ""),
    ("10.2", "a value produced more than once within one graph", ("OM109",), ""),
    ("10.2", "a name that is empty", ("OM106",), "where a name is required"),
    ("10.2", "a node whose operator is not defined in any declared operator set",
     ("OM301", "OM304"),
     "OM301 for the domains of the schema table; an operator of another (custom) domain has no "
     "definition to check against: OM304, a warning (an error under `--strict`)"),
    ("10.3", "a node whose input types do not satisfy the type constraints of its operator "
     "definition", ("OM401", "OM403", "OM410"),
     "for every type the model states (initializer, graph input, value_info); with `--full`, "
     "also every intermediate value's type and shape from shape inference (OM410)"),
    ("10.4", "a model that uses a domain it does not declare", ("OM105",), ""),
    ("10.4", "a node whose operator is not present in the declared version of its domain",
     ("OM302",), "says which version introduced it"),
    ("10.4", "an attribute that is not defined for the operator", ("OM308",), ""),
    ("10.4", "a required attribute that is absent", ("OM310",), ""),
]

#: Items of Table A.1 no code states.
POLICY_EXTERNAL = (
    "[external-data.md](external-data.md): keys `location`, `offset`, `length`, `checksum` "
    "only, each once; SHA-1 checksum verified before use; location relative, no `..`, no "
    "absolute or drive path, resolved against the model file's directory (never the working "
    "directory); no symbolic link in any component, no file with more than one hard link, "
    "regular files only; directories walked by descriptor with `O_NOFOLLOW`, the file opened "
    "with `O_NOFOLLOW` and compared by `(st_dev, st_ino)` with what the check saw; sizes checked "
    "before use. Resolving outside the directory needs `allow_outside=True` / "
    "`--allow-external-outside` and is never the default. Remote models resolve relative to "
    "their URL with the same rules and never leave their host or bucket. `onemodel check` "
    "checks every reference by the same rules without reading the data (OM203, OM204); it "
    "verifies the checksums only under `--full` and otherwise says so (OM206).")

DIVERGENCES = (
    "Deprecated `AttributeProto.tp` is read and kept (it carries TYPE_PROTO attributes in "
    "practice). A model whose nodes are not topologically sorted (Clause 7.5) is accepted by "
    "the ONNX reader as written (`check` reports it: OM113); the OneModel reader sorts it "
    "(format section 3). Clause 10.3 is checked on the types a model states; an intermediate "
    "value without a declared type is checked by `--full` through shape inference (OM410), "
    "as far as the operators have inference rules (the others are listed, OM411). Annex C gap "
    "for Clause 6.3 (conversion), the rules onemodel states: a conversion to INT4, UINT4, "
    "INT2 or UINT2 rounds to nearest, ties to even (Clause 6.3.3), "
    "and a value out of range then keeps its low 4 (or 2) bits, read as two's complement for "
    "the signed types (the Cast definition's \"bits that cannot be stored are truncated\", as "
    "the onnx 1.23.2 test vectors expect): -9 gives INT4 7 and UINT4 7, 16 gives 0, 2.5 gives "
    "INT2 -2; NaN and infinities give 0 (integers wrap the same way). Conversions to "
    "FLOAT4E2M1, FLOAT6E2M3 and FLOAT6E3M2 (no infinity, no NaN) saturate to the largest finite "
    "value, infinities included, and NaN gives +max (the ONNX float4 definition; ml_dtypes "
    "gives -0). These are computed by onemodel (`onemodel/evaluate/kernels/cast.py`), never by "
    "an ml_dtypes out-of-range conversion, so they do not change with the ml_dtypes release "
    "(checked with 0.6.0 and 0.7.0); the float8 conversions (round to nearest even, the "
    "`saturate` tables of Cast) are tested against bit patterns written from the format "
    "definitions. A float64 converted to BFLOAT16 or a float8, float6 or float4 type is rounded "
    "once, from its own value (ml_dtypes and onnx.reference go through float32 and round twice: "
    "-431.99999999999994 to FLOAT8E4M3FN gives -416 here, -448 there). "
    "Nodes of a graph are evaluated in dependency order without concurrency.")

#: What the conformance run checks beyond its totals (tests/formats, tests/evaluate).
ROUND_TRIP = ("Every model and `.pb` file of the package reads and rewrites to the same "
              "octets, and every tensor equals `onnx.numpy_helper.to_array` bit for bit.")

VALIDATION_RESULTS = (
    "Validation: every conformance model of the package (node, simple, pytorch and light "
    "cases) checks with no finding at all (`tests/check/test_check_conformance_models.py`), "
    "and so does every model of `testdata/`, ONNX and converted to OneModel "
    "(`tests/check/test_check_data.py`); a conformance or test model of the package that "
    "`onnx.checker.check_model(full_check=True)` refuses gets an error from `onemodel check` "
    "too, or is listed with the reason it is valid "
    "(`tests/check/test_check_onnx_refusals.py`).")



def _domain_name(domain: str) -> str:
    return domain or "ai.onnx"


def _pow2(n: int) -> str | None:
    """``2^k`` or ``2^k - 1`` for large powers of two (and one less), else None."""
    if n >= 1 << 16:
        if n & (n - 1) == 0:
            return f"2^{n.bit_length() - 1}"
        if (n + 1) & n == 0:
            return f"2^{n.bit_length()} - 1"
    return None


def shown_value(value: int, unit: str) -> str:
    """A limit's value as the table shows it: bytes of at least 1 MiB in MiB or GiB when whole,
    large powers of two as ``2^k`` (or ``2^k - 1``), other values in decimal."""
    if unit == "bytes" and value >= 1 << 20:
        for size, name in ((1 << 30, "GiB"), (1 << 20, "MiB")):
            if value % size == 0:
                return f"{value // size} {name}"
    return _pow2(value) or str(value)


def _ranges(versions: list[int]) -> str:
    """``[1, 2, 3, 7]`` as ``1 to 3, 7``."""
    out, start = [], None
    for i, v in enumerate(versions):
        if start is None:
            start = v
        if i + 1 == len(versions) or versions[i + 1] != v + 1:
            out.append(str(v) if v == start else f"{start} to {v}")
            start = None
    return ", ".join(out)


class DomainSet(NamedTuple):
    """One domain of the schema table as the evaluator covers it."""

    domain: str        #: ``""`` for ai.onnx
    top: int           #: the greatest opset version its definitions have
    defined: int       #: operators the schema table defines
    with_kernel: int   #: operators with a built-in kernel at some version
    #: ``[(op_type, [opset versions])]``: the versions at which no kernel serves the
    #: definition in force (:func:`registry.lookup` finds none): refused by the evaluator
    refused: list


def operator_sets() -> list[DomainSet]:
    """Every domain of the schema table, with what the built-in kernels cover of it."""
    from onemodel import schemas
    from onemodel.evaluate import registry

    kernels = registry.operators()
    out = []
    for domain in schemas.domains():
        ops = schemas.operators(domain)
        top = max(v for op in ops for v in schemas.versions(op, domain))
        refused = []
        for op in ops:
            missing = [v for v in range(1, top + 1) if schemas.get(op, domain, v) is not None
                       and registry.lookup(domain, op, v, user=False) is None]
            if missing:
                refused.append((op, missing))
        with_kernel = sum(1 for op in ops if (domain, op) in kernels)
        out.append(DomainSet(domain, top, len(ops), with_kernel, refused))
    return out


class ConformanceRun:
    """The figures docs/conformance.md states (generated by docs/make_conformance.py): onnx
    version, totals, tolerance rows, unsupported node cases per operator, model cases.
    Raises ValueError when the file lacks one (another layout: regenerate both)."""

    def __init__(self, text: str):
        def need(pattern):
            m = re.search(pattern, text, re.M)
            if m is None:
                raise ValueError(f"docs/conformance.md has no line matching {pattern!r}")
            return m

        self.onnx_version = need(r"node test cases of onnx (\S+) ").group(1)
        t = need(r"^\| all \| (\d+) \| (\d+) \| (\d+) \| (\d+) \|$")
        self.total, self.passed, self.failed, self.unsupported = map(int, t.groups())
        self.tolerance = {}  # element type -> (outputs, bit-identical, max abs, rtol needed)
        section = text.split("## Tolerances", 1)[1].split("\n## ", 1)[0]
        for m in re.finditer(r"^\| (\w+) \| [^|]+ \| (\d+) \| (\d+|-) \| ([^|]+) \| ([^|]+) \|$",
                             section, re.M):
            self.tolerance[m.group(1)] = (int(m.group(2)), m.group(3), m.group(4).strip(),
                                          m.group(5).strip())
        per_op = text.split("## Per operator and opset", 1)[1].split("\n## ", 1)[0]
        self.unsupported_ops = {}  # op_type -> unsupported node cases
        for m in re.finditer(r"^\| ([\w.]+) \| (\w+) \| \d+ \| \d+ \| \d+ \| \d+ \| (\d+) \|$",
                             per_op, re.M):
            if int(m.group(3)):
                self.unsupported_ops[m.group(2)] = \
                    self.unsupported_ops.get(m.group(2), 0) + int(m.group(3))
        refused = text.split("## Operators without a kernel", 1)[1].split("\n## ", 1)[0]
        self.refused_ops = re.findall(r"^- \([\w.]+, (\w+), \d+\)", refused, re.M)
        self.models = []  # (kind, cases, passed, failed, unsupported)
        if "## Model cases" in text:
            section = text.split("## Model cases", 1)[1].split("\n## ", 1)[0]
            for m in re.finditer(r"^\| ([\w-]+) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \|$",
                                 section, re.M):
                self.models.append((m.group(1), *map(int, m.groups()[1:])))


def _tolerance_item(run: ConformanceRun) -> str:
    tol = run.tolerance
    harness = [e for e in ("float32", "float64", "float16") if e in tol]
    needed = ", ".join(f"{e} {tol[e][3]}" for e in harness + ["bfloat16"] if e in tol)
    narrow = [e for e in tol if re.match(r"float[864]_", e)]
    exact = [e for e in narrow if tol[e][0] and tol[e][1] == str(tol[e][0])]
    untested = [e for e in narrow if not tol[e][0]]
    inexact = [e for e in narrow if e not in exact and e not in untested]
    others = [e for e in tol if e not in narrow and e not in harness + ["bfloat16"]
              and not e.startswith("complex")]
    ints_exact = all(tol[e][1] == str(tol[e][0]) for e in others)
    text = (f"See the \"Tolerances (Clause 11.5)\" table of [conformance.md](conformance.md): "
            f"{'/'.join(harness)} within rtol 1e-3, atol 1e-7 (the harness's; the smallest "
            f"rtol each needed in the run: {needed}); bfloat16 within rtol 2^-6; "
            f"{', '.join(exact)} bit-identical on every test output")
    if inexact:
        text += f" ({', '.join(inexact)} not)"
    if untested:
        text += f"; {', '.join(untested)}: no node test output"
    text += (" (the casts into the narrow float types and into int4/int2 are judged against "
             "values computed from the format definitions, not against the vectors onnx "
             "generates with the installed ml_dtypes: see conformance.md); ")
    text += ("integer, bool and string types exact" if ints_exact
             else "integer, bool and string types compared exactly (not all outputs identical)")
    return text + (". Non-deterministic operators (Bernoulli, RandomUniform/Normal(Like), "
                   "Multinomial, Dropout in training mode) are checked by shape, element type "
                   "and value range (Clause 11.6).")


def _results_item(run: ConformanceRun) -> str:
    node_refused = sorted(run.unsupported_ops)
    text = (f"onnx {run.onnx_version} node test cases: {run.passed} of {run.total} pass "
            f"({run.passed / run.total:.1%})")
    if run.failed:
        text += f", {run.failed} fail"
    if run.unsupported:
        text += (f"; the {run.unsupported} others are "
                 f"{', '.join(node_refused)}, refused as unsupported")
    text += "."
    if run.models:
        kinds = ", ".join(f"{k} {p}/{n}" for k, n, p, _f, _u in run.models)
        text += f" Model cases: {kinds}"
        model_refused = sorted(set(run.refused_ops) - set(node_refused))
        if any(u for *_, u in run.models) and model_refused:
            text += f" (the cases refused as unsupported use {', '.join(model_refused)})"
        text += "."
    return f"{text} {ROUND_TRIP} {VALIDATION_RESULTS}"


def _families() -> dict[str, int]:
    from onemodel.validation.codes import CODES

    out: dict[str, int] = {}
    for code in CODES:
        out[code[:3]] = out.get(code[:3], 0) + 1
    return out


def _classes_item(onnx_version: str) -> str:
    n = _families()
    return (
        "**Producer** (writes models per Clauses 5, 7, 12), **evaluating consumer** (Clause 11, "
        "for the operators listed in [conformance.md](conformance.md)) and **validating "
        "consumer** (Clause 10): `onemodel check` / `onemodel.check()` reports every finding of "
        "a model in one run (Clause 10.5), each with a code, a severity, the field path, the "
        "byte offset where there is one, and the clause: the structural checks of Clause 10.2 "
        f"with those of Clauses 5, 7 and 8.4 ({n.get('OM1', 0)} codes OM1xx), tensors and "
        f"external data as the readers check them (Clauses 6.2, 13, 15; {n.get('OM2', 0)} codes "
        f"OM2xx), the operator set checks of Clause 10.4 against the definitions of onnx "
        f"{onnx_version} ({n.get('OM3', 0)} codes OM3xx) and the type checks of Clause 10.3 on "
        f"the types the model states and, with `--full`, those shape inference gives "
        f"(Clause 9.4; {n.get('OM4', 0)} codes OM4xx); "
        "[below](#validation-clause-10): each condition of Clause 10 and its codes, then every "
        "code. `--full` also verifies the SHA-1 checksums of external data files (reading them; "
        "a mismatch is OM203) and checks the type and shape of every intermediate value by "
        "shape inference (Clause 9): each contradiction between what the model declares and "
        "what its operators entail is OM410, operators without an inference rule are listed "
        "(OM411, info), a node left less known at a limit of inference (MAX_EXPR_SIZE, "
        "MAX_FUNCTION_SIGNATURES) is OM413 (info). Loading checks as it reads and stops at the "
        "first problem: the wire encoding (Clause 12), tensor contents and sparse tensors "
        "(Annex B.2.18); the OneModel reader applies the structural checks of Clause 10.2.")


def _versions(top: int) -> str:
    return "1" if top == 1 else f"1 to {top}"


def _opsets_item(sets, onnx_version: str) -> str:
    from onemodel.evaluate import registry

    kernels = registry.operators()
    ev = []
    for ds in sets:
        shown = f"`{_domain_name(ds.domain)}` {_versions(ds.top)}"
        if ds.with_kernel <= 3:
            names = sorted(op for d, op in kernels if d == ds.domain)
            ev.append(f"{shown} ({', '.join(names)})")
        else:
            ev.append(f"{shown} ({ds.with_kernel} operators)")
    return (f"Validation: every version of the {len(sets)} domains of the schema table (the "
            f"definitions of onnx {onnx_version}; table [Operator sets](#operator-sets)); an "
            "operator of any other domain is checked against its declaration when a user declared "
            "it (`onemodel.operators.Operator`, docs/operators.md), else reported as not "
            "checked (OM304). Evaluator: "
            f"{', '.join(ev)}. A kernel is attached to the definition where its behaviour "
            "begins and serves it and every later definition until the next kernel of the "
            "operator (Clauses 14.3, 14.4); `tests/operators/served.tsv` lists the kernel and "
            "the inference rule serving each definition. conformance.md lists the versions "
            "each operator's test cases use. Reading and writing: any domain and version.")


def _unsupported_item(sets) -> str:
    parts = []
    from onemodel import schemas
    from onemodel.operators.families import UNIMPLEMENTED, UNIMPLEMENTED_VERSIONS

    for domain, top, _n, _k, refused in sets:
        for op, missing in refused:
            defined = [v for v in range(1, top + 1) if schemas.get(op, domain, v) is not None]
            why = UNIMPLEMENTED.get((domain, op)) or UNIMPLEMENTED_VERSIONS.get(
                (domain, op, missing[0]), "no kernel")
            opsets = "opset" if len(missing) == 1 else "opsets"
            if missing == defined:
                parts.append(f"`{_domain_name(domain)}` {op} ({opsets} {_ranges(missing)}: "
                             f"{why})")
            else:
                parts.append(f"`{_domain_name(domain)}` {op} at {opsets} {_ranges(missing)} "
                             f"({why} for the definitions in force there)")
    return ("; ".join(parts) + "; any operator of a custom domain that no kernel "
            "(`onemodel.evaluate.register_kernel`, a declared `onemodel.operators.Operator`) "
            "or model-local function serves. The "
            "evaluator lists every unsupported "
            "`(domain, op_type, opset)` of a model before computing anything and refuses it "
            "(Clause 4.4). Per-operator results: [conformance.md](conformance.md).")


def _ir_item() -> str:
    from onemodel.formats.container.schema import MIN_IR_VERSION
    from onemodel.formats.onnx.schema import MESSAGES

    fields = sum(len(m.fields) for m in MESSAGES.values())
    return (f"reads and writes every IR version up to {IR_VERSION} (Annex B as of IR "
            f"{IR_VERSION}: all {len(MESSAGES) + 2} of its definitions, {len(MESSAGES)} messages "
            f"and the enumerations `Version` and `OperatorStatus`, with all {fields} fields; "
            "unknown fields kept); the OneModel container requires `ir_version >= "
            f"{MIN_IR_VERSION}` in its plain v1 view")


def _limits_rows() -> list[str]:
    from onemodel import errors, limits
    from onemodel.formats.protobuf import MAX_TAG

    rows = ["| name | value | what it bounds | refused as |", "|---|---|---|---|"]
    for name, (what, unit, kind) in limits.DESCRIPTIONS.items():
        rows.append(f"| `{name}` | {shown_value(getattr(limits, name), unit)} | {what} | "
                    f"{kind} |")
    varint = -(-64 // 7)  # octets of a 64-bit value, 7 bits each (Clause 12.2.2)
    rows.append(f"| varint width | {varint} octets, value < 2^64 | every variable-length integer "
                f"of the ONNX wire encoding (Clause 12.2.2); a field number above "
                f"{_pow2(MAX_TAG)} too | Malformed |")
    rows.append(f"| quoted values in messages | {errors.QUOTE_LIMIT} characters | names, "
                "locations and strings quoted in an error line (`errors.quote`: first and last "
                f"{errors.QUOTE_LIMIT // 2} and the full length); a line keeps "
                f"{errors.MESSAGE_LIMIT} characters of its message and {errors.PART_LIMIT} of "
                "its path and of its source each, so it stays under 4 KiB | - |")
    return rows


def _codes_rows() -> list[str]:
    from onemodel.validation.codes import CODES

    rows = ["| Clause 10 condition | codes | how |", "|---|---|---|"]
    for clause, condition, codes, how in CLAUSE_10:
        for c in codes:
            CODES[c]  # noqa: B018 (KeyError for a code the registry lacks)
        rows.append(f"| {clause}: {condition} | {', '.join(codes)} | {how or '-'} |")
    rows += ["", "Every code (examples of their messages: [check.md](check.md)):", "",
             "| code | severity | what it checks | clause |", "|---|---|---|---|"]
    rows += [f"| {c.code} | {c.severity} | {c.summary} | {c.clause} |" for c in CODES.values()]
    return rows


def render(conformance_text: str) -> str:
    """The text of docs/conformance-statement.md; ``conformance_text`` is docs/conformance.md
    (its totals are quoted). Raises ValueError when that text lacks a figure it needs."""
    import onemodel
    from onemodel import schemas

    run = ConformanceRun(conformance_text)
    sets = operator_sets()
    onnx_version = schemas.onnx_version()
    items = [
        ("Identity and version of the implementation",
         f"onemodel {onemodel.__version__} (Python package `onemodel`)"),
        ("Conformance classes claimed (Clause 4)", _classes_item(onnx_version)),
        ("Conformance profiles claimed", "none (Part 1 defines none yet)"),
        ("IR versions supported", _ir_item()),
        ("Operator set versions supported, per domain", _opsets_item(sets, onnx_version)),
        ("Operators not supported, per operator set", _unsupported_item(sets)),
        ("Numerical tolerance achieved, per element type", _tolerance_item(run)),
        ("Result of the ONNX 1-3 test package", _results_item(run)),
        ("Known divergences from this document", DIVERGENCES),
        ("External data handling policy", POLICY_EXTERNAL),
        ("Documented resource limits (Clause 15)",
         "The table [below](#resource-limits) (`onemodel/limits.py`). A model past a limit is "
         "refused with a one-line error of a stated kind, never a crash, `RecursionError` or "
         "`MemoryError`; `onemodel check` reports one as a finding where it can (OM119, "
         "OM202)."),
    ]
    lines = ["# Conformance statement (ONNX Part 1, Annex A)", "",
             "<!-- generated by `.venv/bin/python docs/make_statement.py` (`make docs`); "
             "do not edit -->", "",
             "| Item (Table A.1) | Statement |", "|---|---|"]
    lines += [f"| {item} | {text} |" for item, text in items]
    lines += ["", "## Operator sets", "",
              f"The definitions of the schema table (onnx {onnx_version}, "
              "`onemodel/schemas`) and the built-in kernels of the evaluator "
              "(`onemodel/evaluate/registry.py`).", "",
              "| domain | opset versions | operators defined | with a kernel |",
              "|---|---|---:|---:|"]
    lines += [f"| `{_domain_name(d)}` | {_versions(top)} | {n} | {k} |"
              for d, top, n, k, *_ in sets]
    lines += ["", "## Validation (Clause 10)", ""] + _codes_rows()
    lines += ["", "## Resource limits", ""] + _limits_rows()
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    """Write docs/conformance-statement.md (``argv``: command-line words, default
    ``sys.argv[1:]``); with ``--check`` compare instead: 0 when up to date, 1 when not."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="do not write; exit 1 when docs/conformance-statement.md differs")
    args = parser.parse_args(argv)
    text = render(CONFORMANCE.read_text())
    if args.check:
        same = OUT.is_file() and OUT.read_text() == text
        print("up to date" if same else f"{OUT} is out of date")
        return 0 if same else 1
    OUT.write_text(text)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
