"""Clients for custom.metrics.k8s.io, external.metrics.k8s.io and metrics.k8s.io."""

from autoscaler.metrics.client import CUSTOM, EXTERNAL, RESOURCE, FetchLatency, MetricsClient

__all__ = ["CUSTOM", "EXTERNAL", "RESOURCE", "FetchLatency", "MetricsClient"]
