"""Update the JavaScript vendored into ``onemodel/view/static`` from its npm release.

The page of ``onemodel view`` lays its graph out with dagre (``@dagrejs/dagre``, MIT), whose
``dist/dagre.min.js`` bundles its one dependency, ``@dagrejs/graphlib`` (MIT, same authors).
This script fetches the package tarball with ``npm pack`` (the npm registry through its own
client), checks its integrity against the registry's ``dist.integrity``, and copies the
minified bundle and the license beside it, with a ``VENDORED.json`` saying what came from where.

    python tools/vendor_js.py                 # the version pinned below
    python tools/vendor_js.py --version 3.2.0 # another release

Run it, then the view tests (``pytest tests/view``), then commit ``onemodel/view/static``.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import subprocess
import tarfile
import tempfile
from pathlib import Path

PACKAGE = "@dagrejs/dagre"
VERSION = "3.1.4"
FILES = {"package/dist/dagre.min.js": "dagre.min.js", "package/LICENSE": "dagre.LICENSE"}
STATIC = Path(__file__).resolve().parent.parent / "onemodel" / "view" / "static"


def vendor(version: str = VERSION, dest: Path = STATIC) -> dict:
    """Fetch ``PACKAGE@version`` with ``npm pack``, check its sha512 integrity, write FILES and
    ``VENDORED.json`` into ``dest``; return the record written."""
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run(["npm", "pack", f"{PACKAGE}@{version}", "--json"], cwd=tmp,
                             check=True, capture_output=True, text=True).stdout
        packed = json.loads(out)[0]
        tgz = Path(tmp) / packed["filename"]
        digest = "sha512-" + base64.b64encode(hashlib.sha512(tgz.read_bytes()).digest()).decode()
        if digest != packed["integrity"]:
            raise SystemExit(f"integrity mismatch: {digest} != {packed['integrity']}")
        dest.mkdir(parents=True, exist_ok=True)
        with tarfile.open(tgz) as tar:
            for member, name in FILES.items():
                data = tar.extractfile(member).read()
                (dest / name).write_bytes(data)
    record = {"package": PACKAGE, "version": packed["version"], "integrity": digest,
              "source": f"npm pack {PACKAGE}@{packed['version']} (registry.npmjs.org)",
              "files": FILES}
    (dest / "VENDORED.json").write_text(json.dumps(record, indent=2) + "\n")
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", default=VERSION)
    print(json.dumps(vendor(parser.parse_args().version), indent=2))


if __name__ == "__main__":
    main()
