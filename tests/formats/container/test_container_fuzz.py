"""Mutated OneModel files: whatever is changed, a read either succeeds or raises one of the four
error kinds with a field path — never another exception (format section 3.1)."""

from __future__ import annotations

import copy
import json
import struct

from container_models import sink_model
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from onemodel.errors import OneModelError
from onemodel.formats.container import read_bytes, write_bytes

DATA = write_bytes(sink_model())
_N = struct.unpack_from("<Q", DATA, 24)[0]
_OFF = struct.unpack_from("<Q", DATA, 32)[0]
MANIFEST = json.loads(DATA[64:64 + _N])
REGION = DATA[_OFF:]


def _paths(o, p=()):
    yield p
    if isinstance(o, dict):
        for k, v in o.items():
            yield from _paths(v, p + (k,))
    elif isinstance(o, list):
        for i, v in enumerate(o):
            yield from _paths(v, p + (i,))


PATHS = [p for p in _paths(MANIFEST) if p]
VALUES = st.one_of(st.none(), st.booleans(), st.integers(-(1 << 65), 1 << 65),
                   st.sampled_from([0, 1, 8, 14, 99, "", "AAA=", "/w==", "int32_data", [], {},
                                    [0, 0], {"bytes": "/w=="}, {"kind": "tensor"}]),
                   st.text(max_size=4), st.lists(st.integers(-3, 3), max_size=3))


def _assemble(text: bytes) -> bytes:
    off = (64 + len(text) + 63) // 64 * 64
    head = struct.pack("<8sII6Q", b"ONEMODEL", 1, 0, 64, len(text), off, len(REGION),
                       off + len(REGION), 0)
    return head + text + bytes(off - 64 - len(text)) + REGION


def _read(data: bytes) -> None:
    try:
        read_bytes(data)
    except OneModelError as e:
        assert e.kind in ("Malformed", "InvalidModel", "Unsupported") and e.path, str(e)
        assert "could not be read" not in e.message, str(e)  # the last-resort net never fires


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(PATHS), VALUES, st.booleans()), min_size=1,
                max_size=3))
def test_manifest_value_mutations(edits):
    m = copy.deepcopy(MANIFEST)
    for path, value, delete in edits:
        o = m
        try:
            for k in path[:-1]:
                o = o[k]
            if delete and isinstance(o, dict):
                o.pop(path[-1], None)
            else:
                o[path[-1]] = value
        except (KeyError, IndexError, TypeError):
            continue
    _read(_assemble(json.dumps(m, separators=(",", ":")).encode()))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(DATA) - 1), st.integers(0, 255)), min_size=1,
                max_size=4))
def test_byte_mutations(flips):
    data = bytearray(DATA)
    for pos, value in flips:
        data[pos] = value
    _read(bytes(data))
