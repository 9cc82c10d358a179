"""Shadow mode end to end (autoscaler/shadow.py): the daemon, `--source=hpa`, beside an incumbent HPA on the
simulated API server with its audit log. Under load that should scale out, the shadow daemon decides the
rescale again and again, records and logs it as a shadow decision, and writes nothing: the Deployment's
replicas and the HPA's status stay the incumbent's, no Event is recorded, and the audit log holds no
request by the daemon's user other than get, list and watch. Its /metrics plots its decision beside the
incumbent's. Both ways in: the annotation on one HPA, and `--mode=shadow` for the whole daemon. A shadow
profile (autoscaler/shadow_profiles.py) is what a shadowed HPA is decided with."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from structlog.testing import capture_logs

from autoscaler.controller import Controller
from autoscaler.shadow_profiles import PROFILE_ANNOTATION
from autoscaler.sources import MODE_ANNOTATION, SYNC_PERIOD_ANNOTATION
from shared.clock import FakeClock
from shared.kube import KubeClient, Obj, load_access
from sim.apiserver import ApiServer, CertificateAuthority
from sim.runner import ServerThread
from tests.autoscaler.harness import (
    autoscaler_spec,
    daemon_get,
    events_of,
    replicas_of,
    running_controller,
    running_daemon,
    seed,
    workload,
)
from tests.autoscaler.helpers import advance, eventually, reconciles
from tests.autoscaler.metrics_backend import MetricsBackend
from tests.sim.test_apiserver_audit import events

KEY = ("default", "web")
HPA = "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers/web"
METRIC = ("default", "http_requests")
TARGET = 100.0
PODS = 2
SCALED_OUT = 3  # 150 per pod over 2 pods at a target of 100: ceil(1.5 x 2)
SHADOW_USER = "surge-shadow"
READS = {"get", "list", "watch"}
# The incumbent's status, as the built-in HPA controller left it (it holds the target at 2).
INCUMBENT_STATUS = {"currentReplicas": PODS, "desiredReplicas": PODS}
MERGE = "application/merge-patch+json"


@pytest.fixture
async def audited(
    apiserver_ca: CertificateAuthority, tmp_path: Path
) -> AsyncIterator[ServerThread[ApiServer]]:
    with ServerThread(ApiServer(ca=apiserver_ca, audit_log=tmp_path / "audit.log")) as api:
        yield api


def _hpa(annotated: bool) -> Obj:
    annotations = {SYNC_PERIOD_ANNOTATION: "1"}
    if annotated:
        annotations[MODE_ANNOTATION] = "shadow"
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web", "namespace": "default", "annotations": annotations},
        "spec": autoscaler_spec("web", "http_requests", f"{TARGET:g}"),
        "status": INCUMBENT_STATUS,
    }


def _by_shadow_user(log: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in log if e["user"]["username"] == SHADOW_USER]


@pytest.mark.parametrize("way", ["annotation", "daemon-wide"])
async def test_a_shadowed_hpa_is_decided_on_and_never_written(
    audited: ServerThread[ApiServer],
    backend: MetricsBackend,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    way: str,
) -> None:
    api = audited
    admin = KubeClient(await load_access(str(api.write_kubeconfig(tmp_path / "admin"))))
    pods = workload(api, "web", PODS)
    backend.pod_values[METRIC] = dict.fromkeys(pods, 1.5 * TARGET)  # a scale-out to SCALED_OUT is due
    seed(api, ("autoscaling", "horizontalpodautoscalers"), _hpa(annotated=way == "annotation"))
    seeded = await admin.get(HPA)
    kubeconfig = api.write_kubeconfig(tmp_path / "shadow", user=SHADOW_USER)
    flags = ["--sync-period=1s", *(["--mode=shadow"] if way == "daemon-wide" else [])]
    caplog.set_level(logging.INFO, logger="autoscaler.controller")  # the decision log line is INFO
    try:
        with capture_logs() as logs:
            async with running_daemon(kubeconfig, backend.url, source="hpa", flags=flags) as daemon:
                controller = daemon.controller

                def newest() -> dict[str, Any] | None:
                    records = controller.decisions.records_json(KEY)
                    return records[0] if records else None

                await eventually(lambda: (newest() or {}).get("desiredReplicas") == SCALED_OUT, within=20)
                first = controller.decisions.records_json(KEY)[-1]
                assert first["shadow"] is True and first["reason"].startswith(f"scale-up to {SCALED_OUT}")
                assert (first["currentReplicas"], first["desiredReplicas"]) == (PODS, SCALED_OUT)
                # Several reconciles more: as if it had acted (shadow.py's as_if_acted), the shadow is at
                # SCALED_OUT and holds there, though the target never moved.
                decided = reconciles(controller)
                await eventually(lambda: reconciles(controller) >= decided + 3, within=20)
                record = newest()
                assert record is not None
                assert record["shadow"] is True
                assert (record["currentReplicas"], record["desiredReplicas"]) == (SCALED_OUT, SCALED_OUT)
                assert record["reason"] == f"the metrics propose the current {SCALED_OUT} replicas"
                assert record["incumbent"] == {"currentReplicas": PODS, "desiredReplicas": PODS}

                # Nothing written: the target, the HPA (status and annotations) and the Events are as before.
                assert await replicas_of(admin, "web") == PODS
                hpa = await admin.get(HPA)
                assert hpa["status"] == seeded["status"]
                assert hpa["metadata"]["annotations"] == seeded["metadata"]["annotations"]
                assert hpa["metadata"]["resourceVersion"] == seeded["metadata"]["resourceVersion"]
                assert await events_of(admin, "web") == []
                run = _by_shadow_user(events(tmp_path / "audit.log"))
                # The daemon's reads are here (a watch is logged once it ends: ResponseComplete).
                assert {e["verb"] for e in run} >= {"list", "get"}
                assert [e for e in run if e["verb"] not in READS] == []

                status, text = await daemon_get(daemon, "/metrics")
                assert status == 200
    finally:
        await admin.close()

    shadow_lines = [e for e in logs if e["event"] == "decision" and e["key"] == "default/web"]
    assert len(shadow_lines) >= 3
    assert all(e["shadow"] is True for e in shadow_lines)
    assert shadow_lines[0]["result"] == "rescaled" and shadow_lines[0]["proposal"] == SCALED_OUT
    assert all(e["result"] != "rescaled" and e["proposal"] == SCALED_OUT for e in shadow_lines[1:])

    series = {
        f.name: {s.labels.get("name"): s.value for s in f.samples}
        for f in text_string_to_metric_families(text)
    }
    assert series["surge_shadow_desired_replicas"] == {"web": SCALED_OUT}
    assert series["surge_incumbent_current_replicas"] == {"web": PODS}
    assert series["surge_incumbent_desired_replicas"] == {"web": PODS}

    # The scrape itself was authenticated and authorized by delegation: reviews, which store nothing,
    # are the only requests other than reads the daemon's user ever made.
    writes = [e for e in _by_shadow_user(events(tmp_path / "audit.log")) if e["verb"] not in READS]
    assert {(e["verb"], e["objectRef"]["resource"]) for e in writes} <= {
        ("create", "tokenreviews"),
        ("create", "subjectaccessreviews"),
    }


def _profiled_hpa(name: str, profile: str | None) -> Obj:
    annotations = {MODE_ANNOTATION: "shadow"} | ({PROFILE_ANNOTATION: profile} if profile else {})
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name, "namespace": "default", "annotations": annotations},
        "spec": autoscaler_spec(name, "http_requests", f"{TARGET:g}"),
        "status": INCUMBENT_STATUS,
    }


def _decided_at(controller: Controller, name: str) -> str | None:
    records = controller.decisions.records_json(("default", name))
    return str(records[0]["time"]) if records else None


async def test_a_shadow_profile_is_what_the_shadow_decides_with(
    apiserver: ServerThread[ApiServer], kubeconfig_path: Path, backend: MetricsBackend, fake_clock: FakeClock
) -> None:
    """autoscaling.surge.dev/shadow-profile: fast (autoscaler/shadow_profiles.py) makes the shadowed HPA's
    sync period 1 s: a second on the daemon's clock reconciles it again, and not its neighbour without a
    profile (the daemon's 15 s). An unknown profile is logged once, and the object decided on as it is."""
    for name, profile in (("web", "fast"), ("api", None), ("odd", "turbo")):
        backend.pod_values[METRIC] = {
            **backend.pod_values.get(METRIC, {}),
            **dict.fromkeys(workload(apiserver, name, PODS), TARGET),
        }
        seed(apiserver, ("autoscaling", "horizontalpodautoscalers"), _profiled_hpa(name, profile))
    with capture_logs() as logs:
        async with running_controller(
            kubeconfig_path, backend.url, source="hpa", clock=fake_clock
        ) as controller:
            await eventually(
                lambda: all(_decided_at(controller, n) for n in ("web", "api", "odd")), within=10
            )
            first = {name: _decided_at(controller, name) for name in ("web", "api", "odd")}
            await advance(fake_clock, controller, 1)
            assert _decided_at(controller, "web") != first["web"]
            assert _decided_at(controller, "api") == first["api"]
            # The incumbent writes the status (a new resourceVersion, the same generation): no second warning.
            admin = KubeClient(await load_access(str(kubeconfig_path)))
            try:
                path = "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers/odd/status"
                status = {"desiredReplicas": PODS + 1}
                await admin.request("PATCH", path, body={"status": status}, content_type=MERGE)
            finally:
                await admin.close()

            def seen() -> bool:
                cached = controller.autoscalers.store.get("default", "odd") or {}
                return bool((cached.get("status") or {}).get("desiredReplicas") == PODS + 1)

            await eventually(seen, within=10)
            await advance(fake_clock, controller, 15, reconciled=3)
            assert _decided_at(controller, "odd") != first["odd"]
    warnings = [e for e in logs if e["event"] == "shadow profile not applied"]
    assert [(e["key"], e["log_level"]) for e in warnings] == [("default/odd", "warning")]
    assert "unknown profile 'turbo'" in warnings[0]["error"]


async def test_a_shadow_holds_what_it_decided_as_if_it_had_acted(
    apiserver: ServerThread[ApiServer],
    kubeconfig_path: Path,
    backend: MetricsBackend,
    fake_clock: FakeClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The shadow's next decision starts from the replicas it decided, not from the target's (which the
    incumbent keeps at 2): under the fast profile's 1000 %/1 s policy, taking the target's 2 as current
    while counting its own scale-up of +3 in the policy's period made the period start at -1, so the shadow
    fell back to 2 ("scale-up limited by policy") a second after each scale-up, then rose again: flaps
    that no acting Surge would make."""
    load = 2.3 * TARGET  # per pod, over the 2 pods: ceil(2.3 x 2) = 5
    backend.pod_values[METRIC] = dict.fromkeys(workload(apiserver, "web", PODS), load)
    seed(apiserver, ("autoscaling", "horizontalpodautoscalers"), _profiled_hpa("web", "fast"))
    caplog.set_level(logging.INFO, logger="autoscaler.controller")  # the decision log line is INFO
    with capture_logs() as logs:
        async with running_controller(
            kubeconfig_path, backend.url, source="hpa", clock=fake_clock
        ) as controller:
            await eventually(lambda: _decided_at(controller, "web") is not None, within=10)
            for _ in range(4):
                await advance(fake_clock, controller, 1)
    decided = [(e["current"], e["proposal"], e["result"]) for e in logs if e["event"] == "decision"]
    assert len(decided) >= 5
    assert decided[0] == (PODS, 5, "rescaled")
    assert set(decided[1:]) == {(5, 5, "unchanged")}
