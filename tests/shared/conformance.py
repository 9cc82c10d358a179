"""Access to the conformance data beside the checkout (../shared), shared by this folder's tests."""

import json
from pathlib import Path
from typing import Any

SHARED_DIR = Path(__file__).resolve().parents[2].parent / "shared"


def load_conformance(relative: str) -> Any:
    return json.loads((SHARED_DIR / "conformance" / relative).read_text())
