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


def _dry_run(*args: str) -> list[str]:
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    env = {k: v for k, v in __import__("os").environ.items()
           if k not in ("MAKEFLAGS", "MFLAGS", "PYTHON", "VENV")}
    out = subprocess.run(["make", "-n", "--no-print-directory", "-C", str(ROOT), *args],
                         capture_output=True, text=True, check=True, env=env).stdout
    return [" ".join(x.split()) for x in out.splitlines()]


def test_another_python_gets_a_venv_of_its_own():
    assert "ONEMODEL_REQUIRE_C=1 .venv/bin/python -m pytest -q" in _dry_run("test")
    assert "ONEMODEL_REQUIRE_C=1 .venv/bin/python -m pytest -q" in _dry_run("test",
                                                                            "PYTHON=python3")
    lines = _dry_run("test", "PYTHON=python3.10")
    assert "ONEMODEL_REQUIRE_C=1 .venv-python3.10/bin/python -m pytest -q" in lines
    assert not any(".venv/" in x for x in lines)
    assert "ONEMODEL_REQUIRE_C=1 other/bin/python -m pytest -q" in _dry_run(
        "test", "PYTHON=python3.10", "VENV=other")


def test_make_test_pythons_collects_everything_and_runs_the_fast_subset_on_3_10_and_3_13():
    lines = _dry_run("test-pythons")
    for version in ("3.10", "3.13"):
        py = f".venv-python{version}/bin/python"
        assert f"{py} -m ruff check onemodel tests benchmarks tools docs" in lines
        assert any(x.startswith(f"{py} -m pytest -q --collect-only ") for x in lines)
        assert f"ONEMODEL_REQUIRE_C=1 {py} -m pytest -q tests/formats tests/cli" in lines
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert "make test || status=$?" in ci and "make test-pythons > \"$log\" 2>&1 &" in ci


def test_a_python_pyenv_has_not_selected_is_found_through_pyenv(tmp_path):
    """A pyenv shim that has no version selected fails; the venv is then made by the
    interpreter of the version `pyenv whence` names, under `pyenv root`. (Fakes of pyenv and
    of the interpreter, on PATH: nothing is installed.)"""
    import os

    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    bin_dir, root = tmp_path / "bin", tmp_path / "pyenv-root"
    interp = root / "versions" / "9.9.1" / "bin" / "pyfake9.9"
    for d in (bin_dir, interp.parent):
        d.mkdir(parents=True)
    log = tmp_path / "log"

    def script(path, body):
        path.write_text("#!/bin/sh\n" + body)
        path.chmod(0o755)

    script(bin_dir / "pyfake9.9", "exit 127\n")  # the shim: no version selected
    script(bin_dir / "pyenv", f'case "$1" in whence) [ "$2" = pyfake9.9 ] && '
                              f'printf "9.8.0\\n9.9.1\\n";; root) echo {root};; esac\n')
    # the interpreter: makes a venv whose python records what it is asked to do
    script(interp, f'echo "interp $*" >> {log}\nmkdir -p "$3/bin"\n'
                   f'printf \'#!/bin/sh\\necho "venv $*" >> {log}\\n\' > "$3/bin/python"\n'
                   'chmod +x "$3/bin/python"\n')
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "VENV")}
    env["PATH"] = f"{bin_dir}:{env['PATH']}"
    venv = tmp_path / "venv"
    done = subprocess.run(["make", "-C", str(ROOT), "PYTHON=pyfake9.9", f"VENV={venv}",
                           f"{venv}/.installed"], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    calls = log.read_text().splitlines()
    assert calls[0] == f"interp -m venv {venv}"
    assert calls[1:] == ["venv -m pip install --quiet --upgrade pip",
                         "venv -m pip install --quiet -e ."]
    assert (venv / ".installed").exists()
    # a Python neither on PATH nor in pyenv: one line, and no venv
    done = subprocess.run(["make", "-C", str(ROOT), "PYTHON=pyfake8.8", f"VENV={tmp_path / 'v2'}",
                           f"{tmp_path / 'v2'}/.installed"], capture_output=True, text=True,
                          env=env)
    assert done.returncode != 0
    assert "pyfake8.8: no such interpreter" in done.stderr
    assert not (tmp_path / "v2").exists()
