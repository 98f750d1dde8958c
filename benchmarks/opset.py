"""``onemodel convert --opset`` side by side with ``onnx.version_converter.convert_version``.

Issue 26 (Show): time, peak memory and coverage of ``onemodel convert IN OUT --opset N``.

Three parts, each may be skipped:

* time: the 50,000-node graph of ``load_convert.make_heavy`` (20,000 Add with a 4-float
  initializer, 30,000 Relu, in a chain) written at opset ``--source`` (11), converted to
  ``--target`` (18), whole processes: ``onemodel convert IN OUT --opset 18`` (the converted
  model checked and inferred, the default proof) vs a python process doing ``onnx.load`` +
  ``convert_version`` + ``onnx.save``. Target <= 0.5x.
* memory: ``--gb`` (2.5) GB of float32 weights in one sparse external data file (64 Gemm
  nodes, the model of benchmarks/check.py at opset ``--source``), converted the same way, OUT
  beside IN. onemodel's default layout keeps the references (nothing of the weights is read);
  onnx is given ``onnx.load(IN, load_external_data=False)`` (its tensors stay references, the
  proto stays small) and saved beside IN so the references hold: without that trick
  ``onnx.load`` reads all 2.5 GB and ``convert_version`` refuses a proto over 2 GiB. Peak RSS
  by ``/usr/bin/time -f %M``. Target for onemodel: <= 150 MB.
* coverage: every single-node ai.onnx case of the ONNX node conformance suite (the test
  suite's cache, tests/conformance_data.py) converted by each tool to every other opset from
  ``--lowest`` (7) to the latest where its operator exists; a conversion is *verified* when the
  result passes ``onemodel.check`` and onemodel's evaluator reproduces the case's expected
  outputs within the case's tolerances (Clause 11.5), *refused* when the tool raises, *failed*
  otherwise (it wrote a model that does not check or does not compute the expected outputs).
  Both tools' outputs are run by the same evaluator, so the counts compare the conversions;
  random operators are judged by the Clause 11.6 criterion of
  tests/evaluate/node_conformance.py; a case whose original model the evaluator does not
  reproduce is left out (and named). ``--quick``: the first case of each operator and
  opsets 7, 11, 13, 18 and the latest.

Each timed command runs once untimed first (bytecode caches, page cache), then ``--repeat``
rounds taking turns (benchmarks/_timing.py).

    python benchmarks/opset.py [--quick] [--skip time,memory,coverage] [--gb 2.5] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from collections import Counter

import _timing
import check

PY = sys.executable
HERE = os.path.dirname(os.path.abspath(__file__))
ONEMODEL = os.path.join(os.path.dirname(PY), "onemodel")

#: sets the opset of the models check.MAKE generated (opset 21) to sys.argv[3]
RETARGET = textwrap.dedent("""
    import sys, onnx
    for path in sys.argv[1:3]:
        m = onnx.load(path, load_external_data=False)
        m.opset_import[0].version = int(sys.argv[3])
        m.ir_version = 6
        with open(path, "wb") as f:
            f.write(m.SerializeToString())
""")

#: onnx's side: load (references only with --refs), convert, save
ONNX_CONVERT = ("import sys, onnx, onnx.version_converter as vc; "
                "m = onnx.load(sys.argv[1], load_external_data=sys.argv[4] == '0'); "
                "onnx.save(vc.convert_version(m, int(sys.argv[3])), sys.argv[2])")


def compare(label: str, path: str, target: int, repeat: int, env: dict,
            time_target: float | None, rss_target: int | None, refs: bool) -> list[str]:
    """Time and measure both conversions of ``path``; print them; return the target lines."""
    base = os.path.splitext(path)[0]
    ours = [ONEMODEL, "convert", path, base + ".om.onnx", "--opset", str(target), "--quiet"]
    theirs = [PY, "-c", ONNX_CONVERT, path, base + ".vc.onnx", str(target), "1" if refs else "0"]
    med, peak = _timing.processes({"ours": ours, "theirs": theirs}, repeat, env, check.run)
    trick = " (load_external_data=False)" if refs else ""
    print(f"\n== {label} ({os.path.getsize(path) / 1e6:.1f} MB model file), {repeat} runs each")
    print(f"  `onemodel convert IN OUT --opset {target}`      {med['ours'] * 1e3:8.0f} ms  "
          f"peak RSS {peak['ours'] / 1e6:6.0f} MB")
    print(f"  onnx load + convert_version + save{trick:27} {med['theirs'] * 1e3:8.0f} ms  "
          f"peak RSS {peak['theirs'] / 1e6:6.0f} MB")
    r = med["ours"] / med["theirs"]
    lines = [f"{label}: onemodel convert --opset {r:.2f}x convert_version"
             + (f" (target <= {time_target}x): {'met' if r <= time_target else 'NOT met'}"
                if time_target is not None else "")]
    if refs:  # onnx without the trick, once: it reads every weight
        cmd = ["/usr/bin/time", "-f", "%M", *theirs[:-1], "0"]
        p = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           text=True)
        err = p.stderr.strip().splitlines()
        what = "ok" if p.returncode == 0 else next(
            (x for x in reversed(err[:-1]) if "Error" in x), "failed")[:120]
        print(f"  onnx load (weights read) + convert_version + save: peak RSS "
              f"{int(err[-1]) * 1024 / 1e6:6.0f} MB, {what}")
    if rss_target is not None:
        lines.append(f"{label}: peak RSS of onemodel convert --opset {peak['ours'] / 1e6:.0f} MB"
                     f" (target <= {rss_target / 1e6:.0f} MB): "
                     f"{'met' if peak['ours'] <= rss_target else 'NOT met'}; onnx "
                     f"{peak['theirs'] / 1e6:.0f} MB")
    return lines


# -- coverage ---------------------------------------------------------------------------------
QUICK_TARGETS = (7, 11, 13, 18)


def _cases(quick: bool):
    """(case, onemodel Model, op_type) of every single-node ai.onnx node case (not
    ``_expanded``); with ``quick`` the first of each operator."""
    tests = os.path.join(HERE, "..", "tests")
    sys.path[:0] = [tests, os.path.join(tests, "evaluate")]
    import conformance_data

    from onemodel.formats.onnx import decode_model

    seen = set()
    for c in conformance_data.iter_cases():
        if c.kind != "node" or "_expanded" in c.name:
            continue
        m = decode_model(c.model_path.read_bytes())
        if m.graph is None or len(m.graph.nodes) != 1 or m.graph.nodes[0].domain:
            continue
        op = m.graph.nodes[0].op_type
        if quick and op in seen:
            continue
        seen.add(op)
        yield c, m, op


def _reproduces(case, model, op: str) -> str | None:
    """None when ``model`` passes check and gives the case's outputs (those of a random
    operator by the Clause 11.6 criterion of tests/evaluate/node_conformance.py), else why
    not."""
    import node_conformance

    import onemodel
    from onemodel import tolerances, value_files
    from onemodel.evaluate import Session

    errors = onemodel.check(model).errors
    if errors:
        return f"check: {errors[0]}"
    try:
        session = Session(model)
        outputs = [v.name for v in model.graph.outputs]
        for ins, outs in case.data_sets:
            feeds = {n: value_files.read_pb(p, k)
                     for n, p, k in zip(case.input_names, ins, case.input_kinds)}
            want = [value_files.read_pb(p, k) for p, k in zip(outs, case.output_kinds)]
            got = session.run(feeds, outputs[:len(want)])
            given = list(feeds.values())
            if node_conformance.random_kind(op, model, given):
                problem = node_conformance.check_random(
                    op, model, given, [got[n] for n in outputs[:len(want)]], want)
                if problem:
                    return problem
                continue
            for name, w in zip(outputs, want):
                problems = tolerances.compare(got[name], w, case.rtol, case.atol, name)
                if problems:
                    return problems[0].text()
    except Exception as e:  # noqa: BLE001 -- any failure of a converted model is a count
        return f"{type(e).__name__}: {e}"
    return None


def coverage(quick: bool, lowest: int) -> list[str]:
    """Convert every case with both tools; print and return the counts."""
    import warnings

    import onnx
    import onnx.version_converter as vc

    from onemodel.formats.onnx import decode_model
    from onemodel.operators.table import versions
    from onemodel.opset_convert import ConversionRefused, convert
    from onemodel.opset_convert.engine import latest

    top = latest("")
    targets = (*QUICK_TARGETS, top) if quick else tuple(range(lowest, top + 1))
    tally = {"onemodel": Counter(), "onnx": Counter()}
    #: tool -> case name -> [(source -> target), ...] and the first reason
    fails: dict = {"onemodel": {}, "onnx": {}}

    def failed(tool, case, source, v, why):
        got = fails[tool].setdefault(case.name, [[], why])
        got[0].append(f"{source}->{v}")
    cases = 0
    t0 = time.perf_counter()
    warnings.simplefilter("ignore")
    unrunnable = []
    for case, m, op in _cases(quick):
        if _reproduces(case, m, op) is not None:  # not even the original: not counted
            unrunnable.append(case.name)
            continue
        cases += 1
        source = m.opset_version("")
        first = versions("", op)[0] if versions("", op) else source
        proto = onnx.load_model_from_string(case.model_path.read_bytes())
        for v in targets:
            if v == source or v < first:
                continue
            way = "up" if v > source else "down"
            for tool in ("onemodel", "onnx"):
                try:
                    if tool == "onemodel":
                        got = convert(m, {"": v}).model
                    else:
                        got = decode_model(vc.convert_version(proto, v).SerializeToString())
                except ConversionRefused:
                    tally[tool]["refused", way] += 1
                    continue
                except Exception as e:  # noqa: BLE001 -- onnx raises RuntimeError, others
                    tally[tool]["refused" if tool == "onnx" else "failed", way] += 1
                    if tool == "onemodel":
                        failed(tool, case, source, v, f"{type(e).__name__}: {e}")
                    continue
                problem = _reproduces(case, got, op)
                if problem is None:
                    tally[tool]["verified", way] += 1
                else:
                    tally[tool]["failed", way] += 1
                    failed(tool, case, source, v, problem)
    dt = time.perf_counter() - t0
    print(f"\n== coverage: {cases} single-node cases, targets "
          f"{'%d-%d' % (lowest, top) if not quick else ', '.join(map(str, targets))} "
          f"({dt:.0f} s)")
    if unrunnable:
        print(f"  left out, the original does not reproduce its outputs here: "
              f"{', '.join(unrunnable)}")
    lines = []
    for tool in ("onemodel", "onnx"):
        t = tally[tool]
        parts = [f"{k} {t[k, 'up']} up / {t[k, 'down']} down"
                 for k in ("verified", "refused", "failed")]
        lines.append(f"coverage, {tool}: " + ", ".join(parts))
        if fails[tool]:
            print(f"  {tool} failed on {len(fails[tool])} cases (the first 15; the conversions, "
                  "the first reason):")
            for name, (ways, why) in list(fails[tool].items())[:15]:
                print(f"    {name} {', '.join(ways)}: {why[:110]}")
    return lines


def main() -> None:
    """Generate the models, compare, print the targets met or not."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gb", type=float, default=2.5, help="external data size (GB, 10^9)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--source", type=int, default=11, help="opset the models are written at")
    ap.add_argument("--target", type=int, default=18, help="opset they are converted to")
    ap.add_argument("--lowest", type=int, default=7, help="coverage: the lowest target opset")
    ap.add_argument("--quick", action="store_true", help="coverage: a sample (see above)")
    ap.add_argument("--skip", default="", help="parts to skip: time, memory, coverage")
    ap.add_argument("--dir", help="work directory (default: a temporary one)")
    a = ap.parse_args()
    skip = set(filter(None, a.skip.split(",")))
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONDONTWRITEBYTECODE", "ONEMODEL_PURE_PYTHON")}
    lines: list[str] = []
    if not {"time", "memory"} <= skip:
        with tempfile.TemporaryDirectory(dir=a.dir) as d:
            heavy, external = os.path.join(d, "heavy.onnx"), os.path.join(d, "external.onnx")
            subprocess.run([PY, "-c", check.MAKE, HERE, heavy, external,
                            str(a.gb if "memory" not in skip else 0.001)], check=True, env=env)
            subprocess.run([PY, "-c", RETARGET, heavy, external, str(a.source)], check=True,
                           env=env)
            if "time" not in skip:
                lines += compare("graph-heavy (50,000 nodes)", heavy, a.target, a.repeat, env,
                                 0.5, None, False)
            if "memory" not in skip:
                lines += compare(f"external data ({a.gb:g} GB, sparse)", external, a.target,
                                 a.repeat, env, None, 150_000_000, True)
    if "coverage" not in skip:
        lines += coverage(a.quick, a.lowest)
    print()
    for line in lines:
        print(line)


if __name__ == "__main__":
    main()
