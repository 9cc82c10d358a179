"""The daemon's own Prometheus metrics (one registry per daemon, so tests can run several)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class Telemetry:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.reconciles = Counter(
            "surge_autoscaler_reconciles", "Reconciles by outcome.", ["outcome"], registry=r
        )
        self.reconcile_crashes = Counter(
            "surge_autoscaler_reconcile_crashes",
            "Reconciles (queue=reconcile) and burst checks (queue=burst) that raised instead of returning; "
            "the worker logs the traceback, retries the key with back-off and goes on.",
            ["queue"],
            registry=r,
        )
        self.burst_checks = Counter(
            "surge_autoscaler_burst_checks",
            "Burst checks by outcome (ok, scaled, deadline, api_error, invalid_spec, not_leader).",
            ["outcome"],
            registry=r,
        )
        self.reconcile_seconds = Histogram(
            "surge_autoscaler_reconcile_duration_seconds",
            "Time of one reconcile.",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.queue_depth = Gauge(
            "surge_autoscaler_queue_depth", "Keys waiting in the work queue.", registry=r
        )
        self.queue_wait = Histogram(
            "surge_autoscaler_queue_wait_seconds",
            "Time a key spent queued before a worker took it.",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.work_seconds = Histogram(
            "surge_autoscaler_work_duration_seconds",
            "Time from taking a key to marking it done.",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.metric_fetch = Histogram(
            "surge_autoscaler_metric_fetch_seconds",
            "Latency of metrics API calls.",
            ["api", "result"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.scale_writes = Counter(
            "surge_autoscaler_scale_writes", "Updates of a /scale subresource.", ["result"], registry=r
        )
        self.scale_conflicts = Counter(
            "surge_autoscaler_scale_write_conflicts", "409 answers to /scale updates (retried).", registry=r
        )
        self.sample_age = Histogram(
            "surge_autoscaler_metric_sample_age_at_scale_seconds",
            "Age of the newest metric sample a scale write was based on.",
            buckets=(0.5, 1, 2, 3, 5, 10, 15, 30, 60, 120, 300),
            registry=r,
        )
        self.is_leader = Gauge(
            "surge_autoscaler_leader", "1 while this replica holds the lease (with buckets: any).", registry=r
        )
        self.buckets_held = Gauge(
            "surge_autoscaler_buckets_held",
            "Buckets (--leader-elect-buckets) whose Lease this replica holds.",
            registry=r,
        )
        self.keys_owned = Gauge(
            "surge_autoscaler_keys_owned", "Autoscalers in the buckets this replica holds.", registry=r
        )
        self.bucket_takeovers = Counter(
            "surge_autoscaler_bucket_takeovers",
            "Buckets acquired from another replica, by how it had let go (released: given up, for balance "
            "or on shutdown; expired: it stopped renewing).",
            ["previous"],
            registry=r,
        )
        self.writes_dropped = Counter(
            "surge_autoscaler_writes_dropped",
            "Writes not sent because the lease was not renewed within the renew deadline when they were "
            "due to go out (write: scale, status, event).",
            ["write"],
            registry=r,
        )
        # Labelled children looked up once: `labels()` costs more than the observation itself.
        self._reconciles_by_outcome: dict[str, Counter] = {}
        self._fetch_by_result: dict[tuple[str, bool], Histogram] = {}

    def reconciled(self, outcome: str, seconds: float) -> None:
        counter = self._reconciles_by_outcome.get(outcome)
        if counter is None:
            counter = self._reconciles_by_outcome[outcome] = self.reconciles.labels(outcome=outcome)
        counter.inc()
        self.reconcile_seconds.observe(seconds)

    # QueueMetrics
    def depth(self, depth: int) -> None:
        self.queue_depth.set(depth)

    def queued_for(self, seconds: float) -> None:
        self.queue_wait.observe(seconds)

    def worked_for(self, seconds: float) -> None:
        self.work_seconds.observe(seconds)

    # FetchLatency
    def observe(self, api: str, seconds: float, ok: bool) -> None:
        child = self._fetch_by_result.get((api, ok))
        if child is None:
            child = self._fetch_by_result[api, ok] = self.metric_fetch.labels(
                api=api, result="ok" if ok else "error"
            )
        child.observe(seconds)
