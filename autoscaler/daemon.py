"""Wiring of the whole autoscaler: cluster access, caches, metrics clients, work queue, leader election,
and the endpoints of its port: /metrics (with the per-target series), health, and the decision records at
/debug/decisions/<namespace>/<name>. The port is served as kube components serve theirs: HTTPS (plain HTTP
only with --insecure-http), every request authenticated and authorized by delegation to the API server
(shared/auth; health paths always allowed), on the shared listener with its connection limits.

The port opens first: while the API server does not answer (shared/kube/wait.py) the daemon waits with
/livez answering and /readyz failing, and answers other paths 503 until delegated auth is set up.

`AutoscalerDaemon` is what `python -m autoscaler` runs and what tests and benchmarks start in-process,
always from `AutoscalerOptions` (parsed flags), so there is one way to build it.
"""

from __future__ import annotations

import asyncio
import ctypes
import functools
import ssl
from collections.abc import Awaitable, Callable

import structlog
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from autoscaler import target_metrics
from autoscaler.controller import Controller, ControllerOptions
from autoscaler.debug_access import decision_access
from autoscaler.history import Histories
from autoscaler.leader import LeaderElector, LeaseGuard
from autoscaler.metrics import MetricsClient
from autoscaler.options import AutoscalerOptions
from autoscaler.promql.client import PrometheusClient
from autoscaler.promql.direct import DirectMetrics
from autoscaler.shadow import SHADOW
from autoscaler.sharding import Sharding
from autoscaler.sources import SOURCES
from autoscaler.telemetry import Telemetry
from shared.auth import Security, SecurityStartupError
from shared.cli import surge_version
from shared.clock import LOOP_CLOCK, Clock
from shared.kube import KubeClient, RestMapper, direct_access, load_access, user_agent
from shared.kube.informer import freeze_listed
from shared.kube.wait import wait_for_api_server
from shared.lifecycle import start_unless_stopped
from shared.serving.listener import ConnectionMetrics, Listener
from shared.serving.options import serving_tls
from shared.supervisor import Supervisor

log = structlog.get_logger("autoscaler")

COMPONENT = "surge-autoscaler"
_CERT_RELOAD_SECONDS = 10.0
# Of --shutdown-grace-period, at most this much (and at most half) is kept for giving the Leases up.
_RELEASE_RESERVE = 2.0


class StartupError(Exception):
    """The autoscaler cannot start (no cluster access, port taken, bad serving certificate, delegated
    authentication impossible)."""


class AutoscalerDaemon:
    """Build with `await AutoscalerDaemon.create(options)`, then `start()`/`stop()` or `run(stop)`."""

    def __init__(
        self,
        options: AutoscalerOptions,
        kube: KubeClient,
        metrics_kube: KubeClient,
        lease_kube: KubeClient | None,
        clock: Clock = LOOP_CLOCK,
    ) -> None:
        """Built inside the event loop (the Prometheus client's pool belongs to it). `lease_kube`: the
        elector's own client (with --leader-elect), so reconciles never hold its renewals back."""
        self.options = options
        self.kube = kube
        self._metrics_kube = metrics_kube
        self._lease_kube = lease_kube
        self.telemetry = Telemetry()
        self.supervisor = Supervisor(self.telemetry.registry, "surge_autoscaler", clock=clock)
        mapper = RestMapper(kube)
        self.elector: LeaderElector | None = None
        self.sharding: Sharding | None = None
        dropped = self.telemetry.writes_dropped
        if options.lease is not None and lease_kube is not None and options.lease_buckets > 1:
            takeovers = self.telemetry.bucket_takeovers
            self.sharding = Sharding(
                lease_kube,
                options.lease,
                options.lease_buckets,
                on_gained=self._bucket_gained,
                on_lost=self._bucket_lost,
                on_dropped=lambda kind: dropped.labels(write=kind).inc(),
                on_takeover=lambda previous: takeovers.labels(
                    previous="expired" if previous else "released"
                ).inc(),
                # (The controller is built below; these run once the daemon has started.)
                on_forecast=lambda expected: self.controller.prepare_buckets(expected),
                on_disputes=lambda namespaces: self.controller.regroup(namespaces),
                prepared=lambda: self.controller.wait_prepared(),
                hot_after=options.hot_namespace_targets,
                clock=clock,
            )
        elif options.lease is not None and lease_kube is not None:
            guard = LeaseGuard(
                options.lease.name,
                options.lease.renew_deadline,
                clock,
                on_dropped=lambda kind: dropped.labels(write=kind).inc(),
            )
            self.elector = LeaderElector(
                lease_kube,
                options.lease,
                guard,
                on_started_leading=self._started_leading,
                on_stopped_leading=lambda: self.telemetry.is_leader.set(0),
                clock=clock,
            )
        self._prometheus = PrometheusClient(options.prometheus) if options.prometheus is not None else None
        direct = DirectMetrics(self._prometheus, options.cluster_wide_query_namespaces, self.telemetry)
        self.controller = Controller(
            kube,
            SOURCES[options.source],
            MetricsClient(metrics_kube, mapper, latency=self.telemetry, timeout=options.metrics.timeout),
            mapper,
            self.telemetry,
            ControllerOptions(
                workers=options.workers,
                default_sync_period=options.sync_period,
                burst_check_interval=options.burst_check_interval,
                burst_qps=options.burst_qps,
                reconcile_deadline=options.reconcile_deadline,
                readiness_debounce=options.readiness_debounce,
                react_to_pods=options.react_to_pods,
                label_selector=options.selector,
                config=options.config,
                shadow=options.mode == SHADOW,
            ),
            lease=self.elector.guard if self.elector is not None else None,
            shards=self.sharding,
            supervisor=self.supervisor,
            clock=clock,
            direct=direct,
            histories=Histories(self._prometheus, direct, clock),
        )
        self.security = Security(
            options.auth,
            user_agent=user_agent(COMPONENT, surge_version(), options.identity),
            plain_http=options.serving.insecure_http,
            attributes_for=decision_access(SOURCES[options.source]),
        )
        self.telemetry.keys_owned.set_function(self.controller.keys_owned)
        self.port = 0
        self._listener: Listener | None = None
        self._lease_lost = asyncio.Event()
        self._lease_tasks: list[str] = []
        self._releasing = False  # the Leases are being given up on shutdown

    @classmethod
    async def create(cls, options: AutoscalerOptions, clock: Clock = LOOP_CLOCK) -> AutoscalerDaemon:
        """Load cluster access (KubeConfigError when it cannot) and build every part; nothing runs yet.
        Tests pass a FakeClock to drive the controller's periods, debounce and deadlines."""
        access = await load_access(options.kubeconfig)
        agent = user_agent(COMPONENT, surge_version(), options.identity)

        def client(agent: str) -> KubeClient:
            # Each client has a rate limiter of its own.
            return KubeClient(access, qps=options.qps, burst=options.burst, user_agent=agent)

        kube = client(agent)
        metrics = options.metrics
        metrics_kube = (
            KubeClient(
                direct_access(metrics.url, metrics.ca_file, metrics.insecure_skip_tls_verify, access),
                user_agent=agent,
            )
            if metrics.url
            else kube
        )
        # The elector's own client, as client-go's leader election gets its own clientset (with
        # "/leader-election" added to the User-Agent): renewals never wait behind reconciles.
        lease_kube = client(agent + "/leader-election") if options.lease is not None else None
        return cls(options, kube, metrics_kube, lease_kube, clock)

    async def start(self) -> None:
        """Open the port, wait for the API server, set up delegated auth, sync the caches, start the workers
        and, if asked, leader election."""
        await self._serve()
        log.info(
            "serving",
            port=self.port,
            scheme="http" if self.options.serving.insecure_http else "https",
            source=self.options.source,
            mode=self.options.mode,
            workers=self.options.workers,
        )
        await wait_for_api_server(self.kube)
        try:
            await self.security.start()
        except SecurityStartupError as err:
            raise StartupError(str(err)) from err
        self.supervisor.start("auth settings refresh", self.security.refresh_forever)
        await self.controller.start()
        freeze_listed()
        log.info(
            "caches synced",
            autoscalers=len(self.controller.autoscalers.store),
            pods=len(self.controller.pods.store),
        )
        if self.sharding is not None:
            sharding = self.sharding
            self._start_lease_task("leases informer", sharding.run_leases)
            self._start_lease_task("membership", sharding.run_membership)
            for bucket in range(sharding.count):
                self._start_lease_task(f"bucket-{bucket:02d}", functools.partial(sharding.run_bucket, bucket))
        elif self.elector is None:
            self.telemetry.is_leader.set(1)
        else:
            elector = self.elector
            self._start_lease_task("leader election", lambda: self._lead(elector))

    def _start_lease_task(self, name: str, loop: Callable[[], Awaitable[None]]) -> None:
        """A supervised task that renews or takes Leases: stopped first on shutdown, so the release is
        not undone by a renewal."""
        self._lease_tasks.append(name)
        self.supervisor.start(name, loop)

    async def run(self, stop: asyncio.Event) -> int:
        """Start, then run until `stop` is set (0) or the lease is lost (1, as client-go's elector ends
        the process: a restart re-joins cleanly). `stop` also interrupts a start that waits for the API."""
        try:
            await start_unless_stopped(self.start(), stop)
            if stop.is_set():
                return 0
            stopping = asyncio.create_task(stop.wait())
            lost = asyncio.create_task(self._lease_lost.wait())
            await asyncio.wait({stopping, lost}, return_when=asyncio.FIRST_COMPLETED)
            stopping.cancel()
            lost.cancel()
            return 0 if stop.is_set() else 1
        finally:
            await self.stop()

    async def stop(self) -> None:
        """Drain in-flight reconciles, release the lease, close everything: all within the grace period
        (what the drain leaves of it bounds the release; an unreleased lease only delays the standby)."""
        grace = self.options.shutdown_grace_period
        log.info("shutting down", grace=grace)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace
        holder = self.elector or self.sharding
        # A slow drain must not leave the Leases unreleased (the others would wait them out): while one
        # is held, part of the grace is kept for the release.
        holding = (self.elector is not None and self.elector.leading) or (
            self.sharding is not None and bool(self.sharding.held())
        )
        reserve = min(grace / 2, _RELEASE_RESERVE) if holding else 0.0
        await self.controller.stop(grace - reserve)
        # The Leases are given up before the other tasks are stopped (many, some busy with large
        # caches): the others take over as soon as possible.
        await self.supervisor.stop(only=self._lease_tasks)
        if holder is not None:
            self._releasing = True
            try:
                async with asyncio.timeout_at(deadline):
                    await holder.release()
            except TimeoutError:
                log.warning("lease not released within the grace period", grace=grace)
        await self.supervisor.stop()
        if self._listener is not None:
            await self._listener.close()
        await self.security.close()
        if self._metrics_kube is not self.kube:
            await self._metrics_kube.close()
        if self._lease_kube is not None:
            await self._lease_kube.close()
        if self._prometheus is not None:
            await self._prometheus.close()
        await self.kube.close()

    async def _lead(self, elector: LeaderElector) -> None:
        """Leader election; its return means the lease is lost, which ends the daemon."""
        await elector.run()
        self._lease_lost.set()

    def _bucket_gained(self, bucket: int) -> None:
        assert self.sharding is not None
        held = len(self.sharding.held())
        log.info(
            "bucket acquired", bucket=bucket, held=held, taken_from=self.sharding.electors[bucket].taken_from
        )
        self.telemetry.buckets_held.set(held)
        self.telemetry.is_leader.set(1)
        self.controller.gain_bucket(bucket)

    def _bucket_lost(self, bucket: int) -> None:
        assert self.sharding is not None
        held = len(self.sharding.held())
        log.info("bucket lost", bucket=bucket, held=held)
        self.telemetry.buckets_held.set(held)
        self.telemetry.is_leader.set(1 if held else 0)
        if self._releasing:
            # Shutting down: dropping the bucket's caches (a prune of every pod) would only delay the
            # release of the next Lease.
            return
        self.controller.lose_bucket(bucket)
        _return_freed_memory()

    def owner(self, key: tuple[str, str]) -> dict[str, str]:
        """Which replica and bucket own the autoscaler `key` (for `surge explain`): while its namespace
        turns hot or cold it needs two buckets, and the first (its namespace's) is named."""
        if self.sharding is None:
            return {"replica": self.options.identity}
        bucket = self.sharding.buckets_of(key)[0]
        return {
            "replica": self.sharding.holder_of(bucket),
            "bucket": f"{bucket:02d} of {self.sharding.count:02d}",
            "lease": self.sharding.guards[bucket].lease,
        }

    def _started_leading(self) -> None:
        self.telemetry.is_leader.set(1)
        # Whatever the previous leader left pending is ours now.
        self.controller.resync_all()

    async def _serve(self) -> None:
        """Open the port (its paths but health answer 503 until delegated auth is set up)."""
        serving = self.options.serving
        try:
            tls = serving_tls(serving)
        except (OSError, ssl.SSLError, ValueError) as err:
            raise StartupError(f"invalid serving certificate or TLS settings: {err}") from err
        if tls is not None:
            self.security.configure_tls(tls.context)
            self.supervisor.start("cert reload", lambda: tls.watch(_CERT_RELOAD_SECONDS))
        try:
            self._listener = await Listener.start(
                self._http_app(),
                serving.bind_address,
                serving.secure_port,
                tls.context if tls is not None else None,
                serving.limits,
                ConnectionMetrics(self.telemetry.registry, "surge_autoscaler"),
            )
        except OSError as err:
            raise StartupError(
                f"cannot listen on {serving.bind_address}:{serving.secure_port}: {err}"
            ) from err
        self.port = self._listener.port

    def _http_app(self) -> web.Application:
        async def metrics(_: web.Request) -> web.Response:
            parts = [generate_latest(self.telemetry.registry)]
            for family in target_metrics.families(self.controller.decisions.newest()):
                parts.append(family.encode())
                await asyncio.sleep(0)  # ~15 ms a family at 10,000 autoscalers: reconciles run between
            return web.Response(body=b"".join(parts), headers={"Content-Type": CONTENT_TYPE_LATEST})

        async def decisions(request: web.Request) -> web.Response:
            key = (request.match_info["namespace"], request.match_info["name"])
            records = self.controller.decisions.records_json(key)
            owner = self.owner(key)
            if records is None:
                known = self.controller.autoscalers.store.get(*key) is not None
                return _not_found(key, known, owner, self.options.identity)
            return web.json_response({"target": f"{key[0]}/{key[1]}", "owner": owner, "decisions": records})

        async def alive(_: web.Request) -> web.Response:
            return web.Response(text="ok")

        async def readyz(_: web.Request) -> web.Response:
            if not self.controller.ready:
                return web.Response(status=503, text="caches not synced")
            if down := self.supervisor.down():
                return web.Response(status=503, text="restarting after a crash: " + ", ".join(down))
            return web.Response(text="ok")

        app = web.Application(middlewares=[self.security.middleware])
        app.router.add_get("/metrics", metrics)
        app.router.add_get("/healthz", alive)
        app.router.add_get("/livez", alive)
        app.router.add_get("/readyz", readyz)
        app.router.add_get("/debug/decisions/{namespace}/{name}", decisions)
        return app


def _return_freed_memory() -> None:
    """Hand the heap's free pages back to the system after a bucket's pods and state were dropped: glibc
    keeps them otherwise, and a replica that held every bucket for a while (the first one up) would keep
    the memory of all of them. No-op without glibc."""
    try:
        libc = ctypes.CDLL(None)
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return
    trim(0)


def _not_found(key: tuple[str, str], known: bool, owner: dict[str, str], identity: str) -> web.Response:
    """A metav1.Status 404: an autoscaler this daemon does not watch, or one it has not decided on (the
    message names the replica that owns it, with buckets)."""
    target = f"{key[0]}/{key[1]}"
    if known and "bucket" in owner and owner["replica"] != identity:
        holder = f"held by replica {owner['replica']}" if owner["replica"] else "held by no replica right now"
        message = (
            f"autoscaler {target} has no decision here: it is in bucket {owner['bucket']} (Lease "
            f"{owner['lease']}), {holder}; ask that replica"
        )
    elif known:
        message = f"autoscaler {target} has no decision here yet (only the replica that leads it decides)"
    else:
        message = (
            f"autoscaler {target} is not known to this daemon (not found, or outside its --source/--selector)"
        )
    status = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": "NotFound",
        "details": {"name": target},
        "code": 404,
    }
    return web.json_response(status, status=404)
