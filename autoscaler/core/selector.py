"""validateAndParseSelector (horizontal.go): the scale's selector is present, parses, and no other
autoscaler in the namespace selects the same pods.

``validate_selector`` raises ``SelectorProblem`` with the event and the ScalingActive condition upstream
reports for each case.
"""

from __future__ import annotations

from autoscaler.core.types import Pod
from shared.selectors import parse_selector


class SelectorProblem(Exception):
    """Why the selector cannot be used: the event's reason and message, the condition's."""

    def __init__(
        self, event_reason: str, event_message: str, condition_reason: str, condition_message: str
    ) -> None:
        super().__init__(event_message)
        self.event_reason = event_reason
        self.event_message = event_message
        self.condition_reason = condition_reason
        self.condition_message = condition_message


def validate_selector(
    hpa_key: str, selector: str, pods: tuple[Pod, ...], other_selectors: dict[str, str]
) -> None:
    """validateAndParseSelector: raise ``SelectorProblem`` if the selector is missing, bad or ambiguous."""
    if not selector:
        raise SelectorProblem(
            "SelectorRequired",
            "selector is required",
            "InvalidSelector",
            "the HPA target's scale is missing a selector",
        )
    try:
        parse_selector(selector)
    except ValueError as err:
        message = f"couldn't convert selector into a corresponding internal selector object: {err}"
        raise SelectorProblem("InvalidSelector", message, "InvalidSelector", message) from None
    if not pods:
        return
    selecting = {hpa_key}
    for key, other in other_selectors.items():
        if key == hpa_key:
            continue
        try:
            other_selector = parse_selector(other)
        except ValueError:
            continue  # an autoscaler with a broken selector selects nothing
        if any(other_selector.matches(pod.labels) for pod in pods):
            selecting.add(key)
    if len(selecting) > 1:
        message = (
            f"pods by selector {selector} are controlled by multiple HPAs: [{' '.join(sorted(selecting))}]"
        )
        raise SelectorProblem("AmbiguousSelector", message, "AmbiguousSelector", message)
