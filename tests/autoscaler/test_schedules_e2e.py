"""Scheduled minimums live: the daemon against the simulated API server, on a FakeClock whose wall time is
set just before a whole minute, so a cron expression for that minute opens a window a known time ahead."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from autoscaler.controller import Controller
from autoscaler.sources import SCHEDULES_ANNOTATION, SYNC_PERIOD_ANNOTATION
from shared.clock import FakeClock
from shared.kube import KubeClient
from sim.runner import ServerThread
from tests.autoscaler.harness import (
    autoscaler_spec,
    condition,
    create_hza,
    events_of,
    install_crd,
    replicas_of,
    running_controller,
    workload,
)
from tests.autoscaler.helpers import advance, eventually, reconciles
from tests.autoscaler.metrics_backend import MetricsBackend

HZA = "/apis/autoscaling.surge.dev/v1alpha1/namespaces/default/horizontalautoscalers"
HPAS = "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers"
PERIOD = 10
OPENS = 5.0  # seconds after the controller's first reconcile
DURATION = 58  # the window closes at 63 s, between two periods (55 and 65 s)
HOLD = 30  # the scale-down stabilization window


def _opening_minute(clock: FakeClock) -> datetime:
    """Move the clock's wall time to OPENS seconds before a whole minute, and return that minute."""
    wall = clock.wall()
    minute = (wall + timedelta(seconds=OPENS + 60)).replace(second=0, microsecond=0)
    clock.advance((minute - wall).total_seconds() - OPENS)
    return minute


async def _at(clock: FakeClock, controller: Controller, start: float, offset: float) -> None:
    """Advance to `offset` seconds after `start` and wait for the one reconcile due then. A hair past the
    due time: the timers' times are sums of floats."""
    await advance(clock, controller, start + offset + 0.001 - clock.now())


async def test_a_window_raises_the_replicas_at_its_opening_and_its_end_lets_them_fall_after_the_hold(
    kube: KubeClient,
    apiserver: ServerThread,
    kubeconfig_path: Path,
    backend: MetricsBackend,
    fake_clock: FakeClock,
) -> None:
    await install_crd(kube)
    pods = workload(apiserver, "web", 2)
    backend.pod_values[("default", "http_requests")] = dict.fromkeys(pods, 60.0)  # the metrics want 2
    minute = _opening_minute(fake_clock)
    cron = f"{minute.minute} {minute.hour} * * *"
    schedule = {"cron": cron, "durationSeconds": DURATION, "minReplicas": 10}
    spec = autoscaler_spec(
        "web",
        "http_requests",
        "100",
        syncPeriodSeconds=PERIOD,
        behavior={"scaleDown": {"stabilizationWindowSeconds": HOLD}},
        schedules=[schedule],
    )
    await create_hza(kube, "web", spec)
    named = f"schedule {schedule['cron']} UTC"
    async with running_controller(kubeconfig_path, backend.url, clock=fake_clock) as controller:
        await eventually(lambda: reconciles(controller) == 1)
        start = fake_clock.now()
        assert await replicas_of(kube, "web") == 2
        # The window opens between two periods: the daemon reconciles at its opening.
        await _at(fake_clock, controller, start, OPENS)
        assert await replicas_of(kube, "web") == 10
        rescales = [e["message"] for e in await events_of(kube, "web") if e["reason"] == "SuccessfulRescale"]
        reason = f"Current number of replicas below the minReplicas of {named}"
        assert rescales == [f"New size: 10; reason: {reason}"]
        record = controller.decisions.records_json(("default", "web"))[0]  # type: ignore[index]
        assert record["reason"] == f"raised to 10 by {named}"
        assert record["schedule"] == {**schedule, "timeZone": None}  # UTC
        # Inside the window the metrics (still wanting 2) are overruled every period.
        for offset in range(15, int(OPENS) + DURATION, PERIOD):
            await _at(fake_clock, controller, start, offset)
            assert await replicas_of(kube, "web") == 10
        # It closes at 63 s, between two periods: reconciled then, the count held by the scale-down
        # window (the floor was the proposal until 55 s), then at 93 s (55 + HOLD passed) down to 2.
        held = f"held by scale-down stabilization window (max of last {HOLD} s = 10)"
        for offset, replicas, reason in (
            (OPENS + DURATION, 10, held),
            (73, 10, held),
            (83, 10, held),
            (93, 2, "scale-down to 2: all metrics below target (ratio 0.60)"),
        ):
            await _at(fake_clock, controller, start, offset)
            assert await replicas_of(kube, "web") == replicas, offset
            record = controller.decisions.records_json(("default", "web"))[0]  # type: ignore[index]
            assert (record["reason"], record["schedule"]) == (reason, None), offset


@pytest.mark.parametrize(
    ("source", "field", "problem"),
    [
        ("crd", "spec.schedules[0].timeZone", 'unknown time zone "Mars/Olympus_Mons"'),
        (
            "hpa",
            f"metadata.annotations[{SCHEDULES_ANNOTATION}][0].cron",
            '"0 25 * * *" is not a cron expression: bad hour field',
        ),
    ],
)
async def test_an_invalid_schedule_is_reported_once_and_never_acted_on(
    kube: KubeClient,
    apiserver: ServerThread,
    kubeconfig_path: Path,
    backend: MetricsBackend,
    fake_clock: FakeClock,
    source: str,
    field: str,
    problem: str,
) -> None:
    """What no CRD rule can check (the zone exists, the expression parses): the daemon's own validation."""
    pods = workload(apiserver, "web", 2)
    backend.pod_values[("default", "http_requests")] = dict.fromkeys(pods, 150.0)
    spec = autoscaler_spec("web", "http_requests", "100")
    schedule: dict[str, Any] = {"cron": "0 8 * * *", "durationSeconds": 60, "minReplicas": 5}
    if source == "crd":
        await install_crd(kube)
        schedule["timeZone"] = "Mars/Olympus_Mons"  # shaped like an IANA name: the CRD lets it through
        await create_hza(kube, "web", {**spec, "syncPeriodSeconds": 1, "schedules": [schedule]})
        path = f"{HZA}/web"
    else:
        schedule["cron"] = "0 25 * * *"
        annotations = {SYNC_PERIOD_ANNOTATION: "1", SCHEDULES_ANNOTATION: json.dumps([schedule])}
        metadata = {"name": "web", "namespace": "default", "annotations": annotations}
        body = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": metadata}
        await kube.request("POST", HPAS, body={**body, "spec": spec})
        path = f"{HPAS}/web"
    async with running_controller(
        kubeconfig_path, backend.url, source=source, clock=fake_clock
    ) as controller:
        await eventually(lambda: reconciles(controller) == 1)
        for _ in range(2):  # more periods: still one event
            await advance(fake_clock, controller, 1.0)
        obj = await kube.get(path)
    active = condition(obj, "ScalingActive")
    assert active is not None and (active["status"], active["reason"]) == ("False", "InvalidSpec")
    assert active["message"].startswith(f"the HPA spec is invalid: {field}: {problem}")
    warnings = [e for e in await events_of(kube, "web") if e["reason"] == "InvalidSpec"]
    assert len(warnings) == 1 and warnings[0]["type"] == "Warning" and warnings[0].get("count", 1) == 1
    assert await replicas_of(kube, "web") == 2  # no scale write, although 150/100 asks for 3
    assert backend.requests == []
