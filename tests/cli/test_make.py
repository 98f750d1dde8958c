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



def test_editable_installs_drop_setuptools_notice_and_nothing_else(tmp_path):
    """Every `pip install -e` of the Makefile runs with the filter of setuptools' "Editable
    installation" notice in PYTHONWARNINGS, kept after the caller's own filters; the filter
    drops that message (a BuildBackendWarning's, matched by its start) and no other warning.
    (Checked on a fresh venv by hand: `make run` then prints no banner.)"""
    import os
    import re
    import sys

    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    venv = tmp_path / "venv"
    out = subprocess.run(["make", "-n", "-B", "-C", str(ROOT), f"VENV={venv}",
                          f"{venv}/.installed-dev"],
                         capture_output=True, text=True, check=True).stdout
    installs = [x for x in out.splitlines() if " pip install " in x and " -e " in x]
    assert len(installs) == 2  # the runtime, then the dev extra
    assignments = {re.match(r'(PYTHONWARNINGS="[^"]*") ', x).group(1) for x in installs}
    (assignment,) = assignments
    # what that assignment gives the shell, with and without a caller's PYTHONWARNINGS
    script = ("import warnings\n"
              "class BuildBackendWarning(UserWarning): pass\n"
              "warnings.warn('Editable installation.\\n!!\\n  Please be careful', "
              "BuildBackendWarning)\n"
              "warnings.warn('another warning of the build', BuildBackendWarning)\n")
    for caller in (None, "default::DeprecationWarning"):
        env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
        if caller is not None:
            env["PYTHONWARNINGS"] = caller
        value = subprocess.run(["sh", "-c", f'{assignment}; printf %s "$PYTHONWARNINGS"'],
                               capture_output=True, text=True, env=env, check=True).stdout
        assert value == ("" if caller is None else f"{caller},") + \
            "ignore:Editable installation"
        r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                           env=dict(env, PYTHONWARNINGS=value))
        assert r.returncode == 0 and "Editable installation" not in r.stderr, r.stderr
        assert "BuildBackendWarning: another warning of the build" in r.stderr
