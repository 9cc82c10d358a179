"""What field management adds to each write through the simulated API server: microseconds per
FieldTracker.update (a replace or patch recording its Update entry) and FieldTracker.apply (a server-side
apply: merge, ownership, pruning), for Deployments of growing size (containers x env vars) and for a
HorizontalAutoscaler status write (what the autoscaler daemon does every sync). Median and worst of the
rounds, each round the mean over `--writes` writes.

    .venv/bin/python bench/bench_field_manager.py [--writes 500] [--rounds 5]
    .venv/bin/python bench/bench_field_manager.py --smoke   # seconds
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from sim.apiserver.managedfields import FieldTracker
from sim.apiserver.typeschema import crd_node, model_node

CRD_FILE = Path(__file__).resolve().parents[1] / "manifests" / "crd-horizontalautoscaler.yaml"


def _deployment(containers: int, env: int, replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}}, "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [
                {"name": f"c{c}", "image": "nginx:1.27", "ports": [{"containerPort": 8000 + c}],
                 "env": [{"name": f"E{i}", "value": str(i)} for i in range(env)]}
                for c in range(containers)
            ]},
        }},
    }


def _hza() -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling.surge.dev/v1alpha1", "kind": "HorizontalAutoscaler",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                 "minReplicas": 1, "maxReplicas": 10},
        "status": {"currentReplicas": 1, "desiredReplicas": 1, "targets": "50%/60%", "conditions": [
            {"type": t, "status": "True", "reason": "R", "message": "m", "lastTransitionTime": "t"}
            for t in ("AbleToScale", "ScalingActive", "ScalingLimited")]},
    }


def _time(write: Callable[[], None], writes: int, rounds: int) -> tuple[float, float]:
    """(median, worst) over the rounds of the mean microseconds per write."""
    means = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(writes):
            write()
        means.append((time.perf_counter() - start) / writes * 1e6)
    return statistics.median(means), max(means)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--writes", type=int, default=500, help="writes per round")
    parser.add_argument("--rounds", type=int, default=5, help="rounds (median and worst are over these)")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for the test suite")
    args = parser.parse_args()
    writes, rounds = (20, 2) if args.smoke else (args.writes, args.rounds)

    deployment_node = model_node("V1Deployment")
    print(f"{'object':<34}{'update median':>15}{'worst':>9}{'apply median':>15}{'worst':>9}  (us per write)")
    for containers, env in ((1, 0), (1, 10), (3, 50)):
        tracker = FieldTracker(deployment_node, "bench", "apps/v1", None, True, "2026-01-01T00:00:00Z")
        scaled = _deployment(containers, env, 3)
        created = _deployment(containers, env, 2)
        tracker.update(None, created)  # as created by a POST, then replaced or patched
        applied = tracker.apply(None, _deployment(containers, env, 2), False)  # as created by an apply

        def update(stored: dict[str, Any] = created, scaled: dict[str, Any] = scaled,
                   tracker: FieldTracker = tracker) -> None:
            tracker.update(stored, copy.deepcopy(scaled))

        def apply(stored: dict[str, Any] = applied, scaled: dict[str, Any] = scaled,
                  tracker: FieldTracker = tracker) -> None:
            tracker.apply(stored, scaled, False)

        update_median, update_worst = _time(update, writes, rounds)
        apply_median, apply_worst = _time(apply, writes, rounds)
        label = f"Deployment {containers} containers x {env} env"
        print(f"{label:<34}{update_median:>15.0f}{update_worst:>9.0f}{apply_median:>15.0f}{apply_worst:>9.0f}")

    schema = yaml.safe_load(CRD_FILE.read_text())["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    status_tracker = FieldTracker(crd_node(schema), "surge-autoscaler", "autoscaling.surge.dev/v1alpha1",
                                  "status", True, "2026-01-01T00:00:00Z")
    hza = _hza()
    status_tracker.update(None, hza)
    moved = copy.deepcopy(hza)
    moved["status"]["currentReplicas"] = 2

    def status_write() -> None:
        status_tracker.update(hza, copy.deepcopy(moved))

    median, worst = _time(status_write, writes, rounds)
    print(f"{'HorizontalAutoscaler status':<34}{median:>15.0f}{worst:>9.0f}{'-':>15}{'-':>9}")


if __name__ == "__main__":
    main()
