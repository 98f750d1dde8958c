"""Every resource limit of onemodel, in one place (ONNX Part 1, Clause 15.4; OneModel format, 3.1).

A model that exceeds a limit is refused with :class:`~onemodel.errors.UnsupportedError` (or
Malformed where the format itself states the bound), never with a crash, a ``RecursionError`` or
a ``MemoryError``. The conformance statement (docs/conformance-statement.md) lists them, with the
descriptions of :data:`DESCRIPTIONS`.
"""

from __future__ import annotations

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB

#: Largest OneModel manifest read, in bytes (OneModel format 1.2; the same as the C# reader).
MAX_MANIFEST_BYTES = 512 * MiB

#: Deepest JSON nesting accepted in a OneModel manifest, in JSON levels (OneModel format 1.2).
MAX_JSON_DEPTH = 1024

#: Graphs and types open at once in a OneModel manifest (OneModel format 3.1). A graph inside a
#: node attribute counts one level, a type inside a graph or a type one more.
MAX_MODEL_NESTING = 64

#: Deepest nesting of embedded protobuf messages in an ONNX file (Clause 12). The same bound as the
#: protobuf libraries' default recursion limit, so every file they read, we read.
MAX_MESSAGE_DEPTH = 100

#: Element count of one tensor must stay below this (OneModel format 2.5, 3.1).
MAX_ELEMENT_COUNT = 1 << 60

#: Largest tensor in a OneModel file, in bytes (OneModel format 2.5).
MAX_CONTAINER_TENSOR_BYTES = (1 << 31) - 1

#: Largest value of any u64 header field of a OneModel file (OneModel format 1.1).
MAX_HEADER_U64 = (1 << 63) - 1

#: Files at least this large are memory-mapped; smaller ones are read into memory (OneModel 5).
MMAP_THRESHOLD = 1 * MiB

#: A serialized protobuf message larger than this cannot be read by protobuf-based tools; writing
#: an inline ONNX file past it warns (Clause 12.5, editorial note).
PROTOBUF_MESSAGE_LIMIT = 2 * GiB

#: Largest output accepted when decompressing a .zst file whose frame does not state its size,
#: and the cap applied to any declared size: a decompression bomb is refused past it.
MAX_DECOMPRESSED_BYTES = 64 * GiB

#: Largest compression ratio of a .zst file (decompressed bytes per byte of the file, once past
#: 16 MiB): a frame declaring more is refused before decompressing, and output is counted against
#: it, so a decompression bomb is refused before it fills the disk. ``open_source(max_ratio=)``.
MAX_COMPRESSION_RATIO = 1000

#: Largest gap of zeros a writer writes out on a destination that cannot leave a hole (an
#: upload, bytes in memory); a larger gap there is refused. Local files leave gaps as holes.
MAX_WRITTEN_GAP = 64 * MiB

#: Alignment of every tensor in a OneModel data region, in bytes (OneModel format 1.3).
CONTAINER_ALIGNMENT = 64

#: Default alignment of tensor offsets in external data files, in bytes (Clause 13.2: a page).
EXTERNAL_DATA_ALIGNMENT = 4096

#: Largest alignment a writer accepts for the offsets of tensors in an external data file or a
#: safetensors file, in bytes (every tensor may be preceded by that much padding, so a larger
#: value only wastes disk).
MAX_EXTERNAL_DATA_ALIGNMENT = 1 << 20


#: Deepest nesting the evaluator follows: subgraphs (If, Loop, Scan bodies) inside subgraphs, and
#: model-local function calls inside function bodies, counted together (ONNX Part 1, Clause 8.4).
MAX_EVAL_DEPTH = 64

#: Most axes of an array the evaluator makes (numpy's own bound, ``numpy.ndarray``): an input
#: of a greater rank is not generated (``run --random``), a node that would make one fails.
MAX_EVAL_RANK = 64

#: Most nodes the evaluator plans from model-local function bodies, every call expanded (a call
#: counts the nodes of the body, the calls in it expanded, subgraphs included; the main graph's
#: own nodes do not count): 31 functions that each call the previous one twice would plan
#: 3 * 2^30 steps (Clause 15.4). At the limit, planning takes about 2 s and 100 MB.
MAX_EXPANDED_NODES = 1 << 15

#: Largest symbolic extent shape inference keeps, in atoms: each variable of each monomial one,
#: each floor, ceil or mod one plus its operands' atoms (so it bounds the terms and the degree
#: of an expression, ONNX Part 1, Clauses 9.3, 15.4). A product whose expansion would hold more
#: terms, and any larger result, is an unknown extent (``check --full`` reports it, OM413).
MAX_EXPR_SIZE = 64

#: Most atoms (as MAX_EXPR_SIZE counts them) of all the symbolic elements of one small integer
#: tensor inference follows (data propagation) together; past it, its elements are unknown (its
#: shape is kept), so a node costs at most this much more than its shape (Clause 15.4).
MAX_DATA_EXPR_SIZE = 4096

#: Largest magnitude of an integer in a symbolic extent (a coefficient, the constant) or of an
#: int extent shape inference computes: 256 bits. A larger one is an unknown extent. (Extents
#: from 2^63 up to it are kept exactly, though no dim_value records them: OM412.)
MAX_EXPR_INTEGER = (1 << 256) - 1

#: Distinct input types (and attribute values) a model-local function is inferred for, through
#: its body; the outputs of a call with others are unknown (``check --full`` reports it, OM413).
#: With each function inferred once per distinct input types, inference takes time linear in
#: the model's size (Clauses 8.4, 9, 15.4).
MAX_FUNCTION_SIGNATURES = 64


#: Bytes of the first model's intermediate values ``verify --bisect`` keeps in memory; the rest
#: are written to a temporary directory (removed when it ends) and mapped back when compared.
MAX_BISECT_MEMORY = 256 * MiB


#: Elements of one initializer ``onemodel view`` reads for its statistics (min, max, mean, NaN
#: and Inf counts). A larger tensor is sampled: this many elements in 64 evenly spaced runs of
#: consecutive elements, each run read from its own byte range, so a big tensor is never read
#: whole (the page says the statistics are sampled).
VIEW_STATS_ELEMENTS = 1 << 20


#: Seconds one model's task of ``onemodel scan`` may run (in a pool of local processes or on a
#: Dask worker): past it the process running it is killed and replaced, and the model's row is a
#: ``Limit`` failure; the scan goes on (docs/scan.md, "Limits").
MAX_SCAN_SECONDS = 600

#: Bytes of heap (the data segment: ``RLIMIT_DATA``, which counts the heap and anonymous
#: mappings, not the file mappings models are read through) one model's task of ``onemodel
#: scan`` may use: past it the allocation fails and the model's row is a ``Limit`` failure.
MAX_SCAN_MEMORY = 4 * GiB


#: What each limit bounds and how a model past it is refused, in the order of the resource
#: limits table of the conformance statement (Annex A; docs/make_statement.py renders that table
#: from here, so this is the one description of each): ``{name: (what it bounds, unit, refused
#: as)}``. ``unit`` says how the value is shown (``"bytes"``: KiB, MiB, GiB; ``"count"``: a
#: number); ``refused as`` is the error kind of :mod:`onemodel.errors` a model past the limit
#: gets, ``"-"`` for a setting that refuses nothing.
DESCRIPTIONS: dict[str, tuple[str, str, str]] = {
    "MAX_MESSAGE_DEPTH": ("nesting of protobuf messages in an ONNX file (protobuf's own default)",
                          "count", "Malformed"),
    "MAX_ELEMENT_COUNT": ("elements of one tensor (an element count of 2^63 or more is "
                          "InvalidModel)", "count", "Unsupported"),
    "MAX_MANIFEST_BYTES": ("a OneModel manifest", "bytes", "Unsupported"),
    "MAX_JSON_DEPTH": ("JSON nesting of a OneModel manifest, checked before parsing", "count",
                       "Unsupported"),
    "MAX_MODEL_NESTING": ("graphs and types open at once in a OneModel manifest; graphs nested "
                          "in one another where the graph rules apply (convert, evaluation; "
                          "`check` reports OM119), and in a model built in Python before it is "
                          "saved, digested or inferred", "count", "Unsupported"),
    "MAX_CONTAINER_TENSOR_BYTES": ("one tensor in a OneModel file", "bytes", "Unsupported"),
    "MAX_HEADER_U64": ("every u64 field of the OneModel header", "count", "Malformed"),
    "MAX_DECOMPRESSED_BYTES": ("output of a `.zst` file (declared or counted while "
                               "decompressing)", "bytes", "Unsupported"),
    "MAX_COMPRESSION_RATIO": ("decompressed bytes per byte of a `.zst` file past its first "
                              "16 MiB (declared frame sizes too; `open_source(max_ratio=)` "
                              "raises it)", "count", "Unsupported"),
    "MAX_WRITTEN_GAP": ("a gap between tensors of a data file (keep layout) written as zeros to "
                        "a destination that cannot leave a hole (an upload, bytes in memory); "
                        "local files leave holes", "bytes", "Unsupported"),
    "PROTOBUF_MESSAGE_LIMIT": ("an inline ONNX file others can read; writing past it needs "
                               "`force`", "bytes", "Unsupported"),
    "MAX_EVAL_DEPTH": ("subgraphs and function calls nested during evaluation", "count",
                       "Unsupported"),
    "MAX_EVAL_RANK": ("axes of an array the evaluator makes (numpy's bound): an input of a "
                      "greater rank is not generated", "count", "Unsupported"),
    "MAX_EXPANDED_NODES": ("nodes the evaluator plans from model-local function bodies, every "
                           "call expanded (the main graph's own nodes do not count)", "count",
                           "Unsupported"),
    "MAX_EXPR_SIZE": ("atoms of one symbolic extent in shape inference (variables of each "
                      "monomial, floor/ceil/mod with their operands: its terms and degree); "
                      "past it the extent is unknown (`check --full` OM413)", "count", "-"),
    "MAX_DATA_EXPR_SIZE": ("atoms of the symbolic elements of one small integer tensor in "
                           "shape inference, together; past it the elements are unknown "
                           "(`check --full` OM413)", "count", "-"),
    "MAX_EXPR_INTEGER": ("magnitude of an integer in a symbolic extent, or of an int extent "
                         "inference computes; past it the extent is unknown (`check --full` "
                         "OM413)", "count", "-"),
    "MAX_FUNCTION_SIGNATURES": ("distinct input types a model-local function is inferred for "
                                "through its body; other calls' outputs are unknown "
                                "(`check --full` OM413)", "count", "-"),
    "MAX_BISECT_MEMORY": ("intermediate values of the first model `verify --bisect` keeps in "
                          "memory; the rest go to a temporary directory, removed when it ends "
                          "(the second model's values are compared as they are produced, not "
                          "kept)", "bytes", "-"),
    "VIEW_STATS_ELEMENTS": ("elements of one initializer `onemodel view` reads for its "
                            "statistics; a larger one is sampled (64 evenly spaced runs of "
                            "this many elements in all), never read whole", "count", "-"),
    "MAX_SCAN_SECONDS": ("seconds one model's task of `onemodel scan` runs in its process "
                         "(every scan but `--jobs 1`); past it the process is killed and "
                         "the model's row is a `Limit` failure, the scan goes on", "count", "-"),
    "MAX_SCAN_MEMORY": ("heap of one model's task of `onemodel scan` (`RLIMIT_DATA` of its "
                        "process: file mappings do not count); past it the model's row is a "
                        "`Limit` failure, the scan goes on", "bytes", "-"),
    "MMAP_THRESHOLD": ("files this large or larger are memory-mapped, smaller ones read", "bytes",
                       "-"),
    "CONTAINER_ALIGNMENT": ("alignment of tensors in a OneModel data region", "bytes", "-"),
    "EXTERNAL_DATA_ALIGNMENT": ("default alignment of offsets in written external data files",
                                "bytes", "-"),
    "MAX_EXTERNAL_DATA_ALIGNMENT": ("largest alignment accepted for the offsets of a written "
                                    "external data or safetensors file (`align`, `--align`)",
                                    "bytes", "Unsupported"),
}
