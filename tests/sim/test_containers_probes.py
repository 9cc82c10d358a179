"""Probe logic of the simulated kubelet on a fake clock: thresholds, timing, the order of results,
CrashLoopBackOff delays, and the pod status written from container states; plus the checks themselves
(HTTP, HTTPS without verification, TCP, exec) against local servers."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator

import aiohttp
import pytest
import trustme
from aiohttp import web

from sim.apiserver.resources import Obj
from sim.workload.containers import probes
from sim.workload.containers.checks import container_port, make_check, ports_to_publish
from sim.workload.containers.probes import ProbeSpec, restart_delay
from sim.workload.containers.state import ContainerState, Terminated
from sim.workload.containers.status import pod_status


class FakeClock:
    """`sleep` advances `now` at once; the checks' outcomes come from a script."""

    def __init__(self, outcomes: list[bool]) -> None:
        self.now = 0.0
        self.outcomes = outcomes
        self.checked_at: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.now += seconds

    async def check(self) -> bool:
        self.checked_at.append(self.now)
        return self.outcomes.pop(0)


async def collect(result: probes.ProbeResult, clock: FakeClock, count: int) -> list[tuple[float, bool]]:
    """The first `count` result changes, each with when it happened."""
    seen = []
    async for passing in probes.changes(result, clock.check, clock.sleep):
        seen.append((clock.now, passing))
        if len(seen) == count:
            break
    return seen


def test_probe_spec_defaults_and_fields() -> None:
    assert ProbeSpec.of({"tcpSocket": {"port": 80}}) == ProbeSpec({"tcpSocket": {"port": 80}}, 0, 10, 1, 1, 3)
    spec = ProbeSpec.of(
        {
            "initialDelaySeconds": 5,
            "periodSeconds": 2,
            "timeoutSeconds": 3,
            "successThreshold": 2,
            "failureThreshold": 4,
        }
    )
    assert (spec.initial_delay_seconds, spec.period_seconds, spec.timeout_seconds) == (5, 2, 3)
    assert (spec.success_threshold, spec.failure_threshold) == (2, 4)


async def test_readiness_needs_success_threshold_and_fails_after_failure_threshold() -> None:
    spec = ProbeSpec({}, initial_delay_seconds=5, period_seconds=2, success_threshold=2, failure_threshold=2)
    clock = FakeClock([True, False, True, True, False, True, False, False])
    changes = await collect(probes.readiness(spec), clock, 2)
    # Checks at 5, 7, 9, 11, ...: ready after two successes in a row, unready after two failures.
    assert changes == [(11.0, True), (19.0, False)]
    assert clock.checked_at == [5.0, 7.0, 9.0, 11.0, 13.0, 15.0, 17.0, 19.0]


async def test_liveness_starts_passing_and_fails_after_failure_threshold() -> None:
    clock = FakeClock([True, False, False, True, False, False, False])
    changes = await collect(probes.liveness(ProbeSpec({}, period_seconds=1)), clock, 1)
    assert changes == [(6.0, False)]


async def test_startup_reports_its_first_result() -> None:
    passed = await collect(
        probes.startup(ProbeSpec({}, period_seconds=1, failure_threshold=3)), FakeClock([False, True]), 1
    )
    assert passed == [(1.0, True)]
    failed = await collect(probes.startup(ProbeSpec({}, period_seconds=1)), FakeClock([False] * 3), 1)
    assert failed == [(2.0, False)]


@pytest.mark.parametrize(
    ("restarts", "ran", "delay"),
    [(0, 1, 0), (1, 1, 10), (2, 1, 20), (3, 1, 40), (5, 1, 160), (6, 1, 300), (20, 1, 300), (4, 600, 0)],
)
def test_crash_loop_back_off(restarts: int, ran: float, delay: float) -> None:
    assert restart_delay(restarts, ran) == delay


def test_ports_published_for_a_container_include_probe_ports() -> None:
    container = {
        "ports": [{"name": "http", "containerPort": 8080}, {"containerPort": 53, "protocol": "UDP"}],
        "readinessProbe": {"httpGet": {"port": "http"}},
        "livenessProbe": {"tcpSocket": {"port": 8081}},
        "startupProbe": {"exec": {"command": ["true"]}},
    }
    assert ports_to_publish(container) == [8080, 8081]
    assert container_port(container, "http") == 8080 and container_port(container, "9090") == 9090
    assert container_port(container, "nope") is None


def test_pod_status_from_container_states() -> None:
    running = ContainerState(
        "app", "surge:1", "sha256:ab", "c2", running_since=100.0, started=True, ready=True
    )
    running.restart_count = 1
    running.last_terminated = Terminated("c1", 137, 10.0, 90.0)
    backing_off = ContainerState(
        "side", "side:1", waiting_reason="CrashLoopBackOff", waiting_message="back-off 10s"
    )
    pod: Obj = {"metadata": {"name": "p"}, "status": {"phase": "Pending"}}
    status = pod_status(pod, [running, backing_off], 100.0, "10.0.0.11", "10.244.1.2")
    assert status["phase"] == "Running" and status["podIP"] == "10.244.1.2"
    app, side = status["containerStatuses"]
    assert app == {
        "name": "app",
        "image": "surge:1",
        "imageID": "sha256:ab",
        "restartCount": 1,
        "started": True,
        "ready": True,
        "containerID": "podman://c2",
        "state": {"running": {"startedAt": "1970-01-01T00:01:40Z"}},
        "lastState": {
            "terminated": {
                "exitCode": 137,
                "reason": "Error",
                "startedAt": "1970-01-01T00:00:10Z",
                "finishedAt": "1970-01-01T00:01:30Z",
                "containerID": "podman://c1",
            }
        },
    }
    assert side["state"] == {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 10s"}}
    conditions = {c["type"]: c["status"] for c in status["conditions"]}
    assert conditions["Ready"] == conditions["ContainersReady"] == "False"
    backing_off.ready = True
    again = pod_status({**pod, "status": status}, [running, backing_off], 200.0, "10.0.0.11", "10.244.1.2")
    ready = next(c for c in again["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True" and ready["lastTransitionTime"] == "1970-01-01T00:03:20Z"


def test_a_pod_whose_containers_never_ran_is_pending() -> None:
    status = pod_status(
        {"metadata": {}}, [ContainerState("app", "x", waiting_reason="ErrImagePull")], 1.0, "h", "p"
    )
    assert status["phase"] == "Pending"


# ---- the checks themselves ---------------------------------------------------------------------


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as client:
        yield client


async def serve(app: web.Application, context: ssl.SSLContext | None = None) -> tuple[web.AppRunner, int]:
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    return runner, runner.addresses[0][1]


async def health(request: web.Request) -> web.Response:
    if request.headers.get("X-Probe") != "yes":
        return web.Response(status=503)
    return web.Response(text="ok")


async def test_http_and_https_checks(session: aiohttp.ClientSession) -> None:
    app = web.Application()
    app.router.add_get("/healthz", health)
    ca = trustme.CA()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    plain, plain_port = await serve(app)
    secure, secure_port = await serve(app, context)
    container = {"name": "app", "ports": [{"name": "http", "containerPort": 80}]}
    host_ports = {80: plain_port, 443: secure_port}
    try:

        def check(action: Obj) -> probes.Check:
            return make_check(ProbeSpec(action), container, host_ports, _no_exec, session)

        header = [{"name": "X-Probe", "value": "yes"}]
        assert await check({"httpGet": {"path": "/healthz", "port": "http", "httpHeaders": header}})()
        assert not await check({"httpGet": {"path": "/healthz", "port": "http"}})()  # 503
        assert await check(
            {"httpGet": {"path": "/healthz", "port": 443, "scheme": "HTTPS", "httpHeaders": header}}
        )()
        assert await check({"tcpSocket": {"port": 80}})()
        assert not await check({"tcpSocket": {"port": 9999}})()  # not published
    finally:
        await plain.cleanup()
        await secure.cleanup()
    assert not await check({"tcpSocket": {"port": 80}})()  # nothing listens any more


async def _no_exec(command: list[str]) -> int:
    raise AssertionError("no exec expected")


async def test_exec_check_and_its_timeout(session: aiohttp.ClientSession) -> None:
    async def exec_in(command: list[str]) -> int:
        if command == ["sleep"]:
            await asyncio.sleep(5)
        return 0 if command == ["true"] else 1

    def check(command: list[str]) -> probes.Check:
        spec = ProbeSpec({"exec": {"command": command}}, timeout_seconds=0.05)
        return make_check(spec, {"name": "app"}, {}, exec_in, session)

    assert await check(["true"])()
    assert not await check(["false"])()
    assert not await check(["sleep"])()
