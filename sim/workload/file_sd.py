"""Prometheus file_sd target groups for the simulated pods and nodes, written atomically.

Every target is on the one metrics server and differs by `__metrics_path__`. A node's targets carry
the labels Prometheus' kubernetes_sd relabelling gives them in a real cluster (kube-prometheus-stack):
`job` (`kubelet` or `node-exporter`; a target's own `job` label wins over the scrape job's name), `node`,
and `metrics_path` on the kubelet's. Pods' targets keep the scrape job's name.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Group = dict[str, Any]
KUBELET_JOB = "kubelet"
NODE_EXPORTER_JOB = "node-exporter"


@dataclass(frozen=True, order=True)
class PodTarget:
    namespace: str
    pod: str


def metrics_path(namespace: str, pod: str) -> str:
    return f"/pods/{namespace}/{pod}/metrics"


def resource_metrics_path(node: str) -> str:
    return f"/nodes/{node}/metrics/resource"


def node_exporter_path(node: str) -> str:
    return f"/nodes/{node}/node-exporter/metrics"


def target_groups(address: str, pods: Iterable[PodTarget]) -> list[Group]:
    """One group per pod: they share one address and differ by `__metrics_path__`."""
    return [
        {
            "targets": [address],
            "labels": {
                "__metrics_path__": metrics_path(p.namespace, p.pod),
                "namespace": p.namespace,
                "pod": p.pod,
            },
        }
        for p in sorted(pods)
    ]


def node_target_groups(address: str, nodes: Iterable[str]) -> list[Group]:
    """Two groups per node: its kubelet's `/metrics/resource` and its node-exporter."""
    groups: list[Group] = []
    for node in sorted(nodes):
        groups.append(
            {
                "targets": [address],
                "labels": {
                    "__metrics_path__": resource_metrics_path(node),
                    "job": KUBELET_JOB,
                    "metrics_path": "/metrics/resource",
                    "node": node,
                },
            }
        )
        groups.append(
            {
                "targets": [address],
                "labels": {
                    "__metrics_path__": node_exporter_path(node),
                    "job": NODE_EXPORTER_JOB,
                    "node": node,
                },
            }
        )
    return groups


def write_atomically(path: Path, groups: list[Group]) -> None:
    """Prometheus may read at any moment: write a sibling file, then rename it over the target."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(groups, f, indent=1)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class FileSdWriter:
    """Keeps `path` listing the current target groups; `changed()` coalesces bursts into one write per
    loop turn."""

    def __init__(self, path: Path, groups: Callable[[], list[Group]]) -> None:
        self.path = Path(path)
        self._groups = groups
        self._pending: asyncio.Handle | None = None

    def write_now(self) -> None:
        self._pending = None
        write_atomically(self.path, self._groups())

    def changed(self) -> None:
        if self._pending is None:
            self._pending = asyncio.get_running_loop().call_soon(self.write_now)

    def close(self) -> None:
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None
