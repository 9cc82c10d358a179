"""Command-line flags of `python -m autoscaler` / `surge-autoscaler`."""

from __future__ import annotations

import argparse
import os
import socket
import uuid
from dataclasses import replace

from autoscaler.core.types import FEATURE_GATE_NAMES, FeatureGates
from autoscaler.shadow import ACT, MODES
from autoscaler.sources import SOURCES
from shared.auth import add_auth_flags
from shared.cli import (
    OneLineErrorParser,
    add_version_flag,
    http_url,
    integer,
    label_selector,
    number,
    seconds,
)
from shared.logging import add_logging_flags
from shared.prometheus_flags import add_prometheus_credential_flags
from shared.serving.options import add_serving_flags

DEFAULT_SECURE_PORT = 8443


def feature_gates(text: str) -> FeatureGates:
    """argparse type: `Name=true,Other=false` as Kubernetes' --feature-gates, over the v1.37 defaults."""
    gates = FeatureGates()
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, value = item.partition("=")
        if name not in FEATURE_GATE_NAMES:
            known = ", ".join(FEATURE_GATE_NAMES)
            raise argparse.ArgumentTypeError(f"unrecognized feature gate {name!r} (known: {known})")
        if not sep or value.lower() not in ("true", "false"):
            raise argparse.ArgumentTypeError(f"invalid value of {name}: {value!r}, want true or false")
        gates = replace(gates, **{FEATURE_GATE_NAMES[name]: value.lower() == "true"})
    return gates


def build_parser() -> argparse.ArgumentParser:
    p = OneLineErrorParser(
        prog="surge-autoscaler",
        description="HPA-exact autoscaler: many concurrent reconciles from a rate-limited work queue.",
    )
    add_version_flag(p)
    g = p.add_argument_group("cluster")
    g.add_argument(
        "--kubeconfig",
        default=os.environ.get("KUBECONFIG") or None,
        help="kubeconfig file (default: $KUBECONFIG, else the pod's service account)",
    )
    g.add_argument(
        "--qps", type=number(0), default=1000.0, help="API server requests per second (0: unlimited)"
    )
    g.add_argument("--burst", type=integer(0), default=2000, help="API server request burst")
    g = p.add_argument_group("what to reconcile")
    g.add_argument(
        "--source",
        choices=sorted(SOURCES),
        default="crd",
        help="crd: HorizontalAutoscaler objects (default); hpa: autoscaling/v2 HorizontalPodAutoscalers",
    )
    g.add_argument(
        "--mode",
        choices=MODES,
        default=ACT,
        help="act: scale the targets (default); shadow: decide beside the incumbent autoscaler (the "
        "built-in HPA, KEDA's HPA) and record every decision, writing nothing to the cluster (not with "
        "--leader-elect). Without it, an object annotated autoscaling.surge.dev/mode: shadow is shadowed",
    )
    g.add_argument(
        "--selector",
        type=label_selector,
        default="",
        help="label selector: reconcile only the matching objects",
    )
    g = p.add_argument_group("work")
    g.add_argument(
        "--workers",
        type=integer(1),
        default=32,
        help="concurrent reconciles (default 32); about reconciles/s x reconcile latency are busy",
    )
    g.add_argument(
        "--sync-period",
        type=seconds(1.0),
        default=15.0,
        help="period of objects without their own (default 15s; at least 1s)",
    )
    g.add_argument(
        "--burst-check-interval",
        type=seconds(0.1),
        default=1.0,
        help="how often autoscalers with spec.burst read their short window, apart from the sync period "
        "(default 1s)",
    )
    g.add_argument(
        "--burst-qps",
        type=number(0.1),
        default=100.0,
        help="burst checks per second over all autoscalers at most (default 100); more are spread out",
    )
    g.add_argument("--reconcile-deadline", type=seconds(), default=10.0, help="time limit of one reconcile")
    g.add_argument(
        "--readiness-debounce",
        type=seconds(),
        default=0.25,
        help="delay before reconciling after a target pod's readiness changed",
    )
    g.add_argument(
        "--react-to-pods",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="reconcile soon when a target's pods come, go or change readiness (off: like the HPA)",
    )
    g = p.add_argument_group("algorithm (kube-controller-manager's --horizontal-pod-autoscaler-* values)")
    g.add_argument(
        "--tolerance",
        type=number(0),
        default=0.1,
        help="smallest change of the metric-to-target ratio (from 1.0) that scales (default 0.1; at least 0)",
    )
    g.add_argument(
        "--feature-gates",
        type=feature_gates,
        default=FeatureGates(),
        metavar="NAME=BOOL,...",
        help="kube-controller-manager's gates the algorithm reads, defaulted as v1.37: "
        + ", ".join(
            f"{name}={str(getattr(FeatureGates(), f)).lower()}" for name, f in FEATURE_GATE_NAMES.items()
        ),
    )
    g.add_argument(
        "--downscale-stabilization",
        type=seconds(),
        default=300.0,
        help="scale down no lower than the highest recommendation of this window (default 300s), for "
        "objects without spec.behavior.scaleDown",
    )
    g.add_argument(
        "--cpu-initialization-period",
        type=seconds(),
        default=300.0,
        help="after a pod starts, its CPU sample counts only once it is ready and sampled after "
        "readiness (default 300s)",
    )
    g.add_argument(
        "--initial-readiness-delay",
        type=seconds(),
        default=30.0,
        help="after a pod starts, a readiness change in this time is its first readiness (default 30s)",
    )
    g = p.add_argument_group("metrics APIs")
    g.add_argument(
        "--metrics-url",
        type=http_url,
        default=None,
        help="query this adapter directly instead of through the API server's aggregation",
    )
    g.add_argument("--metrics-ca-file", default="", help="CA bundle for --metrics-url")
    g.add_argument(
        "--metrics-insecure-skip-tls-verify",
        action="store_true",
        help="do not verify the certificate of --metrics-url",
    )
    g.add_argument("--metrics-timeout", type=seconds(), default=10.0, help="time limit of one metrics call")
    g = p.add_argument_group("Prometheus (direct PromQL metrics: External metrics named surge-promql:<name>)")
    g.add_argument(
        "--prometheus-url",
        type=http_url,
        default=None,
        help="Prometheus that direct metrics query, and predictive scaling reads histories from",
    )
    add_prometheus_credential_flags(g)
    g.add_argument(
        "--prometheus-insecure-skip-tls-verify",
        action="store_true",
        help="do not verify the certificate of --prometheus-url",
    )
    g.add_argument(
        "--cluster-wide-query-namespace",
        action="append",
        default=[],
        metavar="NAMESPACE",
        help="autoscalers in this namespace may query every namespace's series (repeatable); all others' "
        "queries are confined to their own namespace",
    )
    g = p.add_argument_group("leader election")
    g.add_argument(
        "--leader-elect",
        action="store_true",
        help="run as one of several replicas: only the leader writes, or with --leader-elect-buckets each "
        "replica for the buckets it holds",
    )
    g.add_argument(
        "--leader-elect-lease-duration",
        type=seconds(),
        default=15.0,
        help="how long others wait after the leader's last renewal before taking over (default 15s)",
    )
    g.add_argument(
        "--leader-elect-renew-deadline",
        type=seconds(),
        default=10.0,
        help="how long the leader keeps trying to renew before it stops writing (default 10s)",
    )
    g.add_argument(
        "--leader-elect-retry-period",
        type=seconds(),
        default=2.0,
        help="time between two tries to acquire or renew the lease (default 2s)",
    )
    g.add_argument(
        "--leader-elect-buckets",
        type=integer(1),
        default=1,
        help="split the autoscalers into this many buckets, each with a Lease of its own "
        "(NAME-bucket-NN-of-MM): every replica reconciles the buckets it holds, shared out by their "
        "autoscalers (default 1: one leader reconciles everything)",
    )
    g.add_argument(
        "--leader-elect-hot-namespace-targets",
        type=integer(0),
        default=50,
        metavar="K",
        help="with --leader-elect-buckets, a namespace with more than K autoscalers is split over the "
        "buckets by autoscaler (its pods then cached by every replica holding one of its buckets) instead of "
        "living in one bucket; 0: never split. Default 50: a namespace that size is a third of a bucket of a "
        "1,500-autoscaler cluster on 10 buckets, while caching its pods on every replica costs each about "
        "1 MiB (18 KiB an autoscaler with 10 pods, measured); namespaces of a few autoscalers stay whole, "
        "which keeps each replica's pod cache to its share (docs/deploy.md section 18)",
    )
    g.add_argument(
        "--leader-elect-resource-name", default="surge-autoscaler", help="name of the Lease object"
    )
    g.add_argument(
        "--leader-elect-resource-namespace", default="kube-system", help="namespace of the Lease object"
    )
    g.add_argument(
        "--leader-elect-identity",
        default=f"{socket.gethostname()}_{uuid.uuid4()}",
        help="this replica's name in the Lease and in its User-Agent, surge-autoscaler/VERSION (IDENTITY) "
        "(default: hostname_random-UUID)",
    )
    # The port of /metrics, /debug/decisions and health: HTTPS with delegated authentication and
    # authorization, as kube components serve their metrics.
    # Few clients (Prometheus, probes, surge explain), and on asyncio's own loop each TLS connection holds
    # a 256 KiB read buffer (asyncio.sslproto): a cap of 256 bounds them to about 75 MiB.
    add_serving_flags(p, secure_port=DEFAULT_SECURE_PORT, cert_dir="", max_connections=256)
    add_auth_flags(p, kubeconfig_default="--kubeconfig's")
    g = p.add_argument_group("shutdown")
    g.add_argument(
        "--shutdown-grace-period",
        type=seconds(),
        default=10.0,
        help="on SIGTERM, time for in-flight reconciles to finish and the Leases to be given up",
    )
    add_logging_flags(p)
    return p
