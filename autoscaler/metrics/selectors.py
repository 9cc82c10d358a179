"""A metric spec's label selector -> the string Go's `LabelSelectorAsSelector(...).String()` prints.

A nil or empty selector prints as "" and the parameter is then left out (wire-contract §1.4).
"""

from __future__ import annotations

from autoscaler.codec import selector_json
from autoscaler.core.types import LabelSelector
from shared.selectors import Selector


def selector_string(selector: LabelSelector | None) -> str:
    return str(Selector.from_label_selector(selector_json(selector)))
