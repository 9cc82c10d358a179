"""`surge simulate` on a long series: 14 days at 60 s resolution, two profiles (target: under a minute).

    .venv/bin/python bench/bench_simulate.py [--days 14] [--resolution 60]
    .venv/bin/python bench/bench_simulate.py --smoke   # 1 hour (run by the tests)

The series is synthetic but shaped like real traffic: a daily cycle, noise, and a short spike a day. The
profiles are a HorizontalAutoscaler with a fast scale-up behavior and the same spec with the built-in
HPA's settings (`--compare default`), both reconciling every 15 s: one decide() per profile per 15 s of
series. Prints the replay's wall time (both profiles, side by side on the machine's cores) and the time
to read the CSV and write the outputs.
"""

from __future__ import annotations

import argparse
import math
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from bench_common import parse_args, require

from surge.simulate.outputs import write_summary, write_timeline
from surge.simulate.plot import write_plot
from surge.simulate.profiles import default_profile, load_profile
from surge.simulate.profiles_parallel import replay_profiles
from surge.simulate.replay import Workload
from surge.simulate.series_csv import read_series_csv
from surge.simulate.summary import summarize

START = 1_770_000_000
CAPACITY = 100.0  # requests/s per pod


def web_autoscaler(max_replicas: int, target: str, behavior: dict[str, Any]) -> dict[str, Any]:
    """A HorizontalAutoscaler of Deployment web, 2 to `max_replicas` replicas, on the Pods metric
    http_requests with an average of `target` per pod."""
    return {
        "apiVersion": "autoscaling.surge.dev/v1alpha1",
        "kind": "HorizontalAutoscaler",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 2,
            "maxReplicas": max_replicas,
            "metrics": [
                {
                    "type": "Pods",
                    "pods": {
                        "metric": {"name": "http_requests"},
                        "target": {"type": "AverageValue", "averageValue": target},
                    },
                }
            ],
            "behavior": behavior,
        },
    }


SPEC = web_autoscaler(
    40,
    f"{CAPACITY:g}",
    {
        "scaleUp": {
            "stabilizationWindowSeconds": 0,
            "policies": [{"type": "Percent", "value": 400, "periodSeconds": 15}],
        },
        "scaleDown": {"stabilizationWindowSeconds": 120},
    },
)


def write_series(path: Path, days: float, resolution: float) -> int:
    """A daily cycle between about 300 and 2,500 requests/s, noise, and a 10-minute spike every day."""
    rng = random.Random(13)
    samples = int(days * 86400 / resolution)
    lines = ["timestamp,value"]
    for i in range(samples):
        t = i * resolution
        load = 1400 - 1100 * math.cos(2 * math.pi * t / 86400) + rng.gauss(0, 80)
        if 11 * 3600 <= t % 86400 < 11 * 3600 + 600:
            load += 1500
        lines.append(f"{START + t:.0f},{max(0.0, load):.1f}")
    path.write_text("\n".join(lines) + "\n")
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--days", type=float, default=14.0, help="series length")
    parser.add_argument("--resolution", type=float, default=60.0, help="seconds between samples")
    args = parse_args(parser, {"days": 1 / 24})
    with tempfile.TemporaryDirectory(prefix="bench-simulate-") as tmp:
        work = Path(tmp)
        samples = write_series(work / "load.csv", args.days, args.resolution)
        (work / "web.yaml").write_text(yaml.safe_dump(SPEC))

        started = time.perf_counter()
        series = read_series_csv(work / "load.csv")
        spec = load_profile(work / "web.yaml")
        profiles = [spec, default_profile(spec)]
        read = time.perf_counter() - started

        started = time.perf_counter()
        replays = replay_profiles(series, profiles, Workload(CAPACITY, 30.0, 2))
        replayed = time.perf_counter() - started

        started = time.perf_counter()
        summaries = {r.profile: summarize(r, CAPACITY) for r in replays}
        write_timeline(work / "timeline.csv", replays)
        write_summary(work / "summary.json", summaries)
        write_plot(work / "replicas.png", replays, summaries, CAPACITY)
        written = time.perf_counter() - started

    decisions = sum(math.floor(series.end / p.sync_period) + 1 for p in profiles)
    require(all(s.scale_events > 0 for s in summaries.values()), "a profile never scaled")
    require(replayed > 0 and decisions > 0, "no replay time")
    print(f"series: {samples:,} samples ({args.days:g} days at {args.resolution:g} s)")
    print("profiles: " + ", ".join(f"{p.name} (every {p.sync_period:g} s)" for p in profiles))
    print(f"replay: {decisions:,} decisions in {replayed:.2f} s ({decisions / replayed:,.0f} decisions/s)")
    print(f"read CSV and specs: {read:.2f} s; figures, timeline, summary and plot: {written:.2f} s")
    print(f"total: {read + replayed + written:.2f} s")
    for name, s in summaries.items():
        print(
            f"  {name}: {s.scale_events} scale writes, {s.pod_hours:.0f} pod-hours, "
            f"shortfall {s.shortfall_pod_seconds / 3600:.1f} pod-hours"
        )


if __name__ == "__main__":
    main()
