"""`make run`'s last step gets the inputs a model needs: DIMS= and SHAPES= become --dim and
--shape of `verify --run` (checked with `make -n`, which prints the commands and runs none)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def verify_line(*assignments: str) -> str:
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    out = subprocess.run(["make", "-n", "-C", str(ROOT), "run", *assignments],
                         capture_output=True, text=True, check=True).stdout
    (line,) = [x for x in out.splitlines() if " verify " in x]
    return " ".join(line.split())


def test_make_run_passes_dims_and_shapes_to_verify_run():
    assert verify_line("EXAMPLE=m.onnx").endswith("verify m.onnx out/model.onemodel --run")
    assert verify_line("EXAMPLE=m.onnx", "DIMS=seq=16 batch=2", "SHAPES=x=1,3,224,224 y=4") \
        .endswith("verify m.onnx out/model.onemodel --run --dim seq=16 --dim batch=2 "
                  "--shape x=1,3,224,224 --shape y=4")
