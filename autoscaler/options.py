"""The autoscaler daemon's settings, typed: what `AutoscalerDaemon` is built from.

The command line is their only source (`parse_options`), so the tests, the benchmarks and
`python -m autoscaler` share one set of defaults: the parser's.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass

from autoscaler.core.types import ControllerConfig
from autoscaler.flags import build_parser
from autoscaler.leader import LeaseConfig
from autoscaler.promql.client import PrometheusAccess
from autoscaler.shadow import SHADOW
from shared.auth import AuthOptions, auth_options_from_namespace
from shared.prometheus_flags import prometheus_credentials
from shared.serving.options import ServingOptions, serving_options_from_namespace


@dataclass(frozen=True)
class MetricsAccess:
    """Where metrics come from: the API server's aggregation layer, or an adapter queried directly."""

    url: str = ""
    ca_file: str = ""
    insecure_skip_tls_verify: bool = False
    timeout: float = 10.0


@dataclass(frozen=True)
class AutoscalerOptions:
    kubeconfig: str | None
    qps: float
    burst: int
    source: str
    mode: str  # act, or shadow: decide and record, write nothing (autoscaler/shadow.py)
    selector: str
    workers: int
    sync_period: float
    burst_check_interval: float
    burst_qps: float
    reconcile_deadline: float
    readiness_debounce: float
    react_to_pods: bool
    config: ControllerConfig
    metrics: MetricsAccess
    # Direct PromQL metrics: where Prometheus is (None: no --prometheus-url), and the namespaces whose
    # autoscalers' queries are not confined to their namespace.
    prometheus: PrometheusAccess | None
    cluster_wide_query_namespaces: tuple[str, ...]
    lease: LeaseConfig | None
    lease_buckets: int  # >1: active-active, one Lease per bucket (autoscaler/sharding.py)
    hot_namespace_targets: int  # a namespace with more autoscalers is split over the buckets (0: never)
    identity: str  # in the User-Agent, with or without leader election
    serving: ServingOptions
    auth: AuthOptions
    shutdown_grace_period: float
    log_level: str
    log_format: str


def _lease(ns: argparse.Namespace) -> LeaseConfig:
    try:
        return LeaseConfig(
            namespace=ns.leader_elect_resource_namespace,
            name=ns.leader_elect_resource_name,
            identity=ns.leader_elect_identity,
            lease_duration=ns.leader_elect_lease_duration,
            renew_deadline=ns.leader_elect_renew_deadline,
            retry_period=ns.leader_elect_retry_period,
        )
    except ValueError as err:
        flags = "--leader-elect-lease-duration, --leader-elect-renew-deadline, --leader-elect-retry-period"
        raise ValueError(f"{flags}: {err}") from None


def _check_elector_rate(qps: float, retry_period: float, buckets: int) -> None:
    """The elector's own client has --qps/--burst too (as client-go's leader-election client has its
    config's): it must afford a get and an update every retry period, for each bucket's Lease it may
    hold and (with buckets) the membership Lease (the others' Leases come by watch)."""
    requests = 2 if buckets == 1 else 2 * (buckets + 1)
    if qps > 0 and qps * retry_period < requests:
        raise ValueError(
            f"--qps {qps:g} and --leader-elect-retry-period {retry_period:g}s: the leader elector sends "
            f"{requests} requests every retry period (--leader-elect-buckets {buckets}), so it needs "
            f"qps x retry period >= {requests}"
        )


def options_from_namespace(ns: argparse.Namespace) -> AutoscalerOptions:
    """The options; ValueError naming the flags when some do not go together."""
    credentials = prometheus_credentials(ns)
    if ns.mode == SHADOW and ns.leader_elect:
        raise ValueError(
            "--mode=shadow: a shadow daemon writes nothing, Leases included, so it runs without "
            "--leader-elect (run one replica)"
        )
    if ns.leader_elect:
        _check_elector_rate(ns.qps, ns.leader_elect_retry_period, ns.leader_elect_buckets)
    elif ns.leader_elect_buckets > 1:
        raise ValueError("--leader-elect-buckets: buckets are Leases, so it needs --leader-elect")
    return AutoscalerOptions(
        kubeconfig=ns.kubeconfig,
        qps=ns.qps,
        burst=ns.burst,
        source=ns.source,
        mode=ns.mode,
        selector=ns.selector,
        workers=ns.workers,
        sync_period=ns.sync_period,
        burst_check_interval=ns.burst_check_interval,
        burst_qps=ns.burst_qps,
        reconcile_deadline=ns.reconcile_deadline,
        readiness_debounce=ns.readiness_debounce,
        react_to_pods=ns.react_to_pods,
        config=ControllerConfig(
            tolerance=ns.tolerance,
            downscale_stabilization_window_s=ns.downscale_stabilization,
            cpu_initialization_period_s=ns.cpu_initialization_period,
            initial_readiness_delay_s=ns.initial_readiness_delay,
            features=ns.feature_gates,
        ),
        metrics=MetricsAccess(
            url=ns.metrics_url or "",
            ca_file=ns.metrics_ca_file,
            insecure_skip_tls_verify=ns.metrics_insecure_skip_tls_verify,
            timeout=ns.metrics_timeout,
        ),
        prometheus=(
            PrometheusAccess(
                url=ns.prometheus_url,
                credentials=credentials,
                insecure_skip_tls_verify=ns.prometheus_insecure_skip_tls_verify,
                timeout=ns.metrics_timeout,  # a direct metric is a metrics call like any other
            )
            if ns.prometheus_url
            else None
        ),
        cluster_wide_query_namespaces=tuple(ns.cluster_wide_query_namespace),
        lease=_lease(ns) if ns.leader_elect else None,
        lease_buckets=ns.leader_elect_buckets,
        hot_namespace_targets=ns.leader_elect_hot_namespace_targets,
        identity=ns.leader_elect_identity,
        serving=serving_options_from_namespace(ns),
        auth=auth_options_from_namespace(ns, ns.kubeconfig or ""),
        shutdown_grace_period=ns.shutdown_grace_period,
        log_level=ns.log_level,
        log_format=ns.log_format,
    )


def parse_options(argv: Sequence[str]) -> AutoscalerOptions:
    """Options from command-line arguments; a bad flag exits 2 with a one-line message."""
    parser = build_parser()
    ns = parser.parse_args(argv)
    try:
        return options_from_namespace(ns)
    except ValueError as err:
        parser.error(str(err))
