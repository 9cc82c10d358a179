"""The autoscaler's multi-process benchmarks in --smoke mode (see test_bench_smoke.py, whose EXPECTED
numbers they must print): a file of their own, so that a second test worker runs them."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench.test_bench_smoke import AUTOSCALER_SCRIPTS, run_smoke


@pytest.mark.slow
@pytest.mark.parametrize("script", AUTOSCALER_SCRIPTS, ids=lambda p: p.stem)
def test_smoke(script: Path) -> None:
    run_smoke(script)
