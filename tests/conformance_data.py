"""The ONNX conformance test vectors of the installed ``onnx`` package, materialized once on disk.

Test helper only (it imports ``onnx``; nothing under ``onemodel/`` may import it).

The cache lives at ``<tempdir>/onemodel-conformance-<onnx version>-f<CACHE_FORMAT>/``
(override the whole path with the environment variable ``ONEMODEL_CONFORMANCE_DIR``) and is laid
out like onnx's own backend test data::

    <cache>/<kind>/<case name>/model.onnx
    <cache>/<kind>/<case name>/test_data_set_<i>/input_<j>.pb
    <cache>/<kind>/<case name>/test_data_set_<i>/output_<j>.pb
    <cache>/index.json      one entry per case: paths, message kinds, graph value names, rtol/atol
    <cache>/COMPLETE        written last; its presence means the cache is whole

Kinds:

``node``
    ``onnx.backend.test.case.node.collect_testcases()``: one-operator models (about 1,900).
``simple``
    ``onnx.backend.test.case.model.collect_testcases()`` without kind ``real`` (which needs
    downloads), plus any case of the wheel's ``onnx/backend/test/data/simple`` that the code does
    not generate (the wheel's copies of generated cases are not used).
``pytorch-converted``, ``pytorch-operator``
    Copied from the wheel's ``onnx/backend/test/data/<kind>/``.
``light``
    The wheel's ``data/light/light_<model>.onnx`` (real architectures, weights replaced by
    generated constants) with ``light_<model>_output_0.pb``; the input is made the way onnx's
    backend test runner makes it (``(arange(n) / n).astype(float32)`` in the input's shape, unknown
    dims taken as 1) and written as ``input_0.pb``.

Each ``.pb`` file holds one serialized message whose kind is decided, as in
``onnx/backend/test/cmd_tools.py``, by the type of the graph input or output it belongs to:
``map_type`` -> ``map`` (MapProto), ``sequence_type`` -> ``sequence`` (SequenceProto),
``optional_type`` -> ``optional`` (OptionalProto), otherwise ``tensor`` (TensorProto).
Generated files are written exactly as cmd_tools writes them (``numpy_helper.from_dict`` /
``from_list`` / ``from_optional`` / ``from_array`` with the graph value's name, or the TensorProto
as given).

Generation runs once per machine and onnx version, in a child process (the test-case modules of
onnx keep global state and emit numpy warnings), into a temporary directory next to the cache that
is renamed into place when complete, under an exclusive file lock so that concurrent pytest
workers wait for one generator instead of racing.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

CACHE_FORMAT = 1
"""Bumped whenever the cache layout or index changes; part of the cache directory's name."""

SHIPPED_KINDS = ("light", "pytorch-converted", "pytorch-operator", "simple")
"""Directories of ``onnx/backend/test/data/`` that are included (``real`` needs downloads)."""

MESSAGE_KINDS = ("tensor", "sequence", "map", "optional")
"""The message kinds a ``.pb`` file can hold; see :func:`message_class`."""

ENV_DIR = "ONEMODEL_CONFORMANCE_DIR"
_INDEX = "index.json"
_MARKER = "COMPLETE"


@dataclasses.dataclass
class Case:
    """One conformance case: a model and its data sets.

    ``data_sets[i]`` is ``(input_paths, output_paths)`` for ``test_data_set_<i>``, in file order
    (``input_0.pb``, ``input_1.pb``, ...). ``input_kinds[j]`` / ``output_kinds[j]`` are the message
    kinds (one of :data:`MESSAGE_KINDS`) of ``input_<j>.pb`` / ``output_<j>.pb`` and
    ``input_names[j]`` / ``output_names[j]`` the graph input / output they belong to (for ``light``
    cases the inputs skip graph inputs that are initializers; elsewhere ``input_<j>`` is
    ``graph.input[j]``). A case may give fewer input files than the graph has inputs (optional
    inputs left out). ``rtol`` / ``atol`` are the tolerances onnx's runner uses for the case.
    """

    name: str
    kind: str
    model_path: pathlib.Path
    data_sets: list[tuple[list[pathlib.Path], list[pathlib.Path]]]
    input_kinds: list[str]
    output_kinds: list[str]
    input_names: list[str]
    output_names: list[str]
    rtol: float
    atol: float
    source: str
    """``"generated"`` (from onnx's test-case code) or ``"shipped"`` (copied from the wheel)."""

    @property
    def id(self) -> str:
        """``"<kind>/<name>"``, unique over all cases (names repeat across kinds)."""
        return f"{self.kind}/{self.name}"


def cache_path() -> pathlib.Path:
    """The cache directory for the installed onnx version (it may not exist yet)."""
    override = os.environ.get(ENV_DIR)
    if override:
        return pathlib.Path(override)
    import onnx

    name = f"onemodel-conformance-{onnx.__version__}-f{CACHE_FORMAT}"
    return pathlib.Path(tempfile.gettempdir()) / name


def conformance_dir() -> pathlib.Path:
    """The cache directory, generating it first if it is not complete. Safe across processes."""
    root = cache_path()
    if (root / _MARKER).is_file():
        return root
    root.parent.mkdir(parents=True, exist_ok=True)
    with _FileLock(root.parent / f".{root.name}.lock"):
        if (root / _MARKER).is_file():
            return root
        # Anything left here while we hold the lock is from a killed run.
        for stale in root.parent.glob(f".{root.name}.tmp-*"):
            shutil.rmtree(stale, ignore_errors=True)
        if root.exists():
            shutil.rmtree(root)
        tmp = pathlib.Path(tempfile.mkdtemp(prefix=f".{root.name}.tmp-", dir=root.parent))
        try:
            env = dict(os.environ, PYTHONWARNINGS="ignore")
            subprocess.run([sys.executable, str(pathlib.Path(__file__).resolve()), "--generate",
                            str(tmp)], check=True, env=env, stdout=subprocess.DEVNULL)
            os.rename(tmp, root)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return root


def iter_cases(kinds: tuple[str, ...] | None = None) -> list[Case]:
    """Every case in the cache (generating it if needed), sorted by kind then name.

    ``kinds`` restricts the result to those kinds (``"node"``, ``"simple"``, ``"light"``,
    ``"pytorch-converted"``, ``"pytorch-operator"``).
    """
    root = conformance_dir()
    index = json.loads((root / _INDEX).read_text())
    cases = []
    for entry in index["cases"]:
        if kinds is not None and entry["kind"] not in kinds:
            continue
        cases.append(Case(
            name=entry["name"],
            kind=entry["kind"],
            model_path=root / entry["model"],
            data_sets=[([root / p for p in ins], [root / p for p in outs])
                       for ins, outs in entry["data_sets"]],
            input_kinds=entry["input_kinds"],
            output_kinds=entry["output_kinds"],
            input_names=entry["input_names"],
            output_names=entry["output_names"],
            rtol=entry["rtol"],
            atol=entry["atol"],
            source=entry["source"],
        ))
    return cases


def message_class(kind: str) -> type:
    """The onnx protobuf class of a message kind: TensorProto, SequenceProto, MapProto,
    OptionalProto."""
    import onnx

    return {"tensor": onnx.TensorProto, "sequence": onnx.SequenceProto,
            "map": onnx.MapProto, "optional": onnx.OptionalProto}[kind]


def read_message(path: pathlib.Path, kind: str) -> Any:
    """Parse one ``.pb`` file as the onnx message of ``kind`` (the oracle's reading of the file)."""
    message = message_class(kind)()
    message.ParseFromString(pathlib.Path(path).read_bytes())
    return message


# ------------------------------------------------------------------------------------------------
# Generation (runs in the child process started by conformance_dir)
# ------------------------------------------------------------------------------------------------


def _value_kind(value_info: Any) -> str:
    """The message kind cmd_tools uses for a graph input/output of this ValueInfoProto."""
    which = value_info.type.WhichOneof("value")
    if which == "map_type":
        return "map"
    if which == "sequence_type":
        return "sequence"
    if which == "optional_type":
        return "optional"
    if which == "tensor_type":
        return "tensor"
    raise ValueError(f"graph value {value_info.name!r} has type {which!r}, which cmd_tools does "
                     "not write")


def _to_message(value: Any, value_info: Any) -> tuple[str, Any]:
    """Serialize one test value the way cmd_tools.generate_data does."""
    from onnx import TensorProto, numpy_helper

    kind = _value_kind(value_info)
    name = value_info.name
    if kind == "map":
        return kind, numpy_helper.from_dict(value, name)
    if kind == "sequence":
        return kind, numpy_helper.from_list(value, name)
    if kind == "optional":
        return kind, numpy_helper.from_optional(value, name)
    if isinstance(value, TensorProto):
        return kind, value
    return kind, numpy_helper.from_array(value, name)


def _write_generated(root: pathlib.Path, case: Any) -> dict:
    case_dir = root / case.kind / case.name
    case_dir.mkdir(parents=True)
    model = case.model
    (case_dir / "model.onnx").write_bytes(model.SerializeToString())
    graph_inputs, graph_outputs = list(model.graph.input), list(model.graph.output)
    data_sets = []
    n_in = n_out = 0
    for i, (inputs, outputs) in enumerate(case.data_sets):
        set_dir = case_dir / f"test_data_set_{i}"
        set_dir.mkdir()
        ins, outs = [], []
        for j, value in enumerate(inputs):
            _, message = _to_message(value, graph_inputs[j])
            (set_dir / f"input_{j}.pb").write_bytes(message.SerializeToString())
            ins.append(f"{case.kind}/{case.name}/test_data_set_{i}/input_{j}.pb")
        for j, value in enumerate(outputs):
            _, message = _to_message(value, graph_outputs[j])
            (set_dir / f"output_{j}.pb").write_bytes(message.SerializeToString())
            outs.append(f"{case.kind}/{case.name}/test_data_set_{i}/output_{j}.pb")
        n_in, n_out = max(n_in, len(ins)), max(n_out, len(outs))
        data_sets.append((ins, outs))
    return {
        "name": case.name, "kind": case.kind, "source": "generated",
        "model": f"{case.kind}/{case.name}/model.onnx", "data_sets": data_sets,
        "input_kinds": [_value_kind(v) for v in graph_inputs[:n_in]],
        "output_kinds": [_value_kind(v) for v in graph_outputs[:n_out]],
        "input_names": [v.name for v in graph_inputs[:n_in]],
        "output_names": [v.name for v in graph_outputs[:n_out]],
        "rtol": float(case.rtol), "atol": float(case.atol),
    }


def _copy_shipped(root: pathlib.Path, kind: str, src: pathlib.Path) -> dict:
    """Copy one case directory of onnx/backend/test/data/<kind>/ (model.onnx + test_data_set_*)."""
    import onnx

    dst = root / kind / src.name
    dst.mkdir(parents=True)
    shutil.copyfile(src / "model.onnx", dst / "model.onnx")
    graph = onnx.load(str(src / "model.onnx"), load_external_data=False).graph
    rtol, atol = 1e-3, 1e-7  # onnx.backend.test.loader defaults, overridden by data.json
    if (src / "data.json").is_file():
        extra = json.loads((src / "data.json").read_text())
        rtol, atol = extra.get("rtol", rtol), extra.get("atol", atol)
    set_dirs = sorted((d for d in src.iterdir()
                       if d.is_dir() and d.name.startswith("test_data_set_")),
                      key=lambda d: int(d.name.rsplit("_", 1)[1]))
    data_sets = []
    n_in = n_out = 0
    for set_dir in set_dirs:
        (dst / set_dir.name).mkdir()
        lists = []
        for prefix in ("input", "output"):
            count = len(list(set_dir.glob(f"{prefix}_*.pb")))
            rel = []
            for j in range(count):
                shutil.copyfile(set_dir / f"{prefix}_{j}.pb",
                                dst / set_dir.name / f"{prefix}_{j}.pb")
                rel.append(f"{kind}/{src.name}/{set_dir.name}/{prefix}_{j}.pb")
            lists.append(rel)
        n_in, n_out = max(n_in, len(lists[0])), max(n_out, len(lists[1]))
        data_sets.append((lists[0], lists[1]))
    return {
        "name": src.name, "kind": kind, "source": "shipped",
        "model": f"{kind}/{src.name}/model.onnx", "data_sets": data_sets,
        "input_kinds": [_value_kind(v) for v in graph.input[:n_in]],
        "output_kinds": [_value_kind(v) for v in graph.output[:n_out]],
        "input_names": [v.name for v in graph.input[:n_in]],
        "output_names": [v.name for v in graph.output[:n_out]],
        "rtol": float(rtol), "atol": float(atol),
    }


def _copy_light(root: pathlib.Path, model_file: pathlib.Path) -> dict:
    """Lay out one data/light model as a case, making its input as onnx's backend runner does."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    name = model_file.stem  # light_<model>
    dst = root / "light" / name
    (dst / "test_data_set_0").mkdir(parents=True)
    shutil.copyfile(model_file, dst / "model.onnx")
    graph = onnx.load(str(model_file), load_external_data=False).graph
    initializers = {t.name for t in graph.initializer}
    feeds = [v for v in graph.input if v.name not in initializers]
    ins = []
    for j, value_info in enumerate(feeds):
        if value_info.type.tensor_type.elem_type != onnx.TensorProto.FLOAT:
            raise ValueError(f"{model_file}: input {value_info.name!r} is not float")
        shape = tuple(d.dim_value if d.HasField("dim_value") else 1
                      for d in value_info.type.tensor_type.shape.dim)
        n = int(np.prod(shape))
        array = (np.arange(n).reshape(shape) / n).astype(np.float32)
        (dst / "test_data_set_0" / f"input_{j}.pb").write_bytes(
            numpy_helper.from_array(array).SerializeToString())
        ins.append(f"light/{name}/test_data_set_0/input_{j}.pb")
    outs = []
    for j in range(len(graph.output)):
        expected = model_file.with_name(f"{name}_output_{j}.pb")
        if not expected.is_file():
            break
        shutil.copyfile(expected, dst / "test_data_set_0" / f"output_{j}.pb")
        outs.append(f"light/{name}/test_data_set_0/output_{j}.pb")
    return {
        "name": name, "kind": "light", "source": "shipped",
        "model": f"light/{name}/model.onnx", "data_sets": [(ins, outs)],
        "input_kinds": ["tensor"] * len(ins),
        "output_kinds": [_value_kind(v) for v in graph.output[:len(outs)]],
        "input_names": [v.name for v in feeds],
        "output_names": [v.name for v in graph.output[:len(outs)]],
        "rtol": 1e-3, "atol": 1e-7,
    }


def generate(root: pathlib.Path) -> dict:
    """Write every case into the existing empty directory ``root``; return the summary.

    The summary (also stored in ``COMPLETE``) gives the onnx version, the number of cases per kind,
    the number of model.onnx and .pb files and the seconds taken per step.
    """
    import onnx
    import onnx.backend.test.case.model as model_cases
    import onnx.backend.test.case.node as node_cases

    root = pathlib.Path(root)
    timings: dict[str, float] = {}
    entries: list[dict] = []

    start = time.perf_counter()
    collected = node_cases.collect_testcases(None)
    timings["collect_node"] = time.perf_counter() - start
    start = time.perf_counter()
    collected_models = [c for c in model_cases.collect_testcases() if c.kind != "real"]
    timings["collect_model"] = time.perf_counter() - start

    start = time.perf_counter()
    generated = set()
    for case in [*collected, *collected_models]:
        if (case.kind, case.name) in generated:
            raise ValueError(f"duplicate case {case.kind}/{case.name}")
        generated.add((case.kind, case.name))
        entries.append(_write_generated(root, case))
    timings["write_generated"] = time.perf_counter() - start

    start = time.perf_counter()
    data_dir = pathlib.Path(onnx.__file__).parent / "backend" / "test" / "data"
    for kind in SHIPPED_KINDS:
        kind_dir = data_dir / kind
        if not kind_dir.is_dir():
            continue
        if kind == "light":
            for model_file in sorted(kind_dir.glob("light_*.onnx")):
                entries.append(_copy_light(root, model_file))
            continue
        for src in sorted(d for d in kind_dir.iterdir() if (d / "model.onnx").is_file()):
            if (kind, src.name) in generated:
                continue  # the generated copy from the same onnx version is used
            entries.append(_copy_shipped(root, kind, src))
    timings["copy_shipped"] = time.perf_counter() - start

    entries.sort(key=lambda e: (e["kind"], e["name"]))
    counts: dict[str, int] = {}
    for entry in entries:
        counts[entry["kind"]] = counts.get(entry["kind"], 0) + 1
    pb_files = sum(len(ins) + len(outs) for e in entries for ins, outs in e["data_sets"])
    summary = {
        "onnx_version": onnx.__version__, "cache_format": CACHE_FORMAT,
        "models": len(entries), "pb_files": pb_files, "cases_per_kind": counts,
        "seconds": {k: round(v, 2) for k, v in timings.items()},
    }
    (root / _INDEX).write_text(json.dumps({"summary": summary, "cases": entries}, indent=0))
    (root / _MARKER).write_text(json.dumps(summary, indent=1) + "\n")
    return summary


class _FileLock:
    """An exclusive advisory lock on a file (fcntl.flock; msvcrt.locking on Windows), blocking."""

    def __init__(self, path: pathlib.Path) -> None:
        self.path = path
        self._fd: int | None = None

    def __enter__(self) -> _FileLock:
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        if os.name == "nt":  # pragma: no cover - not exercised on the Linux CI
            import msvcrt

            while True:
                try:
                    msvcrt.locking(self._fd, msvcrt.LK_LOCK, 1)
                    break
                except OSError:
                    continue
        else:
            import fcntl

            fcntl.flock(self._fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._fd is not None
        os.close(self._fd)  # closing the descriptor releases the lock
        self._fd = None


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--generate":
        print(json.dumps(generate(pathlib.Path(sys.argv[2])), indent=1))
    elif len(sys.argv) == 1:
        start = time.perf_counter()
        where = conformance_dir()
        print(f"{where} ({time.perf_counter() - start:.1f} s)")
        print((where / _MARKER).read_text())
    else:
        sys.exit("usage: conformance_data.py [--generate EMPTY_DIR]")
