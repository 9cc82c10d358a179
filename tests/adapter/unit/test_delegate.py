"""The multiplexer's parts: the delegate flags, merged discovery lists, routing, and list refreshes against a
small real delegate on loopback (its answers set by the test), on a fake clock."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import CollectorRegistry

from adapter.delegate.listing import Listing, SurgeMetrics, clashes, custom_entries, merged_custom
from adapter.delegate.middleware import discovery_list_of, make_delegate_middleware, metric_of
from adapter.delegate.options import (
    DelegateOptions,
    DelegateSpec,
    add_delegate_flags,
    delegate_options_from_namespace,
    parse_delegate_spec,
)
from adapter.delegate.router import MISS_REFRESH_SPACING, Router, build_router
from adapter.flags import build_parser
from adapter.naming.resources import (
    BUILTIN_RESOURCES,
    GroupResource,
    ResourceMapper,
    StaticResourceMapper,
)
from adapter.registry import CustomMetricInfo
from adapter.server.app import render_errors
from adapter.server.status import CUSTOM_GROUP, EXTERNAL_GROUP, StatusError, not_found
from shared.clock import FakeClock

BOTH = frozenset({CUSTOM_GROUP, EXTERNAL_GROUP})


# -- flags ------------------------------------------------------------------------------------------


def test_a_delegate_is_a_url_with_optional_groups_and_fallback() -> None:
    assert parse_delegate_spec("https://keda.keda.svc:443") == DelegateSpec("https://keda.keda.svc:443", BOTH)
    assert parse_delegate_spec("http://x:8080/prefix;groups=external;fallback") == DelegateSpec(
        "http://x:8080/prefix", frozenset({EXTERNAL_GROUP}), fallback=True
    )
    assert parse_delegate_spec("http://x; groups=custom,external").groups == BOTH
    for bad, message in (
        ("ftp://x", "URL"),
        ("http://x;groups=resource", "groups"),
        ("http://x;groups=", "groups"),
        ("http://x;fallback=yes", "unknown parameter"),
    ):
        with pytest.raises(ValueError, match=message):
            parse_delegate_spec(bad)


def _options(*argv: str) -> DelegateOptions:
    return delegate_options_from_namespace(build_parser((add_delegate_flags,)).parse_args(list(argv)))


def test_delegate_flags_repeat_and_are_checked() -> None:
    options = _options(
        "--delegate-url=https://a",
        "--delegate-url=https://b;groups=external;fallback",
        "--delegate-timeout=2s",
    )
    assert [d.url for d in options.delegates] == ["https://a", "https://b"]
    assert options.timeout == 2.0 and options.refresh_interval == 60.0
    with pytest.raises(ValueError, match=r"more than one fallback for external\.metrics\.k8s\.io"):
        _options("--delegate-url=https://a;fallback", "--delegate-url=https://b;groups=external;fallback")
    with pytest.raises(ValueError, match="given together"):
        _options("--delegate-url=https://a", "--delegate-client-tls-cert-file=c.pem")
    with pytest.raises(SystemExit):
        _options("--delegate-url=https://a;groups=metrics")


# -- lists ------------------------------------------------------------------------------------------


def test_custom_lists_are_read_and_merged_with_surge_first() -> None:
    document = {
        "kind": "APIResourceList",
        "resources": [
            {"name": "pods/rps", "namespaced": True},
            {"name": "namespaces/rps", "namespaced": False},
            {"name": "pods"},  # no metric: not a metric entry
        ],
    }
    delegate = Listing(custom_entries(document), frozenset({"queue"}))
    assert delegate.custom == {("pods", "rps", True), ("namespaces", "rps", False)}
    surge = [("pods", "rps", True), ("pods", "cpu", True)]
    assert merged_custom(surge, [delegate]) == [*surge, ("namespaces", "rps", False)]
    own = SurgeMetrics(frozenset({("pods", "rps")}), frozenset({"queue", "other"}))
    assert clashes(own, delegate) == ["custom pods/rps", "external queue"]


def test_paths_name_the_metric_read_or_the_list() -> None:
    assert metric_of("/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/pods/*/rps") == (
        CUSTOM_GROUP,
        "pods",
        "rps",
    )
    assert metric_of("/apis/custom.metrics.k8s.io/v1beta1/namespaces/ns/metrics/rps") == (
        CUSTOM_GROUP,
        "namespaces",
        "rps",
    )
    assert metric_of("/apis/external.metrics.k8s.io/v1beta1/namespaces/ns/queue") == (
        EXTERNAL_GROUP,
        "",
        "queue",
    )
    assert metric_of("/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns") is None  # malformed: Surge's 400
    assert metric_of("/apis/metrics.k8s.io/v1beta1/namespaces/ns/pods") is None
    # A version Surge does not serve is not a metric read, whatever the delegates list: Surge's 404.
    assert metric_of("/apis/external.metrics.k8s.io/v9/namespaces/ns/queue") is None
    assert metric_of("/apis/custom.metrics.k8s.io/v1/namespaces/ns/pods/*/rps") is None
    assert discovery_list_of("/apis/custom.metrics.k8s.io/v1beta1/") == (CUSTOM_GROUP, "v1beta1")
    assert discovery_list_of("/apis/external.metrics.k8s.io/v1beta1") == (EXTERNAL_GROUP, "v1beta1")
    assert discovery_list_of("/apis/external.metrics.k8s.io/v2") is None


# -- routing and refreshes against a real delegate --------------------------------------------------


@dataclass
class SurgeLists:
    custom: list[CustomMetricInfo] = field(default_factory=list)
    external: list[str] = field(default_factory=list)
    mapper: ResourceMapper = field(default_factory=lambda: StaticResourceMapper(BUILTIN_RESOURCES))

    def custom_metrics(self) -> Sequence[CustomMetricInfo]:
        return self.custom

    def external_metrics(self) -> Sequence[str]:
        return self.external


@dataclass
class FakeDelegate:
    """A metrics server on loopback whose lists (and discovery status) the test sets; with `release`
    set, discovery answers only once it is (`held` tells that a discovery read is waiting)."""

    custom: list[str] = field(default_factory=list)
    external: list[str] = field(default_factory=list)
    discovery_status: int = 200
    reads: list[str] = field(default_factory=list)
    url: str = ""
    release: asyncio.Event | None = None
    held: asyncio.Event = field(default_factory=asyncio.Event)

    async def handle(self, request: web.Request) -> web.Response:
        if request.path.count("/") > 3:
            self.reads.append(request.raw_path)
            return web.json_response({"kind": "ExternalMetricValueList", "items": [], "from": "delegate"})
        self.reads.append(request.path)
        if self.release is not None:
            self.held.set()
            await self.release.wait()
        names = self.external if "external" in request.path else self.custom
        document = {"kind": "APIResourceList", "resources": [{"name": n, "namespaced": True} for n in names]}
        return web.Response(status=self.discovery_status, text=json.dumps(document))


StartDelegate = Callable[[], Awaitable[tuple[FakeDelegate, web.AppRunner]]]


@pytest.fixture
async def start_delegate() -> AsyncIterator[StartDelegate]:
    runners: list[web.AppRunner] = []

    async def start() -> tuple[FakeDelegate, web.AppRunner]:
        delegate = FakeDelegate()
        app = web.Application()
        app.router.add_get("/{tail:.*}", delegate.handle)
        runner = web.AppRunner(app)
        await runner.setup()
        runners.append(runner)
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        delegate.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
        return delegate, runner

    yield start
    for runner in runners:
        await runner.cleanup()


@pytest.fixture
async def fake_delegate(start_delegate: StartDelegate) -> tuple[FakeDelegate, web.AppRunner]:
    return await start_delegate()


def _router(specs: list[DelegateSpec], surge: SurgeLists, clock: FakeClock) -> Router:
    options = DelegateOptions(tuple(specs), timeout=2.0)
    return build_router(options, lambda: surge, CollectorRegistry(), "test", clock)


async def test_routing_refresh_on_miss_and_an_unreachable_delegate(
    fake_delegate: tuple[FakeDelegate, web.AppRunner],
) -> None:
    server, runner = fake_delegate
    server.custom, server.external = ["pods/rps", "pods/cpu"], ["queue"]
    surge = SurgeLists([CustomMetricInfo(GroupResource("", "pods"), "cpu", True)], ["mine"])
    clock = FakeClock()
    router = _router([DelegateSpec(server.url, BOTH)], surge, clock)
    try:
        await router.refresh()
        (delegate,) = router.delegates
        assert router.owner(CUSTOM_GROUP, "pods", "rps") is delegate
        assert router.owner(CUSTOM_GROUP, "pods", "cpu") is None  # Surge serves it: Surge wins
        # A client may name the resource in any form discovery knows: the lists' form is matched.
        assert [router.canonical(r) for r in ("pod", "Pod", "deployment", "deployments.apps")] == [
            "pods",
            "pods",
            "deployments.apps",
            "deployments.apps",
        ]
        assert router.canonical("widgets") == "widgets"  # unknown: as written
        assert router.owner(CUSTOM_GROUP, router.canonical("pod"), "rps") is delegate
        assert router.owner(EXTERNAL_GROUP, "", "queue") is delegate
        assert router.owner(EXTERNAL_GROUP, "", "later") is None
        assert router.fallback(EXTERNAL_GROUP) is None

        # A metric that appears on the delegate is found on the next miss after the spacing, not sooner.
        server.external.append("later")
        clock.advance(MISS_REFRESH_SPACING - 0.1)
        assert not await router.refresh_after_miss()
        assert router.owner(EXTERNAL_GROUP, "", "later") is None
        clock.advance(0.1)
        assert await router.refresh_after_miss()
        assert router.owner(EXTERNAL_GROUP, "", "later") is delegate

        answer = await router.forward(
            delegate, "/apis/external.metrics.k8s.io/v1beta1/namespaces/n/later?x=%2A", "later"
        )
        assert answer.status == 200 and json.loads(answer.body)["kind"] == "ExternalMetricValueList"
        assert answer.content_type.startswith(b"application/json")  # passed on as the delegate said
        assert server.reads[-1] == "/apis/external.metrics.k8s.io/v1beta1/namespaces/n/later?x=%2A"  # as sent

        # A delegate that fails its discovery keeps its last lists; gone, its metrics get 503.
        server.discovery_status = 503
        await router.refresh()
        assert delegate.up is False and router.owner(EXTERNAL_GROUP, "", "later") is delegate
        # A miss does not wait for a delegate that is down (the periodic refresh retries it).
        server.discovery_status, reads = 200, len(server.reads)
        clock.advance(MISS_REFRESH_SPACING)
        assert await router.refresh_after_miss()
        assert len(server.reads) == reads and delegate.up is False
        await router.refresh()
        assert delegate.up is True
        await runner.cleanup()
        with pytest.raises(StatusError) as raised:
            await router.forward(
                delegate, "/apis/external.metrics.k8s.io/v1beta1/namespaces/n/later", "later"
            )
        assert raised.value.code == 503 and "later" in raised.value.message
    finally:
        await router.close()


async def test_a_periodic_refresh_during_a_miss_refresh_still_reads_the_delegates_down(
    start_delegate: StartDelegate,
) -> None:
    (up_server, _), (down_server, _) = await start_delegate(), await start_delegate()
    up_server.external, down_server.external = ["a"], ["b"]
    down_server.discovery_status = 503
    clock = FakeClock()
    router = _router(
        [DelegateSpec(s.url, frozenset({EXTERNAL_GROUP})) for s in (up_server, down_server)],
        SurgeLists(),
        clock,
    )
    try:
        await router.refresh()
        up, down = router.delegates
        assert up.up is True and down.up is False
        down_server.discovery_status = 200  # back, but a miss's refresh skips it

        up_server.release = asyncio.Event()
        clock.advance(MISS_REFRESH_SPACING)
        miss = asyncio.create_task(router.refresh_after_miss())
        await asyncio.wait_for(up_server.held.wait(), 5)
        periodic = asyncio.create_task(router.refresh())  # what run() calls each interval
        await asyncio.sleep(0)
        assert not periodic.done()
        up_server.release.set()
        assert await asyncio.wait_for(miss, 5)
        await asyncio.wait_for(periodic, 5)
        assert down.up is True and router.owner(EXTERNAL_GROUP, "", "b") is down
        assert down_server.reads.count("/apis/external.metrics.k8s.io/v1beta1") == 2
    finally:
        await router.close()


async def test_groups_limit_what_is_read_and_routed(
    fake_delegate: tuple[FakeDelegate, web.AppRunner],
) -> None:
    server, _ = fake_delegate
    server.custom, server.external = ["pods/rps"], ["externalmetrics"]  # KEDA's placeholder
    router = _router(
        [DelegateSpec(server.url, frozenset({EXTERNAL_GROUP}), fallback=True)], SurgeLists(), FakeClock()
    )
    try:
        await router.refresh()
        assert server.reads == ["/apis/external.metrics.k8s.io/v1beta1"]
        assert router.owner(CUSTOM_GROUP, "pods", "rps") is None
        assert router.fallback(CUSTOM_GROUP) is None
        assert router.fallback(EXTERNAL_GROUP) is router.delegates[0]
    finally:
        await router.close()


async def test_the_middleware_merges_lists_forwards_and_falls_back(
    fake_delegate: tuple[FakeDelegate, web.AppRunner],
) -> None:
    server, _ = fake_delegate
    server.external = ["listed"]
    surge = SurgeLists(external=["mine", "mine_but_absent"])
    router = _router(
        [DelegateSpec(server.url, frozenset({EXTERNAL_GROUP}), fallback=True)], surge, FakeClock()
    )

    async def surge_handler(request: web.Request) -> web.Response:
        if request.match_info["metric"] == "mine":
            return web.json_response({"kind": "ExternalMetricValueList", "from": "surge"})
        raise not_found(f"no {request.match_info['metric']}")

    app = web.Application(middlewares=[render_errors, make_delegate_middleware(router)])
    app.router.add_get("/apis/external.metrics.k8s.io/v1beta1/namespaces/{ns}/{metric}", surge_handler)
    async with TestClient(TestServer(app)) as client:
        try:
            await router.refresh()
            server.reads.clear()
            listed = await (await client.get("/apis/external.metrics.k8s.io/v1beta1/")).json()
            assert [r["name"] for r in listed["resources"]] == ["listed", "mine", "mine_but_absent"]

            reads = {}
            for metric in ("mine", "listed", "unlisted", "mine_but_absent"):
                response = await client.get(f"/apis/external.metrics.k8s.io/v1beta1/namespaces/n/{metric}")
                reads[metric] = (response.status, (await response.json()).get("from", "a Status"))
            assert reads == {
                "mine": (200, "surge"),
                "listed": (200, "delegate"),  # listed by the delegate: forwarded
                "unlisted": (200, "delegate"),  # Surge's 404, nobody lists it: the fallback's answer
                "mine_but_absent": (404, "a Status"),  # Surge's metric: Surge's own 404 stays
            }
            # A read over burst mode's window is Surge's alone: one a delegate would get is a 400.
            listed_path = "/apis/external.metrics.k8s.io/v1beta1/namespaces/n/listed"
            response = await client.get(f"{listed_path}?labelSelector=surge.dev%2Fwindow%3D6s")
            refused = await response.json()
            assert (response.status, refused["reason"]) == (400, "BadRequest"), refused
            assert refused["message"].startswith("surge.dev/window: the metric listed is served by another")
            # A value that merely mentions it is no window requirement.
            mention = f"{listed_path}?labelSelector=a%3Dsurge.dev%2Fwindow"
            assert (await client.get(mention)).status == 200
            # A version Surge does not serve is Surge's 404 even for a metric the delegate lists.
            response = await client.get("/apis/external.metrics.k8s.io/v9/namespaces/n/listed")
            assert response.status == 404 and (await response.json())["kind"] == "Status"
            assert server.reads == [
                "/apis/external.metrics.k8s.io/v1beta1/namespaces/n/listed",
                "/apis/external.metrics.k8s.io/v1beta1/namespaces/n/unlisted",
                f"{listed_path}?labelSelector=a%3Dsurge.dev/window",  # as the test client sent it
            ]
        finally:
            await router.close()
