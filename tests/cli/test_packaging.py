"""The distribution installs this project: its name is not the unrelated `onemodel` of the
package index, the command and the version are those of the package, and every install line of
the docs and of the install hints names this distribution."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

import onemodel

ROOT = Path(__file__).resolve().parents[2]
#: names on the package index that belong to other projects (an SBML modelling tool)
TAKEN = {"onemodel", "onemodel-cli", "onemodel-gui"}


@pytest.fixture(scope="module")
def project():
    tomllib = pytest.importorskip("tomllib") if sys.version_info >= (3, 11) else \
        pytest.importorskip("tomli")
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_distribution_name_version_and_command(project):
    assert project["name"] == "onemodel-onnx" and project["name"] not in TAKEN
    assert project["version"] == onemodel.__version__
    assert project["scripts"] == {"onemodel": "onemodel.entry:main"}


def test_every_install_line_installs_this_project():
    pip = re.compile(r"pip install\s+(?:-e\s+)?(\"[^\"]+\"|'[^']+'|\S+)")
    found = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
                 ROOT / "onemodel" / "storage" / "remote.py"]:
        for target in pip.findall(path.read_text()):
            target = target.strip("\"'`")
            base = re.split(r"[\[<>=@ ]", target, maxsplit=1)[0]
            found.append((path.name, target))
            # this project (by name or from the clone) or a third-party package, never a taken name
            assert base not in TAKEN, (path.name, target)
    assert ("README.md", ".[s3]") in found
    assert ("remote.py", "onemodel-onnx[s3]") in found
    assert ("storage.md", "onemodel-onnx[s3]") in found


def test_the_oracles_are_bounded_to_the_releases_the_tests_rely_on(project):
    """The dev extra admits only the onnxruntime and onnx releases whose behaviour the tests
    compare with (onnxruntime 1.30 fails 54 of them), on the Pythons that have their wheels; the
    installed ones are within those bounds, and onnxruntime is absent only on Python 3.10."""
    from importlib.metadata import PackageNotFoundError, version

    from oracle_releases import ONNXRUNTIME, ONNXRUNTIME_INSTALLED
    from packaging.requirements import Requirement

    dev = {r.name: r for r in map(Requirement, project["optional-dependencies"]["dev"])}
    ort, onnx = dev["onnxruntime"], dev["onnx"]
    assert [v for v in ("1.30.0", "1.31.1", "1.32.0", "1.32.5", "1.33.0") if v in ort.specifier] \
        == ["1.32.0", "1.32.5"]
    assert f"{ONNXRUNTIME}.0" in ort.specifier and f"{ONNXRUNTIME}.99" in ort.specifier
    assert [v for v in ("1.22.0", "1.23.1", "1.23.2", "1.24.0") if v in onnx.specifier] == [
        "1.23.1", "1.23.2"]
    assert onnx.marker is None
    assert [p for p in ("3.10", "3.11", "3.12", "3.13")
            if ort.marker.evaluate({"python_version": p})] == ["3.11", "3.12", "3.13"]
    assert version("onnx") in onnx.specifier
    here = f"{sys.version_info[0]}.{sys.version_info[1]}"
    try:
        installed = version("onnxruntime")
    except PackageNotFoundError:
        installed = None
    assert ONNXRUNTIME_INSTALLED == (installed is not None)
    if ort.marker.evaluate({"python_version": here}):
        assert installed in ort.specifier
    else:
        assert installed is None
