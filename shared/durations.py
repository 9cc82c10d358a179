"""Go's `time.ParseDuration` (flags, `metav1.Duration` fields such as metrics-server's `window`).

Prometheus durations (`5m`, `1d`, `2w`: no fractions, days and weeks) are a different grammar; the
adapter's config parses those itself.
"""

from __future__ import annotations

import re
from decimal import Decimal

# ASCII digits only: Python's \d also takes other scripts' digits, which Go refuses.
_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {
    "ns": Decimal("1e-9"),
    "us": Decimal("1e-6"),
    "µs": Decimal("1e-6"),
    "ms": Decimal("1e-3"),
    "s": Decimal(1),
    "m": Decimal(60),
    "h": Decimal(3600),
}


def parse_go_duration(text: str) -> float:
    """Seconds in a Go duration string (`1m`, `1h30m`, `500ms`, `-1s`, `0`); raises ValueError otherwise."""
    body = text[1:] if text[:1] in "+-" else text
    if body == "0":
        return 0.0
    if not body:
        raise ValueError(f"invalid duration {text!r}")
    position = 0
    # Decimal so that `1.1s` plus `100ms` parts add up without float drift.
    total = Decimal(0)
    while position < len(body):
        match = _DURATION_PART.match(body, position)
        if match is None:
            raise ValueError(f"invalid duration {text!r}")
        total += Decimal(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        position = match.end()
    return float(-total if text.startswith("-") else total)
