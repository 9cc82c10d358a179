"""Prometheus text (format 0.0.4) of a simulated node's two scrape endpoints: the kubelet's
`/metrics/resource` and node-exporter's `/metrics` (its CPU and memory series only).

The kubelet's series, HELP texts and label names are kubelet v1.32's; like the kubelet, usage samples
carry the time of the stats as an explicit timestamp (so Prometheus writes no staleness marker for
them: a gone pod's series fades after the lookback window, as in a real cluster). `scrape_error` is
left out: deprecated in 1.29, v1.32 hides it.
"""

from __future__ import annotations

from collections.abc import Iterable

from sim.workload.exposition import escape_label_value
from sim.workload.summary import NodeStats


def _labels(**labels: str) -> str:
    return ",".join(f'{k}="{escape_label_value(v)}"' for k, v in sorted(labels.items()))


def _family(name: str, kind: str, help_text: str, samples: Iterable[str]) -> list[str]:
    return [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", *samples]


def render_resource_metrics(stats: NodeStats) -> str:
    """The kubelet's `/metrics/resource` for one node; families in name order, as the kubelet sorts them."""
    at = f" {round(stats.time * 1000)}"
    containers = [
        (_labels(container=c.name, namespace=p.namespace, pod=p.name), c)
        for p in stats.pods
        for c in p.containers
    ]
    pods = [(_labels(namespace=p.namespace, pod=p.name), p) for p in stats.pods]
    lines = [
        *_family(
            "container_cpu_usage_seconds_total",
            "counter",
            "[STABLE] Cumulative cpu time consumed by the container in core-seconds",
            (f"container_cpu_usage_seconds_total{{{lab}}} {c.cpu_seconds!r}{at}" for lab, c in containers),
        ),
        *_family(
            "container_memory_working_set_bytes",
            "gauge",
            "[STABLE] Current working set of the container in bytes",
            (
                f"container_memory_working_set_bytes{{{lab}}} {c.usage.memory_bytes}{at}"
                for lab, c in containers
            ),
        ),
        *_family(
            "container_start_time_seconds",
            "gauge",
            "[STABLE] Start time of the container since unix epoch in seconds",
            (f"container_start_time_seconds{{{lab}}} {c.start_time!r}" for lab, c in containers),
        ),
        *_family(
            "node_cpu_usage_seconds_total",
            "counter",
            "[STABLE] Cumulative cpu time consumed by the node in core-seconds",
            [f"node_cpu_usage_seconds_total {stats.cpu_seconds!r}{at}"],
        ),
        *_family(
            "node_memory_working_set_bytes",
            "gauge",
            "[STABLE] Current working set of the node in bytes",
            [f"node_memory_working_set_bytes {stats.memory_bytes}{at}"],
        ),
        *_family(
            "pod_cpu_usage_seconds_total",
            "counter",
            "[STABLE] Cumulative cpu time consumed by the pod in core-seconds",
            (f"pod_cpu_usage_seconds_total{{{lab}}} {p.cpu_seconds!r}{at}" for lab, p in pods),
        ),
        *_family(
            "pod_memory_working_set_bytes",
            "gauge",
            "[STABLE] Current working set of the pod in bytes",
            (f"pod_memory_working_set_bytes{{{lab}}} {p.memory_bytes}{at}" for lab, p in pods),
        ),
        *_family(
            "resource_scrape_error",
            "gauge",
            "[STABLE] 1 if there was an error while getting container metrics, 0 otherwise",
            ["resource_scrape_error 0"],
        ),
    ]
    return "\n".join(lines) + "\n"


def render_node_exporter(stats: NodeStats) -> str:
    """node-exporter's CPU and memory series for one node: its CPU time split evenly over the cores
    (mode `user`, the rest `idle`; idle keeps growing while usage stays within the cores, which the
    load model does not enforce)."""
    cores = int(stats.capacity.cpu_cores)
    busy = stats.cpu_seconds / cores
    idle = (stats.time - stats.start_time) - busy
    total = stats.capacity.memory_bytes
    return (
        "\n".join(
            [
                *_family(
                    "node_cpu_seconds_total",
                    "counter",
                    "Seconds the CPUs spent in each mode.",
                    (
                        f"node_cpu_seconds_total{{{_labels(cpu=str(cpu), mode=mode)}}} {value!r}"
                        for cpu in range(cores)
                        for mode, value in (("idle", idle), ("user", busy))
                    ),
                ),
                *_family(
                    "node_memory_MemAvailable_bytes",
                    "gauge",
                    "Memory information field MemAvailable_bytes.",
                    [f"node_memory_MemAvailable_bytes {total - stats.memory_bytes}"],
                ),
                *_family(
                    "node_memory_MemTotal_bytes",
                    "gauge",
                    "Memory information field MemTotal_bytes.",
                    [f"node_memory_MemTotal_bytes {total}"],
                ),
            ]
        )
        + "\n"
    )
