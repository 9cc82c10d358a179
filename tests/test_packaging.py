"""The license the package declares is the one its LICENSE file holds; build output stays out of git."""

from __future__ import annotations

import hashlib
import subprocess
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# SHA-256 of the Apache License 2.0 as the ASF publishes it (https://www.apache.org/licenses/LICENSE-2.0.txt).
APACHE_2_0 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"


def test_license_file_is_the_license_pyproject_declares() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0"
    # setuptools ships LICEN[CS]E* files by default; an explicit list must keep this one.
    assert "LICENSE" in project.get("license-files", ["LICENSE"])
    text = (REPO / "LICENSE").read_bytes()
    assert hashlib.sha256(text).hexdigest() == APACHE_2_0
    assert b"Apache License\n                           Version 2.0, January 2004" in text


def test_build_output_is_ignored() -> None:
    for path in ("build/lib/surge/__init__.py", "adapter/build/x", "surge.egg-info/PKG-INFO"):
        ignored = subprocess.run(["git", "-C", str(REPO), "check-ignore", "-q", path], timeout=30)
        assert ignored.returncode == 0, path
