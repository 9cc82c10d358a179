"""`python -m sim --kubeconfig PATH [--prometheus] [--port N] [--prometheus-sd PATH] [--insecure-http]
[--audit-log PATH] [--authorization-mode AlwaysAllow|RBAC] [--container-runtime podman]`:
a simulated Kubernetes cluster for kubectl, the adapter and the autoscaler, until SIGINT/SIGTERM.

With `--authorization-mode RBAC` every request is authorized as kube-apiserver's RBAC authorizer does
(the kubeconfig written is system:masters'); with `--container-runtime podman` a pod whose image is in
local container storage runs as real containers (sim/workload/containers), e.g. Surge's image built by
scripts/build_image.sh and installed with its chart.

With `--prometheus` a real Prometheus scrapes every running pod and every node's kubelet each second.
Once everything accepts requests, the kubeconfig is written (atomically: a reader polling for it never
sees half of it) and what to do next is printed: the kubeconfig, the Prometheus URL, how to put load on
a Deployment and how an APIService reaches an adapter running on this machine (docs/deploy.md,
"A cluster on your machine").

Faults are injected while it runs through `/debug/sim/faults` (system:masters only; the kubeconfig
written is theirs): errors, latency and partitions per route and per client identity, dropped and
expired watches, a restart (sim/apiserver/fault_admin.py).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import tempfile
from pathlib import Path

import structlog

from shared.cli import OneLineErrorParser, add_version_flag, port_number, usage_error
from shared.logging import add_logging_flags, configure_logging
from sim.apiserver.aggregator import URL_ANNOTATION
from sim.apiserver.server import CONTAINER_HOST_ADDRESS
from sim.cluster import SimCluster
from sim.prometheus import PrometheusError, PrometheusProcess
from sim.workload.annotations import CAPACITY_RPS, RPS

PROG = "surge-sim"
# The adapter's self-signed certificate is not for the Service's name: an APIService skips verifying it.
SKIP_VERIFY = '{"spec":{"insecureSkipTLSVerify":true}}'

log = structlog.get_logger("sim")


class StartError(Exception):
    """The cluster cannot start as asked; the message names the flag (one line for the user)."""


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(
        prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_version_flag(parser)
    parser.add_argument(
        "--kubeconfig",
        type=Path,
        required=True,
        help="where to write the kubeconfig (directories are created)",
    )
    parser.add_argument(
        "--prometheus",
        action="store_true",
        help="also run a real Prometheus (/usr/bin/prometheus) scraping the pods and kubelets every second",
    )
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
    parser.add_argument(
        "--authorization-mode",
        choices=("AlwaysAllow", "RBAC"),
        default="AlwaysAllow",
        help="kube-apiserver's --authorization-mode: RBAC enforces Roles and bindings (default AlwaysAllow)",
    )
    parser.add_argument(
        "--container-runtime",
        choices=("podman",),
        help="run pods whose image is in local container storage as real containers (podman); other "
        "pods stay modelled",
    )
    add_logging_flags(parser)
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def check_writable(path: Path) -> None:
    """Raises StartError unless a file can be written at `path` (its directory created): checked before
    anything starts, so that a typo costs nothing to stop."""
    try:
        if path.is_dir():
            raise IsADirectoryError(21, "it is a directory")
        existing = next(folder for folder in path.parents if folder.exists())
        if not existing.is_dir():
            raise NotADirectoryError(20, f"{str(existing)!r} is not a directory")
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}."):
            pass
    except OSError as err:
        raise StartError(f"--kubeconfig: cannot write {str(path)!r}: {err.strerror or err}") from None


def write_kubeconfig_atomically(cluster: SimCluster, path: Path) -> None:
    """Readers polling for the file never see it half-written."""
    tmp = path.with_name(f".{path.name}.tmp")
    cluster.write_kubeconfig(tmp)
    os.replace(tmp, path)


def next_steps(cluster: SimCluster, kubeconfig: Path, prometheus: PrometheusProcess | None) -> str:
    """What to do with the running cluster."""
    runtime = (
        "Pods whose image is in podman's storage run for real (e.g. the chart's, with surge:0.1.0 built\n"
        "by scripts/build_image.sh); their APIServices reach them through their Services, no annotation\n"
        f"needed; they reach this machine (this API server, Prometheus) at {CONTAINER_HOST_ADDRESS}."
        if cluster.workload.kubelet.containers is not None
        else "With --container-runtime podman, pods of local images run for real and need no annotation."
    )
    scraping = (
        f"  Prometheus   {prometheus.url}   (every running pod and kubelet, each second)"
        if prometheus is not None
        else "  Prometheus   not started (--prometheus); its targets are in " + str(cluster.sd_path)
    )
    return f"""\
Simulated cluster running. Stop it with Ctrl-C.
  API server   {cluster.url}
  kubeconfig   {kubeconfig}
{scraping}

  export KUBECONFIG={kubeconfig}
Load: a Deployment's {RPS} annotation offers requests/s, split over its ready (simulated) pods;
each serves up to {CAPACITY_RPS} of them (default 100) and counts them in http_requests_total,
which the adapter's default rules serve as the per-pod metric http_requests:
  kubectl create deployment web --image=web --replicas=2
  kubectl annotate deployment web {RPS}=400 --overwrite
An APIService reaches an adapter on this machine through its {URL_ANNOTATION} annotation (there are
no Service IPs here), e.g. for `python -m adapter --secure-port=6443 --bind-address=127.0.0.1 ...`:
  kubectl annotate apiservice v1beta1.custom.metrics.k8s.io {URL_ANNOTATION}=https://127.0.0.1:6443
  kubectl patch apiservice v1beta1.custom.metrics.k8s.io --type=merge -p '{SKIP_VERIFY}'
(the adapter's self-signed certificate is not for the Service's name). {runtime}
docs/deploy.md, "A cluster on your machine", walks from `kubectl apply -k manifests/` to `kubectl top`
and a HorizontalAutoscaler, and through `helm install charts/surge` with the real image.
"""


async def serve(args: argparse.Namespace) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    cluster = SimCluster(
        sd_path=args.prometheus_sd,
        tls=not args.insecure_http,
        audit_log=args.audit_log,
        container_runtime=args.container_runtime,
        authorization_mode=args.authorization_mode,
    )
    prometheus = PrometheusProcess(cluster.sd_path) if args.prometheus else None
    try:
        try:
            await cluster.start(port=args.port)
        except OSError as err:
            reason = os.strerror(err.errno) if err.errno else str(err)
            raise StartError(f"--port: cannot listen on 127.0.0.1:{args.port}: {reason}") from None
        if prometheus is not None:
            try:
                await asyncio.to_thread(prometheus.start)
            except PrometheusError as err:
                raise StartError(f"--prometheus: {err}") from None
        write_kubeconfig_atomically(cluster, args.kubeconfig)
        log.info(
            "simulated cluster serving",
            url=cluster.url,
            kubeconfig=str(args.kubeconfig),
            prometheus_sd=str(cluster.sd_path),
            metrics=cluster.metrics_url,
            prometheus=None if prometheus is None else prometheus.url,
        )
        print(next_steps(cluster, args.kubeconfig, prometheus), flush=True)
        await stop.wait()
        log.info("stopping")
    finally:
        if prometheus is not None:
            await asyncio.to_thread(prometheus.stop)
        await cluster.stop()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    configure_logging(args.log_level, args.log_format)
    try:
        check_writable(args.kubeconfig)
        asyncio.run(serve(args))
    except StartError as err:
        usage_error(PROG, str(err))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
