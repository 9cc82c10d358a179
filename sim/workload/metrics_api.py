"""`metrics.k8s.io/v1beta1` (what metrics-server serves) answered from the load model, natively by the
simulated API server: `kubectl top` and the HPA's resource metrics read the same model Prometheus does.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from sim.apiserver.errors import ApiError, route_not_found
from sim.apiserver.resources import Obj
from sim.apiserver.selection import Selection
from sim.apiserver.store import Store
from sim.workload.kubelet import NODES, PODS, Kubelet
from sim.workload.resource_metrics import GROUP, metrics_list, node_metrics, pod_metrics


def _not_found(plural: str, name: str) -> ApiError:
    return ApiError(
        404,
        "NotFound",
        f'{plural}.{GROUP} "{name}" not found',
        {"name": name, "group": GROUP, "kind": plural},
    )


class ResourceMetricsApi:
    """Answers GETs below `/apis/metrics.k8s.io/v1beta1/`; call on the API server's loop thread."""

    def __init__(self, store: Store, kubelet: Kubelet, clock: Callable[[], float] = time.time) -> None:
        self._store = store
        self._kubelet = kubelet
        self._clock = clock

    def get(self, path: str, label_selector: str | None = None) -> Obj:
        """The body for `path` (relative to the group-version, e.g. `namespaces/ns/pods`), or ApiError."""
        parts = [p for p in path.split("/") if p]
        now = self._clock()
        match parts:
            case ["pods"]:
                return self._pod_list(None, label_selector, now)
            case ["namespaces", namespace, "pods"]:
                return self._pod_list(namespace, label_selector, now)
            case ["namespaces", namespace, "pods", name]:
                # Only running pods have metrics, as with metrics-server (nothing to scrape before).
                usage = self._kubelet.pod_usage(namespace, name, now)
                if usage is None:
                    raise _not_found("podmetrics", f"{namespace}/{name}")
                return pod_metrics(self._store.get_ref(PODS, namespace, name), usage, now)
            case ["nodes"]:
                nodes = self._store.select(NODES, Selection(None, label_selector))
                return metrics_list("NodeMetricsList", [self._node(n, now) for n in nodes])
            case ["nodes", name]:
                try:
                    node = self._store.get_ref(NODES, None, name)
                except ApiError:
                    raise _not_found("nodemetrics", name) from None
                return self._node(node, now)
        raise route_not_found()

    def _pod_list(self, namespace: str | None, label_selector: str | None, now: float) -> Obj:
        items = []
        for pod in self._store.select(PODS, Selection(namespace, label_selector)):
            usage = self._kubelet.pod_usage(pod["metadata"]["namespace"], pod["metadata"]["name"], now)
            if usage is not None:  # pods not running yet are left out
                items.append(pod_metrics(pod, usage, now))
        return metrics_list("PodMetricsList", items)

    def _node(self, node: Obj, now: float) -> Obj:
        return node_metrics(node, self._kubelet.node_usage(node["metadata"]["name"], now), now)
