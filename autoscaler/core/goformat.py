"""Go's text forms that leak into upstream messages (``%+v`` of a *metav1.LabelSelector)."""

from __future__ import annotations

from autoscaler.core.types import LabelSelector


def label_selector_go_string(selector: LabelSelector | None) -> str:
    """The generated ``String()`` of a ``*metav1.LabelSelector``, e.g. in external metric names."""
    if selector is None:
        return "nil"
    labels = "".join(f"{k}: {v}," for k, v in sorted(selector.match_labels.items()))
    expressions = "".join(
        f"LabelSelectorRequirement{{Key:{r.key},Operator:{r.operator},Values:[{' '.join(r.values)}],}},"
        for r in selector.match_expressions
    )
    return (
        f"&LabelSelector{{MatchLabels:map[string]string{{{labels}}},"
        f"MatchExpressions:[]LabelSelectorRequirement{{{expressions}}},}}"
    )
