"""Writes, counted at the simulated API server: the status only when it changed, `/scale` only when the
decision changes replicas. Steady metrics over several 1 s sync periods must cause no further writes.

The controller runs on a `FakeClock`: each period passes when the test advances it, and the counts are
read once the reconcile it triggered has finished (writes included).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from autoscaler.controller import Controller
from shared.clock import FakeClock
from shared.kube import KubeClient, Obj
from sim.apiserver.faults import Fault
from sim.runner import ServerThread
from tests.autoscaler.harness import (
    autoscaler_spec,
    condition,
    create_hza,
    install_crd,
    replicas_of,
    running_controller,
    workload,
)
from tests.autoscaler.helpers import advance, eventually, reconciles, until
from tests.autoscaler.metrics_backend import MetricsBackend

HZA = "/apis/autoscaling.surge.dev/v1alpha1/namespaces/default/horizontalautoscalers"
HZA_GR = ("autoscaling.surge.dev", "horizontalautoscalers")
DEPLOYMENTS = ("apps", "deployments")
METRIC = ("default", "http_requests")
PERIODS = 3


@dataclass
class WriteCounter:
    """Write requests (PUT/PATCH, whether or not they change anything) by path, through request-matching
    no-op faults, and committed MODIFIED events per (group-resource, name) from a store listener."""

    requests: dict[str, list[Fault]] = field(default_factory=dict)
    modified: dict[tuple[tuple[str, str], str], int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def listen(self, event_type: str, gr: tuple[str, str], obj: Obj) -> None:
        if event_type != "MODIFIED":
            return
        key = (gr, obj["metadata"]["name"])
        with self._lock:  # the listener runs on the server's thread
            self.modified[key] = self.modified.get(key, 0) + 1

    def writes(self, path: str) -> int:
        return sum(f.hits for f in self.requests[path])

    def commits(self, gr: tuple[str, str], name: str) -> int:
        with self._lock:
            return self.modified.get((gr, name), 0)

    def counts(self) -> tuple[int, ...]:
        return (
            self.writes("scale"),
            self.writes("status"),
            self.writes("object"),
            self.commits(DEPLOYMENTS, "web"),
            self.commits(HZA_GR, "web"),
        )


@pytest.fixture
def counter(apiserver: ServerThread) -> Iterator[WriteCounter]:
    counting = WriteCounter()
    faults = apiserver.server.faults
    paths = {
        "scale": r"/deployments/web/scale$",
        "status": r"/horizontalautoscalers/web/status$",
        "object": r"/horizontalautoscalers/web$",
    }

    def install() -> None:
        for name, path in paths.items():
            # No latency and no error: a fault that only counts the requests it matches.
            counting.requests[name] = [faults.add(path, method=m) for m in ("PUT", "PATCH", "POST")]

    apiserver.call(install)
    remove = apiserver.call(lambda: apiserver.server.store.add_listener(counting.listen))
    yield counting
    apiserver.call(remove)


async def _reason(kube: KubeClient, type_: str) -> str | None:
    found = condition(await kube.get(f"{HZA}/web"), type_)
    return None if found is None else str(found["reason"])


async def _steady_for_periods(clock: FakeClock, controller: Controller, backend: MetricsBackend) -> None:
    """Let PERIODS more 1 s sync periods pass, each with its reconcile (and its one metrics fetch)."""
    seen = len(backend.requests)
    for _ in range(PERIODS):
        await advance(clock, controller, 1.0)
    assert len(backend.requests) == seen + PERIODS


async def test_at_target_one_status_write_and_no_scale_write(
    kube: KubeClient,
    apiserver: ServerThread,
    kubeconfig_path: Path,
    backend: MetricsBackend,
    counter: WriteCounter,
    fake_clock: FakeClock,
) -> None:
    await install_crd(kube)
    pods = workload(apiserver, "web", 2)
    backend.pod_values[METRIC] = dict.fromkeys(pods, 100.0)
    await create_hza(kube, "web", autoscaler_spec("web", "http_requests", "100", syncPeriodSeconds=1))
    async with running_controller(kubeconfig_path, backend.url, clock=fake_clock) as controller:
        await until(lambda: _reason(kube, "ScalingActive"), "ValidMetricFound")
        await eventually(lambda: reconciles(controller) == 1)
        first = counter.counts()
        await _steady_for_periods(fake_clock, controller, backend)
        assert counter.counts() == first
    scale_writes, status_writes, object_writes, deployment_commits, hza_commits = first
    assert (scale_writes, deployment_commits) == (0, 0)
    assert object_writes == 0
    # The first decision wrote the status once; every later one found it unchanged.
    assert status_writes == 1 and hza_commits == 1
    assert await replicas_of(kube, "web") == 2


async def test_scale_is_written_once_per_replica_change_and_status_only_on_change(
    kube: KubeClient,
    apiserver: ServerThread,
    kubeconfig_path: Path,
    backend: MetricsBackend,
    counter: WriteCounter,
    fake_clock: FakeClock,
) -> None:
    await install_crd(kube)
    pods = workload(apiserver, "web", 2)
    backend.pod_values[METRIC] = dict.fromkeys(pods, 150.0)  # 2 pods at 1.5x the target: 3 replicas
    await create_hza(kube, "web", autoscaler_spec("web", "http_requests", "100", syncPeriodSeconds=1))
    async with running_controller(kubeconfig_path, backend.url, clock=fake_clock) as controller:
        await eventually(lambda: reconciles(controller) == 1)
        assert await replicas_of(kube, "web") == 3
        # The first steady decision, a period later: the count matches the recommendation.
        await advance(fake_clock, controller, 1.0)
        assert await _reason(kube, "AbleToScale") == "ReadyForNewScale"
        steady = counter.counts()
        await _steady_for_periods(fake_clock, controller, backend)
        assert counter.counts() == steady
        assert counter.writes("scale") == 1 and counter.commits(DEPLOYMENTS, "web") == 1

        # A new load: one more scale write at the next period, then quiet again.
        backend.pod_values[METRIC] = dict.fromkeys(pods, 250.0)  # 2 pods at 2.5x: 5 replicas
        await advance(fake_clock, controller, 1.0)
        assert await replicas_of(kube, "web") == 5
        await advance(fake_clock, controller, 1.0)
        assert await _reason(kube, "AbleToScale") == "ReadyForNewScale"
        steady = counter.counts()
        await _steady_for_periods(fake_clock, controller, backend)
        assert counter.counts() == steady
    assert counter.writes("scale") == 2 and counter.commits(DEPLOYMENTS, "web") == 2
    assert counter.writes("object") == 0
    # Each status write changed the stored object (a no-op write commits nothing).
    assert counter.writes("status") == counter.commits(HZA_GR, "web") >= 2
