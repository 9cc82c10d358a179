"""docs/report.png: a realistic `surge report -o html` page as headless Chromium shows it (issue 35).

    .venv/bin/python scripts/report_screenshot.py [--out docs/report.png] [--width 1280] [--height 1780]

Three targets over a Wednesday of bench/trace_generator.py's business traffic at a 60 s step (a steep
morning rise, lunch dip, evening peak, 1 % noise; one unforecastable spike in the days replayed), each
with its own peak and per-pod target. Both sides' replicas are `surge simulate`'s replay of that load
(surge.simulate.replay, the algorithm core the daemon runs), pods ready 180 s after a scale-up: the
incumbent is the built-in HPA's settings for the spec (`--compare default`), Surge the same spec with a
fast scale-up and spec.predictive on the daily season, both replayed from the Monday so the forecast has
two days of history. The metric both sides read is the incumbent's pods' average (a shadow reads the pods
the incumbent runs), so the reads do not differ. The page is built through surge.report's own analysis and
renderer, as `surge report` builds it from Prometheus, and loaded with scripts/chromium.py (the network
off) in a window `--width` wide: the summary and the first two targets.
"""

from __future__ import annotations

import argparse
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from bench.trace_generator import DAY, trace
from scripts import chromium
from surge.report.analysis import Trace, analyse
from surge.report.render import Entry, render
from surge.report.rerun import simulate_command
from surge.report.startup import Startup
from surge.simulate.profiles import default_profile, load_profile
from surge.simulate.replay import SAMPLE, Replay, Series, Workload, replay

REPO = Path(__file__).resolve().parents[1]
STEP = 60.0  # seconds: trace_generator's resolution, and the report's step
STARTUP = 180.0  # seconds for a new pod to turn ready, in the replay and the report alike
DAYS = 3  # replayed; the report is on the last, after two days of the forecast's history
PREDICTIVE = {"lookbackSeconds": 2 * DAY, "horizonSeconds": 300, "seasonsSeconds": [DAY]}
PROMETHEUS = "http://prometheus.monitoring:9090"


@dataclass(frozen=True, slots=True)
class Target:
    namespace: str
    name: str
    peak: float  # the weekday peak of the workload's total, requests/s
    per_pod: float  # the target: requests/s per pod
    max_replicas: int
    seed: int


TARGETS = (
    Target("shop", "web", 2000.0, 90.0, 30, 7),
    Target("shop", "checkout", 600.0, 40.0, 20, 11),
    Target("search", "api", 1200.0, 70.0, 25, 3),
)

FAST_SCALE_UP = {
    "scaleUp": {
        "stabilizationWindowSeconds": 0,
        "policies": [{"type": "Percent", "value": 400, "periodSeconds": 15}],
    },
    "scaleDown": {"stabilizationWindowSeconds": 120},
}


def _spec(target: Target) -> dict[str, Any]:
    """Surge's HorizontalAutoscaler of the target: a Pods metric with `per_pod` as its average target."""
    return {
        "apiVersion": "autoscaling.surge.dev/v1alpha1",
        "kind": "HorizontalAutoscaler",
        "metadata": {"name": target.name, "namespace": target.namespace},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target.name},
            "minReplicas": 2,
            "maxReplicas": target.max_replicas,
            "metrics": [
                {
                    "type": "Pods",
                    "pods": {
                        "metric": {"name": "http_requests"},
                        "target": {"type": "AverageValue", "averageValue": f"{target.per_pod:g}"},
                    },
                }
            ],
            "behavior": FAST_SCALE_UP,
            "predictive": PREDICTIVE,
        },
    }


def _on_grid(timeline: Replay, first: int, steps: int) -> list[tuple[float, float | None]]:
    """(desired replicas, metric value read) at each of `steps` samples from sample index `first`."""
    samples = [(row.desired, row.metric_value) for row in timeline.rows if row.event == SAMPLE]
    return [(float(desired), value) for desired, value in samples[first : first + steps]]


def _trace(target: Target, work: Path) -> Trace:
    """The target's series over the Tuesday, as the report would read them from Prometheus."""
    samples = trace(DAYS, STEP, target.seed, noise=0.01, spikes=1, peak=target.peak)
    series = Series(samples[0][0], tuple(t - samples[0][0] for t, _ in samples), tuple(v for _, v in samples))
    spec_file = work / f"{target.namespace}-{target.name}.yaml"
    spec_file.write_text(yaml.safe_dump(_spec(target)))
    surge_profile = load_profile(spec_file)
    workload = Workload(target.per_pod, STARTUP, initial_replicas=2)
    steps = int(DAY // STEP)
    first = (DAYS - 1) * steps
    incumbent = _on_grid(replay(series, default_profile(surge_profile), workload), first, steps)
    surge = _on_grid(replay(series, surge_profile, workload), first, steps)
    decided = [d for d, _ in incumbent]
    read = [v for _, v in incumbent]  # shadowed, Surge reads the metric of the incumbent's pods
    return Trace(
        namespace=target.namespace,
        name=target.name,
        metric_name="http_requests",
        times=[t for t, _ in samples[first : first + steps]],
        step=STEP,
        load=read,
        target=[target.per_pod] * steps,
        target_type="average",
        incumbent=decided,
        running=decided,
        surge=[d for d, _ in surge],
        max_replicas=[float(target.max_replicas)] * steps,
        incumbent_load=read,
    )


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")


def page() -> str:
    """The report's HTML page of the three targets."""
    entries = []
    with tempfile.TemporaryDirectory(prefix="surge-report-screenshot-") as scratch:
        for target in TARGETS:
            t = _trace(target, Path(scratch))
            start, end = int(t.times[0]), int(t.times[-1])
            command = simulate_command(t, PROMETHEUS, start, end, int(STEP))
            entries.append(Entry(analyse(t, STARTUP, 300.0), t, command, Startup(STARTUP, "flag")))
    first = entries[0].trace.times
    return render(entries, {"start": _iso(first[0]), "end": _iso(first[-1]), "step": int(STEP)}, "html")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "report.png", help="the PNG to write")
    parser.add_argument("--width", type=int, default=1280, help="the window's width in pixels (default 1280)")
    parser.add_argument(
        "--height",
        type=int,
        default=1780,
        help="the window's height in pixels: the screenshot's (default 1780)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="surge-report-screenshot-") as scratch:
        html = Path(scratch) / "report.html"
        html.write_text(page())
        png = chromium.load(html, args.width, args.height).png
    args.out.write_bytes(png)
    print(f"wrote {args.out} ({len(png) / 1024:.0f} KiB, {args.width} x {args.height})")


if __name__ == "__main__":
    main()
