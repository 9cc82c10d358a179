"""Decisions per second of autoscaler.core.decide for 10/100 pods x 1/3 metrics (single core).

Run: .venv/bin/python bench/bench_algorithm.py [--seconds 1.0]
     .venv/bin/python bench/bench_algorithm.py --smoke   # a few milliseconds per case (run by the tests)
"""

from __future__ import annotations

import argparse
import time
from datetime import UTC, datetime, timedelta

from bench_common import parse_args, require

from autoscaler.core import History, decide
from autoscaler.core.types import (
    HPA,
    Container,
    ContainerUsage,
    CrossVersionObjectReference,
    ExternalMetricAnswer,
    HPASpec,
    LabelSelector,
    MetricAnswer,
    MetricIdentifier,
    MetricSpec,
    MetricTarget,
    Pod,
    PodCondition,
    PodMetricsItem,
    PodMetricValue,
    PodsMetricAnswer,
    ResourceMetricsAnswer,
    Scale,
    Snapshot,
)

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def build_snapshot(pod_count: int, metric_count: int) -> Snapshot:
    started = NOW - timedelta(hours=1)
    pods = tuple(
        Pod(
            name=f"web-{i}",
            labels={"app": "web"},
            phase="Running",
            ready_condition=PodCondition("True", started),
            start_time=started,
            containers=(Container("app", {"cpu": 200}), Container("sidecar", {"cpu": 50})),
        )
        for i in range(pod_count)
    )
    window = timedelta(seconds=30)
    resource = ResourceMetricsAnswer(
        tuple(
            PodMetricsItem(
                p.name,
                NOW,
                window,
                (ContainerUsage("app", {"cpu": 180}), ContainerUsage("sidecar", {"cpu": 20})),
            )
            for p in pods
        )
    )
    pods_metric = PodsMetricAnswer(tuple(PodMetricValue(p.name, 9000, NOW) for p in pods))
    external = ExternalMetricAnswer((120_000, 80_000), NOW)
    specs: list[MetricSpec] = [
        MetricSpec(type="Resource", name="cpu", target=MetricTarget("Utilization", average_utilization=60)),
        MetricSpec(
            type="Pods",
            metric=MetricIdentifier("requests_per_second"),
            target=MetricTarget("AverageValue", average_value=10_000),
        ),
        MetricSpec(
            type="External",
            metric=MetricIdentifier("queue_depth", LabelSelector({"queue": "jobs"})),
            target=MetricTarget("AverageValue", average_value=30_000),
        ),
    ]
    answers: list[MetricAnswer] = [resource, pods_metric, external]
    hpa = HPA(
        namespace="default",
        name="web",
        spec=HPASpec(
            scale_target_ref=CrossVersionObjectReference("Deployment", "web", "apps/v1"),
            min_replicas=1,
            max_replicas=500,
            metrics=tuple(specs[:metric_count]),
        ),
    )
    return Snapshot(
        hpa=hpa,
        scale=Scale(spec_replicas=pod_count, status_replicas=pod_count, selector="app=web"),
        pods=pods,
        metric_answers=tuple(answers[:metric_count]),
        now=NOW,
        history=History(),
        other_selectors={"default/other": "app=other"},
    )


def measure(snapshot: Snapshot, seconds: float) -> tuple[float, float]:
    """(decisions per wall-clock second, decisions per CPU second of this process)."""
    decide(snapshot)  # warm caches (selector parsing) as in a long-running daemon
    count = 0
    start, cpu_start = time.perf_counter(), time.process_time()
    deadline = start + seconds
    while True:
        for _ in range(50):
            decide(snapshot)
        count += 50
        now = time.perf_counter()
        if now >= deadline:
            return count / (now - start), count / (time.process_time() - cpu_start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=1.0, help="measuring time per case")
    args = parse_args(parser, {"seconds": 0.05})
    # The CPU-time rate is what one core sustains; the wall rate drops when other work shares it.
    print(f"{'pods':>5} {'metrics':>7} {'decisions/s':>12} {'per CPU-s':>10}")
    for pods in (10, 100):
        for metrics in (1, 3):
            wall, cpu = measure(build_snapshot(pods, metrics), args.seconds)
            require(wall > 0 and cpu > 0, f"no decision rate for {pods} pods x {metrics} metrics")
            print(f"{pods:>5} {metrics:>7} {wall:>12,.0f} {cpu:>10,.0f}")


if __name__ == "__main__":
    main()
