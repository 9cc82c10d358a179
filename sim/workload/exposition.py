"""Prometheus text exposition (format 0.0.4) of one simulated pod's own metrics."""

from __future__ import annotations

from sim.workload.model import PodSample

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def escape_label_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def render_pod_metrics(sample: PodSample) -> str:
    """The pod's own series; Prometheus adds `namespace`/`pod` from the file_sd target labels. Its
    containers' CPU and memory come from its node's kubelet (node_exposition), as in a real cluster."""
    lines = [
        "# HELP http_requests_total HTTP requests answered by the pod, by status code.",
        "# TYPE http_requests_total counter",
        f'http_requests_total{{code="200"}} {sample.served!r}',
        f'http_requests_total{{code="503"}} {sample.rejected!r}',
        "# HELP http_requests_in_flight HTTP requests being served right now.",
        "# TYPE http_requests_in_flight gauge",
        f"http_requests_in_flight {sample.in_flight!r}",
    ]
    return "\n".join(lines) + "\n"
