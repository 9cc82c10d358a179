"""`python -m autoscaler` / `surge-autoscaler`: the autoscaler daemon."""

from __future__ import annotations

import asyncio
import gc
import signal
import sys
from collections.abc import Sequence

import structlog
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from autoscaler.controller import Controller, ControllerOptions
from autoscaler.core.types import ControllerConfig
from autoscaler.flags import build_parser
from autoscaler.kubeclient import KubeClient, direct_access, load_access
from autoscaler.leader import LeaderElector, LeaseConfig
from autoscaler.metrics import MetricsClient
from autoscaler.restmapper import RestMapper
from autoscaler.sources import SOURCES
from autoscaler.telemetry import Telemetry
from shared.kube import KubeConfigError
from shared.logging import configure_logging

log = structlog.get_logger("autoscaler")


def _http_app(telemetry: Telemetry, controller: Controller) -> web.Application:
    async def metrics(_: web.Request) -> web.Response:
        body = generate_latest(telemetry.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(_: web.Request) -> web.Response:
        if controller.ready:
            return web.Response(text="ok")
        return web.Response(status=503, text="caches not synced")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    return app


async def run(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(argv)
    configure_logging(args.log_level, args.log_format)
    try:
        access = await load_access(args.kubeconfig)
    except KubeConfigError as err:
        log.error("no cluster access", error=str(err))
        return 2
    kube = KubeClient(access, qps=args.qps, burst=args.burst)
    metrics_kube = (
        KubeClient(
            direct_access(
                args.metrics_url, args.metrics_ca_file, args.metrics_insecure_skip_tls_verify, access
            )
        )
        if args.metrics_url
        else kube
    )
    telemetry = Telemetry()
    mapper = RestMapper(kube)
    elector: LeaderElector | None = None
    if args.leader_elect:
        elector = LeaderElector(
            kube,
            LeaseConfig(
                namespace=args.leader_elect_resource_namespace,
                name=args.leader_elect_resource_name,
                identity=args.leader_elect_identity,
                lease_duration=args.leader_elect_lease_duration,
                renew_deadline=args.leader_elect_renew_deadline,
                retry_period=args.leader_elect_retry_period,
            ),
            # `controller` is bound below; the callbacks only run once the elector does.
            on_started_leading=lambda: _started_leading(controller, telemetry),
            on_stopped_leading=lambda: telemetry.is_leader.set(0),
        )
    controller = Controller(
        kube,
        SOURCES[args.source],
        MetricsClient(metrics_kube, mapper, latency=telemetry, timeout=args.metrics_timeout),
        mapper,
        telemetry,
        ControllerOptions(
            workers=args.workers,
            default_sync_period=args.sync_period,
            reconcile_deadline=args.reconcile_deadline,
            readiness_debounce=args.readiness_debounce,
            react_to_pods=args.react_to_pods,
            label_selector=args.selector,
            config=ControllerConfig(
                tolerance=args.tolerance,
                downscale_stabilization_window_s=args.downscale_stabilization,
                cpu_initialization_period_s=args.cpu_initialization_period,
                initial_readiness_delay_s=args.initial_readiness_delay,
            ),
        ),
        is_leader=elector.is_leader if elector is not None else lambda: True,
    )
    runner = web.AppRunner(_http_app(telemetry, controller), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, args.bind_address, args.port)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    log.info("serving", port=port, source=args.source, workers=args.workers)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    exit_code = 0
    elector_task: asyncio.Task[None] | None = None
    try:
        await controller.start()
        # The caches are long-lived: keep the collector from re-scanning them on every full collection
        # (with 100k cached pods those scans stall the event loop for hundreds of milliseconds).
        gc.collect()
        gc.freeze()
        log.info(
            "caches synced", autoscalers=len(controller.autoscalers.store), pods=len(controller.pods.store)
        )
        if elector is None:
            telemetry.is_leader.set(1)
        else:
            elector_task = asyncio.create_task(elector.run())
            # Losing the lease ends the process, as client-go's elector does: a restart re-joins cleanly.
            elector_task.add_done_callback(lambda _: stop.set())
        await stop.wait()
        if elector_task is not None and elector_task.done() and not elector_task.cancelled():
            exit_code = 1
    finally:
        log.info("shutting down", grace=args.shutdown_grace_period)
        await controller.stop(args.shutdown_grace_period)
        if elector_task is not None:
            elector_task.cancel()
            await asyncio.gather(elector_task, return_exceptions=True)
        if elector is not None:
            await elector.release()
        await runner.cleanup()
        if metrics_kube is not kube:
            await metrics_kube.close()
        await kube.close()
    return exit_code


def _started_leading(controller: Controller, telemetry: Telemetry) -> None:
    telemetry.is_leader.set(1)
    # Whatever the previous leader left pending is ours now.
    controller.resync_all()


def main() -> None:
    sys.exit(asyncio.run(run(sys.argv[1:])))


if __name__ == "__main__":
    main()
