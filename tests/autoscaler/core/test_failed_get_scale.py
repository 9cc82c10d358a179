"""FailedGetScale: the exact texts of the event, the AbleToScale condition and the returned error.

Upstream (pkg/controller/podautoscaler/horizontal.go, reconcileAutoscaler) records `err.Error()` as the
event, "the HPA controller was unable to get the target's current scale: %v" as the condition, and returns
"failed to query scale subresource for %s: %v" with the Kind/namespace/name reference: the prefix
appears once, in the returned error only.
"""

from __future__ import annotations

from autoscaler.core import History, scale_unavailable

from . import builders as b

NOT_FOUND = 'deployments.apps "web" not found'  # the Status message of the 404 on .../deployments/web/scale


def test_messages_carry_the_error_once_and_the_prefix_only_in_the_returned_error() -> None:
    decision = scale_unavailable(b.hpa(metrics=(b.cpu_utilization(50),)), History(), NOT_FOUND, b.T0)
    assert [(e.type, e.reason, e.message) for e in decision.events] == [
        ("Warning", "FailedGetScale", 'deployments.apps "web" not found')
    ]
    [able] = [c for c in decision.status.conditions if c.type == "AbleToScale"]
    assert (able.status, able.reason, able.message) == (
        "False",
        "FailedGetScale",
        'the HPA controller was unable to get the target\'s current scale: deployments.apps "web" not found',
    )
    assert decision.error == (
        'failed to query scale subresource for Deployment/default/web: deployments.apps "web" not found'
    )
