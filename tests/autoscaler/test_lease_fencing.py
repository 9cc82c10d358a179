"""Write fencing on the leader's lease, on a FakeClock: a write asks the LeaseGuard right before it is sent,
after its wait in the client's rate limiter and again before a re-send after a 409; a renewal counts from
when it was sent, so a leader paused (or answered late) past its renew deadline writes nothing until a
renewal sent after the pause succeeds; a lease seen held by another stops writes at once.

The simulated API server is real (its store is what was written); only time is fake.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from autoscaler.leader import LeaderElector, LeaseConfig, LeaseGuard, write_kind
from autoscaler.scale import update_replicas
from shared.cli import surge_version
from shared.clock import FakeClock
from shared.kube import KubeClient, Obj, WriteDropped, load_access, user_agent
from sim.apiserver import ApiServer, CertificateAuthority
from sim.runner import ServerThread
from tests.autoscaler.harness import deployment, install_crd, running_daemon, seed
from tests.autoscaler.helpers import eventually
from tests.autoscaler.metrics_backend import MetricsBackend
from tests.sim.test_apiserver_audit import events

RENEW = 2.0
SCALE = "/apis/apps/v1/namespaces/default/deployments/web/scale"
DEPLOYMENTS = ("apps", "deployments")
LEASES = ("coordination.k8s.io", "leases")
LEASE = LeaseConfig("default", "surge", "me", lease_duration=3.0, renew_deadline=RENEW, retry_period=0.5)


class Drops:
    """The guard's on_dropped: the kinds of the writes it refused."""

    def __init__(self) -> None:
        self.kinds: list[str] = []

    def __call__(self, kind: str) -> None:
        self.kinds.append(kind)


def replicas(apiserver: ServerThread[ApiServer]) -> int:
    return int(
        apiserver.call(lambda: apiserver.server.store.get(DEPLOYMENTS, "default", "web"))["spec"]["replicas"]
    )


@pytest.fixture
async def throttled(kubeconfig_path: Path, fake_clock: FakeClock) -> AsyncIterator[KubeClient]:
    """A client allowed 1 request a second (burst 1) on the fake clock."""
    client = KubeClient(await load_access(str(kubeconfig_path)), qps=1.0, burst=1, clock=fake_clock)
    yield client
    await client.close()


async def sleeping(clock: FakeClock) -> None:
    """Wait until something sleeps on the fake clock (a request waiting in the rate limiter)."""
    await eventually(lambda: clock.next_deadline() is not None)


def test_the_guard_admits_only_within_the_renew_deadline_of_the_renewal_sent() -> None:
    clock = FakeClock()
    drops = Drops()
    guard = LeaseGuard("surge", RENEW, clock, on_dropped=drops)
    assert not guard.admit("PUT", SCALE)  # never renewed
    clock.advance(10.0)
    guard.renewed(sent_at=9.5)
    assert guard.holds() and guard.admit("PUT", SCALE)
    clock.advance(1.49)
    assert guard.admit("PATCH", "/apis/x/v1/namespaces/d/hzas/web/status")
    clock.advance(0.01)  # 2.0 s after the renewal was sent
    assert not guard.holds()
    assert not guard.admit("PATCH", "/apis/x/v1/namespaces/d/hzas/web/status")
    guard.renewed(sent_at=clock.now())
    assert guard.admit("POST", "/api/v1/namespaces/d/events")
    guard.lost()
    assert not guard.admit("POST", "/api/v1/namespaces/d/events")
    assert drops.kinds == ["scale", "status", "event"]


def test_write_kinds() -> None:
    assert write_kind("/api/v1/namespaces/d/events/web.abc") == "event"
    assert write_kind("/apis/apps/v1/namespaces/d/deployments/web") == "other"


@pytest.mark.parametrize(("waited", "written"), [(1.0, True), (RENEW + 0.5, False)])
async def test_a_write_that_waited_in_the_rate_limiter_past_the_deadline_is_dropped(
    apiserver: ServerThread[ApiServer],
    throttled: KubeClient,
    fake_clock: FakeClock,
    waited: float,
    written: bool,
) -> None:
    """The lease is renewed at 0; the scale write's turn in the limiter comes at 1 s. If the loop only
    gets to it at `waited` (a busy or paused process), it goes out only while within the deadline."""
    seed(apiserver, DEPLOYMENTS, deployment("web", 2))
    scale = await throttled.get(SCALE)  # takes the one token
    drops = Drops()
    guard = LeaseGuard("surge", RENEW, fake_clock, on_dropped=drops)
    guard.renewed(sent_at=0.0)
    assert guard.holds()  # when the write is decided
    write = asyncio.create_task(update_replicas(throttled, SCALE, scale, 5, guard))
    await sleeping(fake_clock)
    fake_clock.advance(waited)
    if written:
        await write
        assert replicas(apiserver) == 5 and drops.kinds == []
    else:
        with pytest.raises(WriteDropped):
            await write
        assert replicas(apiserver) == 2 and drops.kinds == ["scale"]


async def test_a_re_send_after_a_conflict_asks_the_lease_again(
    apiserver: ServerThread[ApiServer], throttled: KubeClient, fake_clock: FakeClock, kube: KubeClient
) -> None:
    """The first PUT (at 0, within the deadline) meets a 409; the re-read's turn comes at 1 s, the re-send's
    at 2 s, past the 2 s renew deadline: dropped, and the scale keeps what the other writer wrote."""
    seed(apiserver, DEPLOYMENTS, deployment("web", 2))
    stale = await kube.get(SCALE)
    await kube.request("PUT", SCALE, body={**stale, "spec": {"replicas": 7}})  # someone else writes
    drops = Drops()
    guard = LeaseGuard("surge", RENEW, fake_clock, on_dropped=drops)
    guard.renewed(sent_at=0.0)
    write = asyncio.create_task(update_replicas(throttled, SCALE, stale, 5, guard))
    await sleeping(fake_clock)  # the 409 came back; the re-read waits for its turn
    fake_clock.advance(1.0)
    await eventually(lambda: (fake_clock.next_deadline() or 0) > 1.0)  # the re-send waits for its turn
    fake_clock.advance(1.0)
    with pytest.raises(WriteDropped):
        await write
    assert replicas(apiserver) == 7 and drops.kinds == ["scale"]


@pytest.fixture
async def elector(kube: KubeClient, fake_clock: FakeClock) -> AsyncIterator[tuple[LeaderElector, Drops]]:
    """An elector of LEASE on the fake clock, running, with the lease acquired at time 0."""
    drops = Drops()
    guard = LeaseGuard(LEASE.name, LEASE.renew_deadline, fake_clock, on_dropped=drops)
    running = LeaderElector(kube, LEASE, guard, clock=fake_clock)
    task = asyncio.create_task(running.run())
    await eventually(guard.holds)
    yield running, drops
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


def holder_time(apiserver: ServerThread[ApiServer]) -> str:
    lease: Obj = apiserver.call(lambda: apiserver.server.store.get(LEASES, "default", "surge"))
    return str(lease["spec"]["renewTime"])


async def renew(apiserver: ServerThread[ApiServer], clock: FakeClock) -> None:
    """Let the elector's retry period pass and wait until its renewal is stored."""
    before = holder_time(apiserver)
    await eventually(lambda: clock.next_deadline() is not None)
    clock.advance(LEASE.retry_period)
    await eventually(lambda: holder_time(apiserver) != before)


async def test_a_resumed_leader_writes_nothing_until_it_renewed(
    apiserver: ServerThread[ApiServer], elector: tuple[LeaderElector, Drops], fake_clock: FakeClock
) -> None:
    """A pause (SIGSTOP) longer than the renew deadline: on resuming, the first thing that runs may be a
    write; it is refused. Once the elector has renewed (nobody took over meanwhile), writes go out again."""
    running, drops = elector
    guard = running.guard
    await renew(apiserver, fake_clock)
    await eventually(lambda: fake_clock.next_deadline() is not None)  # the elector sleeps again
    fake_clock.advance(RENEW + 3.0)  # the pause: the elector's timer is long due, nothing ran yet
    assert not guard.admit("PUT", SCALE)
    await eventually(guard.holds)  # its renewal, sent after the pause
    assert guard.admit("PUT", SCALE)
    assert drops.kinds == ["scale"]


async def test_a_renewal_answered_past_the_deadline_does_not_count(
    apiserver: ServerThread[ApiServer], elector: tuple[LeaderElector, Drops], fake_clock: FakeClock
) -> None:
    """The renewal reaches the server, then the process is paused before it reads the answer. The answer
    it reads on resuming proves nothing about now: a standby may have taken over meanwhile."""
    running, _ = elector
    delayed = apiserver.call(lambda: apiserver.server.faults.add("/leases/surge$", method="PUT", latency=30))
    await eventually(lambda: fake_clock.next_deadline() is not None)
    fake_clock.advance(LEASE.retry_period)  # the renewal is sent at 0.5 s ...
    await eventually(lambda: delayed.hits == 1)
    fake_clock.advance(RENEW)  # ... and answered (below) at 2.5 s
    apiserver.call(lambda: apiserver.server.faults.remove(delayed))
    await eventually(lambda: fake_clock.next_deadline() is not None)  # the answer came; it sleeps again
    assert running.guard.renewed_at == 0.5
    assert not running.guard.holds()


async def test_a_lease_seen_held_by_another_stops_writes_at_once(
    apiserver: ServerThread[ApiServer], elector: tuple[LeaderElector, Drops], fake_clock: FakeClock
) -> None:
    running, _ = elector
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    patch = {"spec": {"holderIdentity": "other", "renewTime": now, "acquireTime": now}}
    apiserver.call(lambda: apiserver.server.store.patch(LEASES, "default", "surge", patch))
    await eventually(lambda: fake_clock.next_deadline() is not None)
    fake_clock.advance(LEASE.retry_period)  # 0.5 s after the last renewal: well within the deadline
    await eventually(lambda: not running.guard.holds())
    assert not running.guard.admit("PATCH", "/apis/x/v1/namespaces/default/hzas/web/status")


async def test_renewals_do_not_wait_behind_the_reconcile_clients_rate_limiter(
    apiserver_ca: CertificateAuthority, backend: MetricsBackend, tmp_path: Path
) -> None:
    """The daemon with --qps 4 and ~10 s of requests queued in its reconcile client's rate limiter: the
    elector's own client still renews every retry period (through one shared limiter, a renewal would
    wait out the backlog, past the renew deadline). Each client names the replica in its User-Agent; the
    elector's adds /leader-election, as client-go's leader-election client does."""
    audit = tmp_path / "audit.log"
    with ServerThread(ApiServer(ca=apiserver_ca, audit_log=audit)) as api:
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
        admin = KubeClient(await load_access(str(kubeconfig)))
        await install_crd(admin)
        await admin.close()
        flags = [
            "--leader-elect",
            "--leader-elect-identity=me",
            "--leader-elect-resource-namespace=default",
            "--leader-elect-lease-duration=3s",
            "--leader-elect-renew-deadline=2s",
            "--leader-elect-retry-period=0.5s",
            "--qps=4",
            "--burst=1",
        ]
        async with running_daemon(kubeconfig, backend.url, flags=flags) as daemon:
            assert daemon.elector is not None
            await eventually(daemon.elector.guard.holds, within=10)
            backlog = [asyncio.create_task(daemon.kube.get("/version")) for _ in range(40)]
            renewals = set()

            def renewed_three_times() -> bool:
                lease = api.call(lambda: api.server.store.get(LEASES, "default", "surge-autoscaler"))
                renewals.add(lease["spec"]["renewTime"])
                return len(renewals) > 3  # the renewal seen first, and three behind the backlog

            # Three retry periods: about 1.5 s, when the limiter has let about 7 of the 40 through.
            await eventually(renewed_three_times, within=10, poll=0.1)
            assert sum(not t.done() for t in backlog) > 20  # the reconcile client is still backed up
            assert daemon.elector.guard.holds()
            for task in backlog:
                task.cancel()
            await asyncio.gather(*backlog, return_exceptions=True)
    agents = {(e.get("objectRef", {}).get("resource", ""), e["userAgent"]) for e in events(audit)}
    mine = user_agent("surge-autoscaler", surge_version(), "me")
    assert ("leases", mine + "/leader-election") in agents and ("", mine) in agents
    assert {agent for resource, agent in agents if resource == "leases"} <= {
        mine + "/leader-election",
        "surge",
    }
