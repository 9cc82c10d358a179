"""The HPA controller's decision logic as a pure core: plain functions on plain data, no I/O.

``decide(snapshot) -> Decision`` is the entry point (see docs/algorithm.md): reconcile.py runs it as a
sequence of stages, each a module of its own (pass_start, pause, range_gate, selector, metrics_read,
proposal, normalize_stage, cooldown, conclusion; their outcome types in decision). The lower-level steps
live in their own modules too: grouping, requests, utilization, replica_calculator, metric_compute,
normalization, defaults, conditions. ``kube_json`` builds the data from Kubernetes JSON objects and writes
the status back.
"""

from autoscaler.core.decision import Decision, scale_unavailable
from autoscaler.core.defaults import effective_metrics
from autoscaler.core.metrics_read import tolerances_for
from autoscaler.core.reconcile import decide
from autoscaler.core.types import (
    HPA,
    ControllerConfig,
    Event,
    FeatureGates,
    History,
    HPASpec,
    HPAStatus,
    Scale,
    Snapshot,
)

__all__ = [
    "HPA",
    "ControllerConfig",
    "Decision",
    "Event",
    "FeatureGates",
    "HPASpec",
    "HPAStatus",
    "History",
    "Scale",
    "Snapshot",
    "decide",
    "effective_metrics",
    "scale_unavailable",
    "tolerances_for",
]
