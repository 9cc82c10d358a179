"""A randomized fault campaign over the whole fleet, judged from the audit log: does Surge keep its
promises under any mix of crashes, pauses, partitions, API-server errors and a metrics outage?

    .venv/bin/python bench/chaos_fleet.py --minutes 10 --seed 1
    .venv/bin/python bench/chaos_fleet.py --smoke     # 12 targets, 36 s of faults and quiet (in the suite)

The fleet (bench/chaos/fleet.py): the simulated API server with its audit log at level Request, a real
Prometheus behind a fault proxy, 2 adapter replicas behind one Service, 3 autoscaler replicas sharing the
targets by bucket Leases, and `--targets` HorizontalAutoscalers on requests per second (Pods) and CPU
(Resource) whose load changes. The seed draws a schedule of overlapping faults (bench/chaos/schedule.py:
SIGKILL and SIGSTOP of any daemon, API-server errors, latency, cut and expired watches, partitions of one
client, restarts; Prometheus paused, slow, failing, down or answering NaN; config reloads; load steps),
then the fleet is left alone for its quiet tail. At the end the invariants (bench/chaos/invariants.py)
are judged and printed as a table, with the count of each fault applied. A violation prints the seed and
the schedule that reproduce it, and the run exits 1.

Lease timings are shorter than the defaults (8 s lease, 5 s renew deadline; 4 s and 2.5 s in the smoke)
so that more takeovers fit in a campaign; injected API latency stays under lease - renew deadline, the
bound within which a Lease can fence writes at all (bench/chaos/schedule.py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import yaml
from bench_common import parse_args
from chaos import invariants
from chaos.fleet import LEASE_NAME, MANIFESTS, MAX_REPLICAS, MIN_REPLICAS, Fleet, Sizes
from chaos.schedule import PROMETHEUS, Fault, Plan, draw

from autoscaler.buckets import bucket_lease_name, bucket_of
from shared.quantity import parse_quantity

READY_WITHIN = 30.0  # (d): every daemon ready this long after the last fault


def memory_limits() -> dict[str, float]:
    """Each daemon's container memory limit in MiB, from the shipped manifests."""
    limits = {}
    for kind in ("adapter", "autoscaler"):
        documents = yaml.safe_load_all((MANIFESTS / f"{kind}-deployment.yaml").read_text())
        deployment = next(d for d in documents if d and d.get("kind") == "Deployment")
        container = deployment["spec"]["template"]["spec"]["containers"][0]
        limits[kind] = float(parse_quantity(container["resources"]["limits"]["memory"])) / (1 << 20)
    return limits


async def campaign(args: argparse.Namespace) -> int:
    sizes = Sizes(
        targets=args.targets,
        namespaces=max(1, args.targets // 5),
        period=args.period,
        lease=args.lease,
        renew=args.renew,
        retry=args.retry,
    )
    seconds = args.minutes * 60
    quiet = sizes.period + sizes.lease + 5 + args.slack
    workdir = Path(tempfile.mkdtemp(prefix="surge-chaos-"))
    fleet = Fleet(workdir, sizes, args.seed)
    daemons = ("adapter-0", "adapter-1", "autoscaler-0", "autoscaler-1", "autoscaler-2")
    plan = Plan(
        seconds=seconds,
        daemons=(*daemons, PROMETHEUS),
        clients=daemons,
        warmup=args.warmup,
        quiet=quiet,
        mean_gap=args.mean_gap,
        max_latency=min(1.5, (sizes.lease - sizes.renew) / 2),
    )
    faults = draw(plan, args.seed)
    print(
        f"seed {args.seed}: {len(faults)} faults over {seconds:g} s, {sizes.targets} targets; "
        f"workdir {workdir}"
    )
    counts: dict[str, int] = {}
    stop = asyncio.Event()
    try:
        await fleet.start()
        watcher = asyncio.create_task(fleet.watch_over(stop))
        deadline = time.monotonic() + 120
        while not fleet.all_ready():
            if time.monotonic() > deadline:
                raise SystemExit(f"the fleet was not ready within 120 s; logs in {workdir}")
            await asyncio.sleep(0.5)
        print(f"fleet ready; campaign of {seconds:g} s starts")
        schedule = asyncio.create_task(fleet.run_schedule(faults, counts))
        await asyncio.sleep(seconds)
        await schedule
        quiet_from = fleet.started_at + max((f.end for f in faults), default=0.0)
        stop.set()
        await watcher
        ready_at = {name: fleet.readiness.ready_since(name) for name in daemons}
        await asyncio.gather(*(asyncio.to_thread(d.stop) for d in fleet.daemons.values()))
        verdict = await judge(fleet, sizes, quiet_from, ready_at)
    finally:
        stop.set()
        await fleet.stop()
    return report(args, verdict, counts, faults, fleet, workdir)


async def judge(
    fleet: Fleet, sizes: Sizes, quiet_from: float, ready_at: dict[str, float | None]
) -> invariants.Verdict:
    leases = {bucket_lease_name(LEASE_NAME, b, sizes.buckets): b for b in range(sizes.buckets)}
    writers = frozenset(name for name in fleet.daemons if name.startswith("autoscaler"))
    with fleet.audit_log.open() as lines:
        events = [json.loads(line) for line in lines]
    audit = invariants.parse_audit(events, leases.get, writers)
    decisions = [
        decision
        for writer in sorted(writers)
        for line in fleet.log_lines(writer)
        if (decision := invariants.parse_decision(writer, line)) is not None
    ]
    verdict = invariants.Verdict()
    paused = frozenset((t.namespace, t.name) for t in fleet.targets if t.paused)
    invariants.judge_writes(
        verdict,
        audit,
        decisions,
        # Five targets a namespace, below --leader-elect-hot-namespace-targets: never split, so a target's
        # bucket is its namespace's.
        lambda namespace, name: bucket_of(namespace, sizes.buckets),
        (MIN_REPLICAS, MAX_REPLICAS),
        paused,
    )
    live = [(t.namespace, t.name) for t in fleet.targets if not t.paused]
    invariants.judge_recovery(
        verdict, audit, live, quiet_from, sizes.period + sizes.lease + 5, ready_at, READY_WITHIN
    )
    limits = memory_limits()
    invariants.judge_memory(
        verdict, fleet.rss_peak, {name: limits[name.split("-")[0]] for name in fleet.rss_peak}
    )
    judge_values(verdict, fleet, decisions)
    return verdict


def judge_values(verdict: invariants.Verdict, fleet: Fleet, decisions: list[invariants.Decision]) -> None:
    """(f) on every Pods decision, against what Prometheus answered the adapters (through the proxy)."""
    qps = {(t.namespace, t.name) for t in fleet.targets if t.metric == "qps"}
    with (fleet.workdir / "prometheus-answers.jsonl").open("w") as kept:  # (kept with a failed run's logs)
        for answer in fleet.proxy.answers:
            line = {"time": answer.time, "query": answer.query, "values": answer.values}
            kept.write(json.dumps({**line, "corrupted": sorted(answer.corrupted)}) + "\n")
    by_namespace: dict[str, list[invariants.PromAnswer]] = {}
    for answer in fleet.proxy.answers:
        namespace = _namespace_of(answer.query)
        if "http_requests_total" in answer.query and namespace:
            by_namespace.setdefault(namespace, []).append(
                invariants.PromAnswer(answer.time, answer.values, answer.corrupted)
            )
    for decision in decisions:
        if (decision.namespace, decision.name) in qps:
            invariants.judge_values(verdict, decision, by_namespace.get(decision.namespace, []))


def _namespace_of(query: str) -> str:
    """The namespace a query's `namespace="..."` matcher selects ("" : none)."""
    start = query.find('namespace="')
    if start < 0:
        return ""
    start += len('namespace="')
    return query[start : query.find('"', start)]


def report(
    args: argparse.Namespace,
    verdict: invariants.Verdict,
    counts: dict[str, int],
    faults: list[Fault],
    fleet: Fleet,
    workdir: Path,
) -> int:
    print()
    print("faults applied: " + ", ".join(f"{kind} {n}" for kind, n in sorted(counts.items())))
    proxy = fleet.proxy
    print(f"Prometheus requests through the proxy: {proxy.requests}, samples made NaN: {proxy.nan_samples}")
    print(
        "peak RSS (MiB): " + ", ".join(f"{name} {peak:.0f}" for name, peak in sorted(fleet.rss_peak.items()))
    )
    print()
    print(f"{'invariant':<48} {'checked':>8} {'violations':>10}")
    names = {
        "a": "(a) one writer per bucket and lease term",
        "b": "(b) writes = decisions = formula, read in term",
        "c": "(c) within min..max, none while paused",
        "d": "(d) recovered within bounds after the faults",
        "e": "(e) RSS under the manifest limit",
        "f": "(f) metric values = Prometheus",
    }
    for key, title in names.items():
        print(f"{title:<48} {verdict.checked.get(key, 0):>8} {len(verdict.violations.get(key, [])):>10}")
    if verdict.skipped:
        print("not judged: " + ", ".join(f"{what} {n}" for what, n in sorted(verdict.skipped.items())))
    print(f"violations: {verdict.total}")
    if verdict.total:
        for key, found in sorted(verdict.violations.items()):
            for line in found[:5]:
                print(f"  ({key}) {line}")
        print(
            f"reproduce: .venv/bin/python bench/chaos_fleet.py --seed {args.seed} --minutes {args.minutes:g} "
            f"--targets {args.targets}; the schedule:"
        )
        for fault in faults:
            print("  " + fault.describe())
        print(f"logs and audit log kept in {workdir}")
        return 1
    shutil.rmtree(workdir, ignore_errors=True)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--targets", type=int, default=150)
    parser.add_argument("--period", type=float, default=5.0, help="the autoscalers' --sync-period")
    parser.add_argument("--lease", type=float, default=8.0)
    parser.add_argument("--renew", type=float, default=5.0)
    parser.add_argument("--retry", type=float, default=1.0)
    parser.add_argument("--warmup", type=float, default=20.0, help="seconds before the first fault")
    parser.add_argument("--mean-gap", type=float, default=6.0, help="mean seconds between faults")
    parser.add_argument("--slack", type=float, default=10.0, help="quiet seconds beyond the recovery bound")
    args = parse_args(
        parser,
        smoke={
            "minutes": 0.6, "targets": 12, "period": 2.0, "lease": 4.0, "renew": 2.5, "retry": 0.5,
            "warmup": 5.0, "mean_gap": 2.0, "slack": 3.0,
        },
    )  # fmt: skip
    return asyncio.run(campaign(args))


if __name__ == "__main__":
    sys.exit(main())
