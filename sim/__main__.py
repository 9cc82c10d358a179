"""`python -m sim --kubeconfig PATH [--port N] [--prometheus-sd PATH] [--insecure-http] [--audit-log PATH]`:
serve a simulated cluster until SIGINT/SIGTERM. The kubeconfig appears once the server accepts requests."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
from pathlib import Path

import structlog

from shared.cli import OneLineErrorParser, add_version_flag, port_number
from shared.logging import add_logging_flags, configure_logging
from sim.cluster import SimCluster

log = structlog.get_logger("sim")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = OneLineErrorParser(prog="surge-sim", description=__doc__)
    add_version_flag(parser)
    parser.add_argument("--kubeconfig", type=Path, required=True, help="where to write the kubeconfig")
    parser.add_argument(
        "--port", type=port_number, default=0, help="API server port on 127.0.0.1 (default: free)"
    )
    parser.add_argument(
        "--prometheus-sd",
        type=Path,
        help="Prometheus file_sd JSON to keep listing the scrape targets (running pods, nodes' kubelets)",
    )
    parser.add_argument("--insecure-http", action="store_true", help="serve plain HTTP instead of HTTPS")
    parser.add_argument(
        "--audit-log",
        type=Path,
        help="append kube-apiserver's audit log here: an audit.k8s.io/v1 Event per request (Metadata level)",
    )
    add_logging_flags(parser)
    return parser.parse_args(argv)


def write_kubeconfig_atomically(cluster: SimCluster, path: Path) -> None:
    """Readers polling for the file never see it half-written."""
    tmp = path.with_name(f".{path.name}.tmp")
    cluster.write_kubeconfig(tmp)
    os.replace(tmp, path)


async def serve(args: argparse.Namespace) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    cluster = SimCluster(sd_path=args.prometheus_sd, tls=not args.insecure_http, audit_log=args.audit_log)
    await cluster.start(port=args.port)
    try:
        args.kubeconfig.parent.mkdir(parents=True, exist_ok=True)
        write_kubeconfig_atomically(cluster, args.kubeconfig)
        log.info(
            "simulated cluster serving",
            url=cluster.url,
            kubeconfig=str(args.kubeconfig),
            prometheus_sd=str(cluster.sd_path),
            metrics=cluster.metrics_url,
        )
        await stop.wait()
        log.info("stopping")
    finally:
        await cluster.stop()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    configure_logging(args.log_level, args.log_format)
    asyncio.run(serve(args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
