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
