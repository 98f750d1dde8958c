"""The opset conversion sweep (issue 26, "Conformance, by execution"): every ONNX node
conformance case of the installed onnx converted by :func:`onemodel.opset_convert.convert` to
the latest operator set and down to every lower one at which all its operators exist (or below,
where an operator has a decomposition), and each result proved by running it.

For each case whose own model onemodel's evaluator reproduces (the others are counted and left
out: the sweep tests conversion, not the evaluator), and for each target version of each
converted domain (ai.onnx; ai.onnx.ml for the cases that use it):

- the conversion is refused (``ConversionRefused``: counted by reason, the reasons grouped with
  their numbers and names blanked), or
- the converted model must pass ``check`` and shape inference with nothing the original does
  not have (:func:`~onemodel.opset_convert.convert_checked`, what ``onemodel convert`` does), and
  the evaluator must reproduce the case's expected outputs on every data set within the Clause
  11.5 tolerances (``node_conformance.run_case``: the comparison of the node conformance test
  and docs/conformance.md, with the random operators of Clause 11.6 checked by their criterion);
- a conversion down is converted back up to the case's version, and that must reproduce the
  outputs too.

Anything else is an output difference (``differs``), a refused run (``not runnable``: the
evaluator does not claim the converted model), a ``check`` or inference failure, or an error
(an exception that is not a refusal). Each of these is a bug of the conversion or the evaluator.

    python tools/opset_sweep.py                    # the whole sweep, 2 processes
    python tools/opset_sweep.py --quick --ops Softmax,Pad --json out.json -v

The counts are printed as a table; ``--json`` writes them (with every problem) to a file,
which docs/make_opset_conversion.py renders into docs/opset-conversion.md (docs/opset-sweep.json).
Test tool: it imports onnx (through tests/conformance_data.py, to generate the cases)."""

from __future__ import annotations

import argparse
import json
import multiprocessing
import re
import sys
import time
import warnings
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "tests" / "evaluate")]

import conformance_data  # noqa: E402
import node_conformance as nc  # noqa: E402

from onemodel import schemas  # noqa: E402
from onemodel.errors import OneModelError  # noqa: E402
from onemodel.formats.onnx import decode_model  # noqa: E402
from onemodel.operators.table import exact  # noqa: E402
from onemodel.opset_convert import ConversionRefused, convert_checked  # noqa: E402
from onemodel.opset_convert.engine import DOMAINS, _all_graphs, latest  # noqa: E402

#: how each conversion ended
OUTCOMES = ("passed", "refused", "differs", "not runnable", "check", "error")
#: the problems and the refusal reasons kept in the JSON output (the counts are always whole)
MAX_PROBLEMS = 100
MAX_REASONS = 40


def _operators(model) -> dict:
    """{domain: {op_type}} of the converted domains, over every graph of ``model``."""
    out = {}
    for _, g in _all_graphs(model):
        for n in g.nodes:
            d = "" if n.domain in ("", "ai.onnx", None) else n.domain
            if d in DOMAINS:
                out.setdefault(d, set()).add(n.op_type)
    return out


def _lowest(domain: str, ops: set) -> int:
    """The lowest version of ``domain`` at which every operator of ``ops`` exists, or can be
    written as older operators (a decomposition adapter at its first definition)."""
    low = 1
    for op in ops:
        vs = schemas.versions(op, domain)
        if not vs:
            continue
        first = vs[0]
        fn = exact("adapter", domain, op, first)
        if not getattr(fn, "decomposition", False):
            low = max(low, first)
    return low


def targets(model, quick: bool = False) -> list[tuple[str, int, int]]:
    """(domain, source, target) of every conversion of the sweep for ``model``: up to the
    latest version and down to every version from :func:`_lowest` (``quick``: the latest, the
    lowest and the one below the source)."""
    imported = {(o.domain or ""): int(o.version or 0) for o in model.opset_imports}
    out = []
    for d, ops in sorted(_operators(model).items()):
        src = imported.get(d)
        if not src:
            continue
        down = list(range(_lowest(d, ops), src))
        if quick:
            down = sorted({v for v in (down[:1] + down[-1:])})
        if src < latest(d):
            out.append((d, src, latest(d)))
        out.extend((d, src, v) for v in reversed(down))
    return out


#: the kinds of refusal, (label, pattern of the reason) in order; the first that matches counts
REASON_KINDS = (
    ("element type not admitted by the target definition", r"which \S+ does not admit"),
    ("an input the target needs constant is computed", r"computed|not a constant"),
    ("an attribute value the target cannot express",
     r"has no equivalent|cannot express|does not exist before opset \d+$|applies to"),
    ("operator introduced after the target, no decomposition", r"does not exist before"),
    ("semantic change, no adapter proves the node does not use it", r"no adapter proves"),
    ("no adapter yet", r"no adapter yet"),
    ("broadcasting with no legacy equivalent", r"broadcast|neither the input"),
    ("a behaviour the target defines otherwise (axis coercion, coordinates, negative "
     "indices, padded extents)", r"would normalize|restated|maps coordinates|nearest|negative|"
     r"steps|requires"),
    ("an output the target cannot write", r"outputs? .*not written|training"),
    ("a shape or value that is not known", r"not known|unknown|cannot be told"),
)


def reason_kind(text: str) -> str:
    """The :data:`REASON_KINDS` label of a refusal reason (``other`` when none matches)."""
    for label, pattern in REASON_KINDS:
        if re.search(pattern, text):
            return label
    return "other"


def _reason(text: str) -> str:
    """A refusal reason with its numbers, quoted names and value names blanked, to group by."""
    text = re.sub(r"'[^'\s,]+'", "'…'", text)
    text = re.sub(r"\b\d+(\.\d+)?\b", "N", text)
    return text


def _run(case, operator, model) -> tuple[str, str]:
    r = nc.run_case(case, operator, model=model)
    if r.status == "passed":
        return "passed", ""
    if r.status == "unsupported":
        return "not runnable", r.detail
    return "differs", r.detail


def sweep_case(args) -> dict:
    """Every conversion of one case: ``{"case", "skipped" | "conversions": [...]}``, each
    conversion ``{"domain", "from", "to", "outcome", "detail", "back"}``."""
    with warnings.catch_warnings():  # (the notes of conversions: the counts say enough)
        warnings.simplefilter("ignore")
        return _sweep_case(*args)


def _sweep_case(case, operator, quick) -> dict:
    out = {"case": case.name, "operator": operator[1], "conversions": []}
    try:
        model = decode_model(case.model_path.read_bytes(), source=str(case.model_path))
        base = nc.run_case(case, operator, model=model)
    except Exception as e:  # noqa: BLE001 - reported, not raised
        out["skipped"] = f"original: {type(e).__name__}: {e}"
        return out
    if base.status != "passed":
        out["skipped"] = f"original {base.status}"
        return out
    for d, src, dst in targets(model, quick):
        rec = {"domain": d, "from": src, "to": dst, "outcome": "", "detail": "", "back": ""}
        out["conversions"].append(rec)
        try:
            conv = convert_checked(model, {d: dst}).model
        except ConversionRefused as e:
            rec["outcome"] = "refused"
            rec["detail"] = [(op, r) for _, op, r in e.refusals]
            continue
        except OneModelError as e:
            rec["outcome"], rec["detail"] = "check", str(e)
            continue
        except Exception as e:  # noqa: BLE001
            rec["outcome"], rec["detail"] = "error", f"{type(e).__name__}: {e}"
            continue
        try:
            rec["outcome"], rec["detail"] = _run(case, operator, conv)
        except Exception as e:  # noqa: BLE001
            rec["outcome"], rec["detail"] = "error", f"run: {type(e).__name__}: {e}"
        if rec["outcome"] != "passed" or dst > src:
            continue
        try:  # down, then back up to the case's version: the same outputs again
            back = convert_checked(conv, {d: src}).model
            rec["back"], detail = _run(case, operator, back)
        except ConversionRefused as e:
            rec["back"], detail = "refused", "; ".join(f"{op}: {r}" for _, op, r in e.refusals)
        except OneModelError as e:
            rec["back"], detail = "check", str(e)
        except Exception as e:  # noqa: BLE001
            rec["back"], detail = "error", f"{type(e).__name__}: {e}"
        if rec["back"] != "passed":
            rec["detail"] = f"back up to {src}: {detail}"
    return out


def summarize(results: list, seconds: float, command: str) -> dict:
    """The counts of the sweep (what docs/opset-sweep.json holds)."""
    c = Counter()
    reasons, kinds, problems, skipped = Counter(), Counter(), [], Counter()
    for r in results:
        c["cases"] += 1
        if "skipped" in r:
            skipped[r["skipped"].split(":")[0]] += 1
            continue
        c["cases converted"] += 1
        for rec in r["conversions"]:
            c["conversions"] += 1
            way = "up" if rec["to"] > rec["from"] else "down"
            c[f"{rec['outcome']} {way}"] += 1
            if rec["outcome"] == "refused":
                for op, why in rec["detail"]:
                    reasons[f"{op.split('-')[0]}: {_reason(why)}"] += 1
                    kinds[reason_kind(why)] += 1
            elif rec["outcome"] != "passed":
                problems.append(f"{r['case']} {rec['domain'] or 'ai.onnx'} {rec['from']} -> "
                                f"{rec['to']}: {rec['outcome']}: {rec['detail']}")
            elif rec["back"]:
                c[f"round trip {rec['back']}"] += 1
                if rec["back"] != "passed":
                    problems.append(f"{r['case']} {rec['domain'] or 'ai.onnx'} {rec['from']} "
                                    f"-> {rec['to']} -> {rec['from']}: {rec['back']}: "
                                    f"{rec['detail']}")
    return {"command": command, "seconds": round(seconds), "counts": dict(sorted(c.items())),
            "skipped": dict(skipped.most_common()),
            "refusal kinds": dict(kinds.most_common()),
            "refusal reasons": dict(reasons.most_common(MAX_REASONS)),
            "refusal reasons left out": sum(reasons.values())
            - sum(v for _, v in reasons.most_common(MAX_REASONS)),
            "problems": sorted(problems)[:MAX_PROBLEMS], "problem count": len(problems)}


def table(s: dict) -> str:
    """The summary as a text table."""
    c = s["counts"]
    lines = [f"cases {c.get('cases', 0)} (run by the evaluator and swept: "
             f"{c.get('cases converted', 0)}; left out: "
             + ", ".join(f"{k} {v}" for k, v in s["skipped"].items()) + ")",
             f"conversions {c.get('conversions', 0)}", "",
             f"{'outcome':<14}{'up':>8}{'down':>8}"]
    for o in OUTCOMES:
        lines.append(f"{o:<14}{c.get(f'{o} up', 0):>8}{c.get(f'{o} down', 0):>8}")
    other = sum(v for k, v in c.items() if k.startswith("round trip") and "passed" not in k)
    lines.append(f"round trips (down, back up): passed {c.get('round trip passed', 0)}, "
                 f"other {other}")
    lines += ["", "refused nodes by kind of reason:"]
    for k, v in s["refusal kinds"].items():
        lines.append(f"{v:>7}  {k}")
    lines += ["", "refused nodes by reason (numbers and names blanked):"]
    for k, v in list(s["refusal reasons"].items())[:40]:
        lines.append(f"{v:>7}  {k}")
    lines += ["", f"problems: {s['problem count']}"] + [f"  {p}" for p in s["problems"][:60]]
    lines.append(f"\n{s['seconds']} s: {s['command']}")
    return "\n".join(lines)


class _InProcess:
    """The part of a ``multiprocessing.Pool`` :func:`main` uses, in this process (``--jobs 1``)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    @staticmethod
    def imap_unordered(fn, items, chunksize=1):
        return map(fn, items)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="per case only the latest, the lowest and the next lower version")
    ap.add_argument("--ops", help="comma-separated operators: only the cases testing them")
    ap.add_argument("--jobs", type=int, default=2,
                    help="processes (default 2; 1 runs in this process)")
    ap.add_argument("--json", help="write the summary to this file")
    ap.add_argument("-v", "--verbose", action="store_true", help="print each case as it ends")
    a = ap.parse_args(argv)
    start = time.perf_counter()
    cases = conformance_data.iter_cases(("node",))
    by_name = {c.name: c for c in cases}
    wanted = set(a.ops.split(",")) if a.ops else None
    work = []
    for c in cases:
        op = nc.operator_of(c, by_name)
        if wanted is None or op[1] in wanted:
            work.append((c, op, a.quick))
    results = []
    with multiprocessing.Pool(a.jobs) if a.jobs > 1 else _InProcess() as pool:
        for r in pool.imap_unordered(sweep_case, work, chunksize=4):
            results.append(r)
            if a.verbose:
                bad = [x for x in r["conversions"] if x["outcome"] not in ("passed", "refused")
                       or x["back"] not in ("", "passed")]
                print(f"{len(results)}/{len(work)} {r['case']}: "
                      f"{r.get('skipped') or len(r['conversions'])} "
                      f"{'PROBLEMS ' + str(len(bad)) if bad else ''}", flush=True)
    cmd = ("python tools/opset_sweep.py" + (" --quick" if a.quick else "")
           + (f" --ops {a.ops}" if a.ops else "") + (f" --jobs {a.jobs}" if a.jobs != 2 else ""))
    s = summarize(results, time.perf_counter() - start, cmd)
    print(table(s))
    if a.json:
        Path(a.json).write_text(json.dumps(s, indent=1, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
