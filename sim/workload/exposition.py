"""Prometheus text exposition (format 0.0.4) of one simulated pod's metrics."""

from __future__ import annotations

from sim.workload.model import PodSample

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def escape_label_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def render_pod_metrics(sample: PodSample, container: str) -> str:
    """The pod's own series; Prometheus adds `namespace`/`pod` from the file_sd target labels."""
    c = escape_label_value(container)
    lines = [
        "# HELP http_requests_total HTTP requests answered by the pod, by status code.",
        "# TYPE http_requests_total counter",
        f'http_requests_total{{code="200"}} {sample.served!r}',
        f'http_requests_total{{code="503"}} {sample.rejected!r}',
        "# HELP http_requests_in_flight HTTP requests being served right now.",
        "# TYPE http_requests_in_flight gauge",
        f"http_requests_in_flight {sample.in_flight!r}",
        "# HELP container_cpu_usage_seconds_total Cumulative CPU time consumed by the container.",
        "# TYPE container_cpu_usage_seconds_total counter",
        f'container_cpu_usage_seconds_total{{container="{c}"}} {sample.cpu_seconds!r}',
        "# HELP container_memory_working_set_bytes Current working set of the container.",
        "# TYPE container_memory_working_set_bytes gauge",
        f'container_memory_working_set_bytes{{container="{c}"}} {sample.memory_bytes}',
    ]
    return "\n".join(lines) + "\n"
