"""Suite-wide configuration. Shared fixtures live in tests/fixtures/ (one module per test world)."""

import os

from hypothesis import HealthCheck, settings

pytest_plugins = ["tests.fixtures.apiserver", "tests.fixtures.cluster"]

# `make fuzz` runs the campaigns marked `fuzz` with SURGE_FUZZ=1: 100,000 examples each.
settings.register_profile("default", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile(
    "fuzz", deadline=None, max_examples=100_000, suppress_health_check=list(HealthCheck)
)
settings.load_profile("fuzz" if os.environ.get("SURGE_FUZZ") else "default")
