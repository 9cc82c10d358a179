"""A metric spec's label selector -> the string Go's `LabelSelectorAsSelector(...).String()` prints.

A nil or empty selector prints as "" and the parameter is then left out, as client-go's parameter codec
omits empty `labelSelector`/`metricLabelSelector` values.
"""

from __future__ import annotations

from typing import Any

from autoscaler.core.types import LabelSelector
from shared.metricwindow import WINDOW_LABEL
from shared.selectors import Selector


def selector_string(selector: LabelSelector | None) -> str:
    if selector is None:
        return ""
    as_json: dict[str, Any] = {
        "matchLabels": dict(selector.match_labels),
        "matchExpressions": [
            {"key": r.key, "operator": r.operator, "values": list(r.values)}
            for r in selector.match_expressions
        ],
    }
    return str(Selector.from_label_selector(as_json))


def windowed_selector(selector: LabelSelector | None, window: str | None) -> str:
    """The metric selector's string, asking the adapter for the metric over `window` (a Go duration) when
    given: burst mode's short-window read (core/burst.py, adapter/window.py)."""
    text = selector_string(selector)
    if window is None:
        return text
    return f"{text},{WINDOW_LABEL}={window}" if text else f"{WINDOW_LABEL}={window}"
