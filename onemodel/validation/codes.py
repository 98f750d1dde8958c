"""The codes of ``onemodel check``: each code's severity, clause and one-line description.

One registry for everything that names a code: the checks take their severity and clause from
it (:func:`finding`), ``--select``/``--ignore`` match against it and ``docs/check.md`` is
generated from it (docs/make_check.py). Families: ``OM1xx`` structure (ONNX
Part 1, Clauses 5, 7, 8.4, 10.2), ``OM2xx`` tensors and external data as the readers check
them (Clauses 6.2, 13, 15), ``OM3xx`` operators against their definitions (Clause 10.4),
``OM4xx`` types (Clause 10.3: ``OM40x`` the types the model states, ``OM41x`` those shape
inference gives under ``--full``, Clause 9.4). Codes are stable: one is never reused for
another check (``OM001``, "--full is not available", is retired).
"""

from __future__ import annotations

from dataclasses import dataclass

from .finding import Finding

P1 = "ONNX Part 1, "


@dataclass(frozen=True)
class Code:
    """A code: ``severity`` (``error``/``warning``/``info``), ``clause`` (where the rule is
    stated), ``summary`` (what it checks, one line) and ``example`` (a message it gives)."""

    code: str
    severity: str
    clause: str
    summary: str
    example: str


_TABLE = [
    ("OM101", "error", P1 + "Clause 5.3.1",
     "ir_version is present and positive",
     "the model has no ir_version (mandatory)"),
    ("OM102", "error", P1 + "Clause 5.3.1",
     "the model has a graph",
     "the model has no graph (mandatory)"),
    ("OM103", "error", P1 + "Clause 5.3.1",
     "the model imports at least one operator set",
     "the model imports no operator set (opset_import is mandatory)"),
    ("OM104", "error", P1 + "Clauses 5.3.2, 14.3",
     "each domain is imported at one version (by the model; by each function): a node binds "
     "to its operator's definition by the version imported",
     "domain 'ai.onnx' is imported at version 18 and at version 17 (first at "
     "opset_import[0].domain): which definition its operators bind to is ambiguous"),
    ("OM105", "error", P1 + "Clauses 5.3.2, 10.4",
     "every domain a node uses is imported",
     "domain 'com.x' of node 'Foo' is not imported by opsets"),
    ("OM106", "error", P1 + "Clauses 5.4.1, 10.2",
     "names are non-empty where required (operator, graph input and output, initializer, "
     "value_info, attribute, function)",
     "the node has an empty op_type"),
    ("OM107", "error", P1 + "Clause 7.1",
     "every graph has a name",
     "the graph has no name"),
    ("OM108", "error", P1 + "Clause 7.1",
     "every input and output of the top-level graph declares its type",
     "graph input 'x' declares no type"),
    ("OM109", "error", P1 + "Clauses 5.4.2, 7.5, 10.2",
     "one definition per name in a graph (SSA)",
     "name 'y' is defined twice in one graph"),
    ("OM110", "error", P1 + "Clauses 7.2, 14",
     "below IR version 4, every initializer is also a graph input",
     "initializer 'w' is not a graph input (IR version 3 requires it)"),
    ("OM111", "warning", P1 + "Clause 7.2",
     "from IR version 4, a subgraph's input is not also one of its initializers",
     "name 'c' is both an input and an initializer of a subgraph"),
    ("OM112", "error", P1 + "Clauses 5.4.3, 7.5, 10.2",
     "every name a node or graph output uses is defined in the graph or an enclosing one",
     "input 'nope' of node 'Transpose' named 'tr' is not defined in this graph or an "
     "enclosing one"),
    ("OM113", "error", P1 + "Clause 7.5",
     "nodes are in topological order (reported; the rest is still checked)",
     "node 'Relu' comes before node 'Add' which produces its input (not topologically sorted)"),
    ("OM114", "error", P1 + "Clauses 7.5, 10.2",
     "the nodes of a graph form no cycle",
     "the nodes form a cycle through node 'Add' (no dependency order exists)"),
    ("OM115", "error", P1 + "Clause 5.5",
     "metadata property keys are distinct",
     "metadata key 'author' appears twice (first at metadata_props[0])"),
    ("OM116", "error", P1 + "Clause 8.4",
     "model-local functions are unique by (domain, name, overload)",
     "function ('local', 'f', '') is defined twice (first at functions[0])"),
    ("OM117", "error", P1 + "Clause 8.4",
     "ref_attr_name (a reference to a function's attribute) appears only inside a function",
     "attribute 'alpha' refers to function attribute 'a' outside a function"),
    ("OM118", "error", "ONNX Part 1, Annex B.2.10",
     "training_info bindings name an initializer of the main graph and an output of their graph",
     "update_binding key 'w' is not an initializer of the main graph"),
    ("OM119", "error", P1 + "Clause 15.4",
     "graphs nest no deeper than the documented limit (MAX_MODEL_NESTING)",
     "graphs nested more than 64 deep (MAX_MODEL_NESTING)"),
    ("OM120", "warning", P1 + "Clause 5.3.2",
     "a domain imported again at the same version (by the model; by a function) is redundant",
     "domain 'ai.onnx' is imported twice at version 17 (first at opset_import[0].domain): the "
     "repetition is redundant"),
    ("OM121", "error", P1 + "Clause 5.3.2",
     "each operator set import states a version that is a positive integer (by the model; by "
     "each function)",
     "domain 'ai.onnx' is imported at version 0; a version is a positive integer"),
    ("OM122", "error", P1 + "Clauses 8.4, 15.4",
     "no model-local function calls itself, directly or through other functions (its "
     "expansion would not end: inference does not expand it, the evaluator refuses it)",
     "function local.F calls itself through local.G"),
    ("OM201", "error", P1 + "Clauses 6.2, 13.1; Annex B.2.16",
     "a tensor's contents match its dims and element type; one storage form; dims non-negative",
     "raw_data holds 12 bytes; dims [4] of FLOAT need 16"),
    ("OM202", "error", P1 + "Clauses 6.2, 15.4",
     "a tensor's element type is known and its element count within the documented limit",
     "element type 99 is not in Table 5"),
    ("OM203", "error", P1 + "Clauses 13.2, 13.3, 15.3",
     "an external data reference is well formed, stays in the model's directory and matches "
     "the file (offset, length, dims, checksum)",
     "tensor 'w', external data location 'w.bin': length 8 does not match dims [4] of FLOAT "
     "(16 bytes)"),
    ("OM204", "error", P1 + "Clause 13.2",
     "an external data file can be read",
     "tensor 'w', external data location 'w.bin': cannot open 'w.bin': No such file or directory"),
    ("OM205", "error", "OneModel format v1, section 3.1",
     "the OneModel reader accepts every object of the manifest (every tensor whose byte length "
     "or extension breaks a tensor rule; otherwise only the first refusal)",
     "byte length 12 does not match dims and dtype (16 bytes)"),
    ("OM206", "info", P1 + "Clause 13.3",
     "an external data file's SHA-1 checksums are verified only by --full (check reads the "
     "structure only; one finding per data file)",
     "external data location 'w.bin': the SHA-1 checksum of 1 tensor was not verified (check "
     "reads structure only; --full reads the file and verifies them)"),
    ("OM207", "error", "docs/format-extension.md section 9 (content digests)",
     "--full: a OneModel file's tensors (and the model) match the content digests its manifest "
     "records (without --full nothing is hashed)",
     "tensor 'w': bytes [1088, 132160) do not match its recorded digest sha256:9f2c... (they "
     "hash to sha256:41d0...)"),
    ("OM208", "warning", P1 + "Clause 6.3.4 (Table 7)",
     "a narrow element type's int32_data (INT4, UINT4, INT2, UINT2, FLOAT4E2M1, FLOAT6) sets "
     "no bit outside its elements' bits (values sign-extended or out of range are read by "
     "their low bits; onemodel writes them canonical)",
     "int32_data[0] of INT4 is -15 (0xfffffff1): bits outside 0 to 7 are set; read as the "
     "octet 0xf1"),
    # -- operator set checks against onemodel.schemas (onemodel/validation/operators.py) --
    ("OM301", "error", P1 + "Clauses 10.2, 10.4",
     "the operator is defined in its domain (a domain with schemas: ai.onnx, ai.onnx.ml, "
     "ai.onnx.preview, ai.onnx.preview.training), or by a model-local function",
     "operator 'Foo' is not defined in ai.onnx (no version defines it)"),
    ("OM302", "error", P1 + "Clauses 10.4, 14.3",
     "the operator is defined at the imported version of its domain (says which version "
     "introduced it)",
     "operator 'Gelu' is not defined in ai.onnx version 19 (introduced in version 20)"),
    ("OM303", "warning", P1 + "Clause 14.5",
     "the operator is not deprecated at the imported version (a consumer still evaluates it)",
     "operator 'Upsample' is deprecated in ai.onnx version 10 (definition of version 10)"),
    ("OM304", "warning", P1 + "Clause 10.4",
     "an operator of a domain with no schema (custom) is not checked; once per operator and "
     "domain (an error under --strict)",
     "operator 'FusedMatMul' of domain 'com.microsoft' has no schema: not checked"),
    ("OM305", "error", P1 + "Clauses 7.3.1, 7.3.2",
     "a node's input count is within the definition's (optional and variadic inputs counted)",
     "node 'Add' (Add-14) has 3 inputs; the definition takes exactly 2"),
    ("OM306", "error", P1 + "Clauses 7.3.1, 7.3.2",
     "a node's output count is within the definition's (optional and variadic outputs counted)",
     "node 'Relu' (Relu-14) has 2 outputs; the definition takes exactly 1"),
    ("OM307", "error", P1 + "Clause 7.3.3",
     "an input or output is left unsupplied (empty name) only where the definition makes it "
     "optional",
     "input 1 ('B') of node 'Add' (Add-14) is empty, but only an optional one may be left "
     "unsupplied"),
    ("OM308", "error", P1 + "Clauses 7.3.1, 10.4",
     "every attribute of a node is defined by the operator",
     "node 'Relu' (Relu-14) has no attribute 'alpha'"),
    ("OM309", "error", P1 + "Clauses 7.3.1, 7.4",
     "an attribute's type (AttributeProto.type) is the one the definition gives",
     "attribute 'axis' of node 'Concat' (Concat-13) is FLOAT; the definition's type is INT"),
    ("OM310", "error", P1 + "Clause 10.4",
     "every required attribute of the operator is present",
     "node 'Concat' (Concat-13) lacks required attribute 'axis'"),
    ("OM311", "error", P1 + "Clause 7.4",
     "an attribute name is unique within its node",
     "attribute 'axis' of node 'Concat' (Concat-13) is given twice (first as attribute 0)"),
    # -- type checks without shape inference (onemodel/validation/types.py) --
    ("OM401", "error", P1 + "Clauses 7.3.1, 10.3",
     "a node input whose type the model states (initializer, graph input, value_info) is one "
     "its formal's type constraint allows",
     "input 'x' of node 'Sqrt' (Sqrt-13) is declared tensor(int64) (by a graph input), which T "
     "of 'X' does not allow (tensor(bfloat16), tensor(double), tensor(float), tensor(float16))"),
    ("OM402", "error", P1 + "Clauses 7.3.1, 10.3",
     "a node output whose type the model states (value_info, graph output) is one its "
     "formal's type constraint allows",
     "output 'y' of node 'Shape' (Shape-15) is declared tensor(float) (by a graph output), "
     "which T1 of 'shape' does not allow (tensor(int64))"),
    ("OM403", "error", P1 + "Clauses 7.3.1, 10.3",
     "a type parameter of a node stands for one type (the stated types of its inputs and "
     "outputs agree; not across a heterogeneous variadic parameter)",
     "type parameter T of node 'Add' (Add-14) is tensor(float) for input 'x' but "
     "tensor(double) for input 'w' (declared by its initializer)"),
    ("OM404", "error", P1 + "Clauses 7.1, 7.2",
     "a declared type (graph input or output, value_info) agrees with the initializer of the "
     "same name: element type, rank, fixed extents",
     "value_info 'w' is declared of element type int64; its initializer is float [2]"),
    # -- shape inference under --full (onemodel/validation/inferred.py) --
    ("OM405", "warning", P1 + "Clauses 6.5.1, 6.5.2",
     "a declared extent that is neither a non-negative integer nor a dimension variable (a "
     "dim_value of -1; a dim_param that is no name, such as '?') is read as unknown",
     "a graph input 'x' declares [-1,3,?,?]: the extent -1 (axis 0) and the dim_param '?' "
     "(axes 2 and 3) are read as unknown, each '?' its own extent"),
    ("OM410", "error", P1 + "Clauses 9.4, 10.4",
     "--full: the type and shape shape inference gives each value agree with what the model "
     "declares (graph input or output, value_info: element type, rank, extents) and with "
     "what each operator requires of its inputs (equal extents, axes in range, ranks)",
     "'y' is declared tensor(float)[2,5] but inferred tensor(float)[2,3] (axis 1)"),
    ("OM411", "info", P1 + "Clause 9.4",
     "--full: operators without an inference rule, listed once (their outputs' shapes are "
     "unknown, what depends on them is checked less)",
     "no inference rule for 1 operator (com.example Foo-1): their outputs' shapes are "
     "unknown, what depends on them is checked less"),
    ("OM412", "warning", P1 + "Clauses 9.4, 12.2",
     "--full: every extent shape inference gives a node output fits a dim_value (an int64): "
     "one of 2^63 or more cannot be written, so onemodel infer writes it as unknown",
     "output 'y' has extent 1208925819614629174706176 at axis 0, above 2^63 - 1: no "
     "dim_value (an int64) holds it, so a written type gives it as unknown (onemodel infer)"),
    ("OM413", "info", P1 + "Clauses 9.3, 15.4",
     "--full: a node whose outputs shape inference leaves less known at a documented limit "
     "(an extent or element past MAX_EXPR_SIZE, MAX_DATA_EXPR_SIZE or MAX_EXPR_INTEGER, a "
     "function call not expanded: recursive, past MAX_FUNCTION_SIGNATURES or MAX_EVAL_DEPTH)",
     "Mul: an extent or element past a bound of inference is unknown (MAX_EXPR_SIZE: 64 "
     "atoms; MAX_DATA_EXPR_SIZE: 4096 atoms in one tensor; MAX_EXPR_INTEGER: 2^256 - 1)"),
]

#: ``{code: Code}``, in code order.
CODES: dict[str, Code] = {c[0]: Code(*c) for c in _TABLE}


def finding(code: str, message: str, path: str | None = None,
            offset: int | None = None) -> Finding:
    """A :class:`Finding` of ``code`` with the code's severity and clause. Raises KeyError for
    a code not in :data:`CODES`."""
    c = CODES[code]
    return Finding(code, c.severity, message, path, offset, c.clause)


def matches(code: str, patterns) -> bool:
    """Whether ``code`` is one of ``patterns``: a whole code (``OM101``) or a prefix
    (``OM1``: every structure code; ``OM``: all)."""
    return any(code.startswith(p.strip().upper()) for p in patterns if p.strip())
