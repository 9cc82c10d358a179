"""The conformance data under tests/data/conformance, read by the Quantity and HPA-core tests.

`quantity.json` holds Quantity formatting and parsing cases checked against apimachinery (Go);
`hpa/*.json` holds the vectors transcribed from the upstream HPA controller's unit tests. The data is
part of the repo; a missing or short file is an error at collection time, never an empty parameter set.
"""

import json
from pathlib import Path
from typing import Any

DATA_DIR = Path(__file__).resolve().parent / "data" / "conformance"

# Vectors per file, as transcribed: a file that loses vectors fails the suite instead of shrinking it.
HPA_VECTOR_COUNTS = {
    "behavior": 59,
    "build_quantity": 7,
    "calculate_requests": 10,
    "defaults": 10,
    "group_pods": 14,
    "normalization": 12,
    "replica_calculator": 76,
    "utilization": 5,
}


# The controller-level vectors (whole reconciles through decide()), per file.
CONTROLLER_VECTOR_COUNTS = {"controller_scale_to_zero": 20}


class ConformanceDataError(RuntimeError):
    """The repo's conformance data is missing or incomplete."""


def load_conformance(relative: str) -> Any:
    path = DATA_DIR / relative
    if not path.is_file():
        raise ConformanceDataError(f"conformance data {path} is missing; it is part of the repo")
    return json.loads(path.read_text())


def hpa_vectors() -> list[tuple[str, dict[str, Any]]]:
    """(file stem, vector) for every HPA vector, after checking each file holds all of its vectors."""
    vectors = []
    for stem, expected in HPA_VECTOR_COUNTS.items():
        found = load_conformance(f"hpa/{stem}.json")["vectors"]
        if len(found) != expected:
            raise ConformanceDataError(f"hpa/{stem}.json holds {len(found)} vectors, expected {expected}")
        vectors.extend((stem, vector) for vector in found)
    return vectors


def controller_vectors() -> list[dict[str, Any]]:
    """Every controller-level vector, after checking each file holds all of its vectors."""
    vectors = []
    for stem, expected in CONTROLLER_VECTOR_COUNTS.items():
        found = load_conformance(f"hpa/{stem}.json")["vectors"]
        if len(found) != expected:
            raise ConformanceDataError(f"hpa/{stem}.json holds {len(found)} vectors, expected {expected}")
        vectors.extend(found)
    return vectors
