"""Active-active autoscaler replicas (--leader-elect-buckets): how the work splits, how fast a dead
replica's targets are taken over, and that a paused one writes nothing for buckets it lost.

R `python -m autoscaler` replicas (processes, each a user of its own in the simulated API server, whose
audit log is on) share T HorizontalAutoscalers x P pods in T/10 namespaces at a 15 s period; one target
in ten reads a metric that jumps between half and twice its target, so its status is written on every
reconcile (writes to check), the others sit at their target. With `--hot-namespace-targets H`, H of the T
are in one namespace (`hot`) and the others in (T - H)/10 namespaces: the replicas split it over the
buckets (above --hot-after, their --leader-elect-hot-namespace-targets). A target counts as reconciled
when its metric is read (the metrics endpoint records each read and who made it): a reconcile reads it
once, after the scale, right before it decides; a scale read ahead of a takeover is no reconcile.

1. One replica alone holds every bucket: its RSS once every target was reconciled and it ran as long as
   the replicas do before theirs is read (the baseline).
2. R replicas started together: per replica the targets owned, reconciles/s, p99 queue wait,
   CPU and RSS over `--measure` seconds, once the buckets are balanced; and (read from the audit log at
   the end) that every target was reconciled in the measurement's periods.
3. SIGKILL the replica owning most, right after it renewed its buckets (the worst case): seconds until
   every one of its targets was reconciled (its metric read) by a survivor, and the CPU each process used
   meanwhile.
4. SIGSTOP another past its lease, SIGCONT it: the writes (audit log) it made for a target whose bucket
   Lease another replica had written since it last did (must be 0), and the writes its fence dropped.
5. A replica joins late: seconds until the buckets are balanced again, and the longest any target went
   without a reconcile around the handover (must stay under a period + 15 s).

    .venv/bin/python bench/bench_autoscaler_sharding.py [--replicas 3] [--autoscalers 15000] [--buckets 10]
    .venv/bin/python bench/bench_autoscaler_sharding.py --hot-namespace-targets 3000   # one of 3,000
    .venv/bin/python bench/bench_autoscaler_sharding.py --smoke   # 60 targets, 2 s period, 3 s lease

The simulated API server runs in this process (plain HTTP), the metrics endpoint in a child process: all
share the machine's cores with the replicas.

Measured on 2 cores otherwise idle (load average 1.0-1.8 with the benchmark's own processes), defaults,
the current version (docs/deploy.md section 18 has each run, and the versions before), runs U-W:
996-999 reconciles/s in sum with every target reconciled in every measured period, worst p99 queue wait
0.002 s (the version before: 0.44-0.96 s, its reconciles bunched every period), shares 29-39 %, SIGKILL
right after a renewal: the buckets taken 15.0 s after the kill, the last orphan reconciled after
16.8-17.4 s (the version before: 17.5-18.0 s), 0 stale writes, late joiner balanced 2.9-3.1 s after it
was ready with no target unreconciled for more than 22.2-23.0 s. RSS: 54 % of one replica holding all for
replica-0, which holds 4 of the 10 buckets, 46-48 % for the others. (Those runs counted a reconcile
at the target's scale read, and started the replicas one after another.)

Issue 32 (hot namespaces, weighed buckets, scales read ahead of a takeover), on the same 2 cores shared
with other jobs (load average 5-12): at 3,000 targets with the replicas at --qps 200 --burst 400 (a
takeover paced by the client's rate limiter, as the issue's size is at the defaults), the last orphan
2.3 s after the last bucket was taken when its scale was read at its first reconcile, 0.2 s with the
scales read ahead. At the defaults (load average 3.6-6.0): the last orphan 19.3 s after the kill, 3.9 s
after the buckets (the survivors' lists of the orphans' namespaces ran until the expiry, so nothing was
read ahead); RSS 45-50 % of one replica holding all; with --hot-namespace-targets 3000, RSS 53-57 % and
shares 30-40 %. docs/deploy.md section 18 has each run, and the ones starved by other jobs.

The current version (scales read ahead once the holder is orphaned, answers decoded with orjson, young
collections every 10,000 allocations, this metrics endpoint on asyncio's Protocol), defaults, 2 cores
otherwise idle, three runs: buckets taken 14.6-15.0 s after the kill, orphans reconciled median
15.1-15.3 s, the last at 15.7, 15.7 and 15.8 s (lease + 1 s: 16 s; one run had a profiler attached);
996-1,000 reconciles/s, 0 stale writes, late joiner's longest gap 22.4-23.3 s.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import math
import multiprocessing
import os
import signal
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench_autoscaler_common import (
    HOT_NAMESPACE,
    AuditEntry,
    AuditTail,
    Daemon,
    MetricRead,
    cpu_seconds,
    free_port,
    histogram_quantile,
    metric_reads,
    rss_mib,
    seed_world,
    target_of,
    total,
)
from bench_common import parse_args, require
from metrics_stub import serve_metrics

from autoscaler.buckets import bucket_lease_name, bucket_of, bucket_of_key, plan, weights
from sim.apiserver import ApiServer
from sim.runner import ServerThread

LEASES = ("coordination.k8s.io", "leases")
LEASE_NAME = "surge-autoscaler"
RECONCILES = "surge_autoscaler_reconciles_total"
WAIT = "surge_autoscaler_queue_wait_seconds"


class Cluster:
    """The simulated API server with its audit log, the metrics endpoint, and the replicas."""

    def __init__(
        self, api: ServerThread[ApiServer], args: argparse.Namespace, workdir: Path, metrics_url: str
    ):
        self.api = api
        self.args = args
        self.workdir = workdir
        self.metrics_url = metrics_url
        self.audit = AuditTail(workdir / "audit.log")
        self.replicas: dict[str, Daemon] = {}
        self.lease_names = [bucket_lease_name(LEASE_NAME, b, args.buckets) for b in range(args.buckets)]

    def start(self, name: str) -> Daemon:
        a = self.args
        kubeconfig = self.api.write_kubeconfig(self.workdir / f"{name}.kubeconfig", user=name)
        flags = [
            "--leader-elect",
            f"--leader-elect-identity={name}",
            "--leader-elect-resource-namespace=default",
            f"--leader-elect-buckets={a.buckets}",
            f"--leader-elect-lease-duration={a.lease:g}s",
            f"--leader-elect-renew-deadline={a.lease * 2 / 3:g}s",
            f"--leader-elect-retry-period={a.lease * 2 / 15:g}s",
            f"--leader-elect-hot-namespace-targets={a.hot_after}",
            *([f"--qps={a.qps:g}"] if a.qps is not None else []),
            *([f"--burst={a.burst}"] if a.burst is not None else []),
            *([f"--workers={a.workers}"] if a.workers is not None else []),
            f"--sync-period={a.period:g}s",
            "--shutdown-grace-period=3s",
            f"--log-level={a.log_level}",
        ]
        daemon = Daemon.start(kubeconfig, self.metrics_url, self.workdir / f"{name}.log", *flags)
        self.replicas[name] = daemon
        return daemon

    def whole_log(self) -> list[AuditEntry]:
        """Every write in the audit log from the start."""
        return AuditTail(self.audit.path).read()

    def renewals(self, leases: Iterable[str]) -> list[str]:
        """The renewTime of each of `leases`, as the API server has it."""
        names = sorted(leases)

        def read() -> list[str]:
            store = self.api.server.store
            return [str(store.get(LEASES, "default", name)["spec"].get("renewTime")) for name in names]

        return list(self.api.call(read))

    def holders(self) -> list[str]:
        """Each bucket's holder, as the API server has it."""

        def read() -> list[str]:
            out = []
            for name in self.lease_names:
                try:
                    out.append(
                        str(
                            self.api.server.store.get(LEASES, "default", name)["spec"].get("holderIdentity")
                            or ""
                        )
                    )
                except Exception:
                    out.append("")
            return out

        return list(self.api.call(read))

    def balanced(self, names: list[str]) -> bool:
        """Every bucket held by `names` as the plan weighed by the buckets' targets has it."""
        held = self.holders()
        targets = [0] * self.args.buckets
        for t in self.targets():
            targets[self.bucket_of(t)] += 1
        return "" not in held and set(held) <= set(names) and plan(held, names, weights(targets)) == held

    def targets_of(self, holder: str) -> list[tuple[str, str]]:
        held = self.holders()
        return [t for t in self.targets() if held[self.bucket_of(t)] == holder]

    def targets(self) -> list[tuple[str, str]]:
        a = self.args
        return [target_of(i, a.namespaces, a.hot_namespace_targets) for i in range(a.autoscalers)]

    def bucket_of(self, target: tuple[str, str]) -> int:
        return bucket_of_target(target, self.args)


def bucket_of_target(target: tuple[str, str], args: argparse.Namespace) -> int:
    """The bucket of a target as the replicas see it once settled: by key in the hot namespace when it
    holds more than --hot-after targets, by namespace otherwise."""
    namespace, name = target
    if namespace == HOT_NAMESPACE and 0 < args.hot_after < args.hot_namespace_targets:
        return bucket_of_key(namespace, name, args.buckets)
    return bucket_of(namespace, args.buckets)


async def wait_for(check: object, within: float, what: str, every: float = 0.2) -> float:
    started = time.monotonic()
    while time.monotonic() - started < within:
        if check():  # type: ignore[operator]
            return time.monotonic() - started
        await asyncio.sleep(every)
    raise SystemExit(f"benchmark failed: {what} not within {within:g} s")


async def wait_for_async(
    check: Callable[[], Awaitable[bool]], within: float, what: str, every: float
) -> None:
    started = time.monotonic()
    while time.monotonic() - started < within:
        if await check():
            return
        await asyncio.sleep(every)
    raise SystemExit(f"benchmark failed: {what} not within {within:g} s")


async def all_reconciled(daemon: Daemon, count: int, within: float) -> None:
    await daemon.wait_for(lambda m: total(m, RECONCILES) >= count, within)


def stale_writes(entries: list[AuditEntry], users: set[str], args: argparse.Namespace) -> list[AuditEntry]:
    """Namespaced writes (not Leases) by a replica for a target whose bucket Lease another replica wrote
    after it last did, replaying the audit log in the order the API server received the requests (an
    event is named after its target: `<name>.<suffix>`)."""
    buckets = args.buckets
    lease_writer: dict[str, str] = {}
    stale = []
    for e in sorted(entries, key=lambda e: e.received):
        # (TokenReviews and SubjectAccessReviews, cluster-wide, are how a replica checks its own callers.)
        if e.user not in users or e.code >= 300 or e.verb == "get" or not e.namespace:
            continue
        if e.resource == "leases":
            lease_writer[e.name] = e.user
        else:
            bucket = bucket_of_target((e.namespace, e.name.split(".")[0]), args)
            if lease_writer.get(bucket_lease_name(LEASE_NAME, bucket, buckets)) != e.user:
                stale.append(e)
    return stale


def lease_writes(entries: list[AuditEntry], since: datetime, users: list[str]) -> dict[str, float]:
    """Each Lease's first successful write by one of `users` after `since`: seconds after it."""
    out: dict[str, float] = {}
    for e in entries:
        if e.resource == "leases" and e.user in users and e.code < 300 and e.received >= since:
            seconds = (e.received - since).total_seconds()
            out[e.name] = min(out.get(e.name, seconds), seconds)
    return out


def spread_of(values: Iterable[float | None]) -> str:
    known = sorted(v for v in values if v is not None)
    if not known:
        return "(none seen)"
    return f"{known[0]:.1f} s" if len(known) == 1 else f"{known[0]:.1f}-{known[-1]:.1f} s"


def reconciles_by_target(
    reads: list[MetricRead], since: datetime, until: datetime | None = None
) -> dict[tuple[str, str], list[tuple[datetime, str]]]:
    """Each target's reconciles (the reads of its metric: once each, right before the decision) and by
    whom, from `since` until `until`."""
    out: dict[tuple[str, str], list[tuple[datetime, str]]] = defaultdict(list)
    for r in reads:
        if r.when >= since and (until is None or r.when < until):
            out[(r.namespace, r.name)].append((r.when, r.user))
    return out


async def run(args: argparse.Namespace) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="bench-sharding-"))
    metrics_port = free_port()
    endpoint = multiprocessing.Process(
        target=serve_metrics, args=(metrics_port, args.pods, {}, {"flappy"}, True), daemon=True
    )
    endpoint.start()
    n = args.autoscalers
    first_pass = max(60.0, n / 100)  # seconds allowed for every target's first reconcile
    with ServerThread(
        ApiServer(tls=False, audit_log=workdir / "audit.log", history_size=max(1000, 4 * n))
    ) as api:
        api.call(
            lambda: seed_world(
                api.server.store,
                n,
                args.pods,
                args.namespaces,
                None,
                lambda i: "flappy" if i % 10 == 0 else "rps",
                hot=args.hot_namespace_targets,
            ),
            timeout=3600,
        )
        # The simulated API server shares this process's heap: the seeded world (and the audit entries
        # read later) go to the permanent generation, so no full collection stops it for seconds.
        gc.freeze()
        cluster = Cluster(api, args, workdir, f"http://127.0.0.1:{metrics_port}")
        print(f"work folder (audit log, replicas' logs): {workdir}")
        load = os.getloadavg()
        hot = (
            f" (and {args.hot_namespace_targets} in namespace {HOT_NAMESPACE})"
            if args.hot_namespace_targets
            else ""
        )
        print(
            f"sharding: {args.replicas} replicas, {n} autoscalers x {args.pods} pods in {args.namespaces} "
            f"namespaces{hot}, {args.buckets} buckets, period {args.period:g} s, lease {args.lease:g} s; "
            f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} on {os.cpu_count()} cores"
        )
        try:
            # 1. One replica holding all.
            solo = cluster.start("solo")
            await solo.wait_ready(first_pass)
            await wait_for(
                lambda: cluster.holders() == ["solo"] * args.buckets, first_pass, "solo holding all"
            )
            await all_reconciled(solo, n, first_pass)
            # Measured after as long a run as the replicas' below (a period and the measurement), so
            # both are read at the same stage: the decision records and histories grow for a while.
            await asyncio.sleep(args.period + 2 + args.measure)
            solo_rss = rss_mib(solo.proc.pid)
            print(f"one replica holding all {args.buckets} buckets: RSS {solo_rss:.0f} MiB")
            solo.stop()
            del cluster.replicas["solo"]

            # 2. R replicas, started one after another.
            names = [f"replica-{i}" for i in range(args.replicas)]
            # Started together, as a Deployment's pods are: one after another, each once the one before
            # was ready, a start-up slower than the cold-start wait (a loaded machine) left the last one
            # out of the first split, and the others with the memory of more buckets than their share.
            for daemon in [cluster.start(name) for name in names]:
                await daemon.wait_ready(first_pass)
            took = await wait_for(lambda: cluster.balanced(names), 60 + args.lease * 4, "balanced buckets")
            print(f"balanced {took:.1f} s after the last replica was ready")
            await asyncio.sleep(args.period + 2)  # every target's first reconcile by its owner
            daemons = [cluster.replicas[name] for name in names]
            before = [await d.scrape() for d in daemons]
            cpu0 = [cpu_seconds(d.proc.pid) for d in daemons]
            api_cpu0 = cpu_seconds(os.getpid())
            t0 = time.monotonic()
            measured_from = datetime.now(UTC)
            await asyncio.sleep(args.measure)
            measured_to = datetime.now(UTC)
            after = [await d.scrape() for d in daemons]
            cpu1 = [cpu_seconds(d.proc.pid) for d in daemons]
            api_cpu = (cpu_seconds(os.getpid()) - api_cpu0) / (time.monotonic() - t0) * 100
            elapsed = time.monotonic() - t0
            columns = (
                ("buckets", 8),
                ("targets", 9),
                ("share", 8),
                ("rec/s", 9),
                ("p99 wait", 10),
                ("CPU %", 8),
            )
            header = "".join(f"{title:>{width}}" for title, width in columns)
            print(f"{'replica':<12}{header}{'RSS MiB':>9}{'of solo':>9}")
            shares, rates, waits, ratios = [], [], [], []
            for name, d, b, a, c0, c1 in zip(names, daemons, before, after, cpu0, cpu1, strict=True):
                owned = a.get("surge_autoscaler_keys_owned", 0.0)
                rate = (total(a, RECONCILES) - total(b, RECONCILES)) / elapsed
                wait = histogram_quantile(b, a, WAIT, 0.99)
                rss = rss_mib(d.proc.pid)
                shares.append(owned / n)
                rates.append(rate)
                waits.append(wait)
                ratios.append(rss / solo_rss)
                held = a.get("surge_autoscaler_buckets_held", 0)
                cpu = (c1 - c0) / elapsed * 100
                print(
                    f"{name:<12}{held:>8.0f}{owned:>9.0f}{owned / n:>8.0%}{rate:>9.1f}{wait:>9.3f}s"
                    f"{cpu:>8.1f}{rss:>9.0f}{rss / solo_rss:>9.0%}"
                )
            print(
                f"sum: {sum(rates):.1f} reconciles/s (all targets each period: {n / args.period:.1f}/s); "
                f"worst p99 queue wait {max(waits):.3f} s; shares {min(shares):.0%}-{max(shares):.0%}; "
                f"RSS at most {max(ratios):.0%} of one replica holding all"
            )
            load = os.getloadavg()
            print(
                f"simulated API server (this process, with its audit log): CPU {api_cpu:.0f} %; "
                f"load average {load[0]:.1f}"
            )

            # 3. SIGKILL the replica owning most.
            victim = max(names, key=lambda name: len(cluster.targets_of(name)))
            orphans = set(cluster.targets_of(victim))
            orphan_leases = {
                n
                for n, holder in zip(cluster.lease_names, cluster.holders(), strict=True)
                if holder == victim
            }
            # Killed right after it renewed its buckets: the worst case, its Leases run out a whole lease
            # duration later.
            renewed = cluster.renewals(orphan_leases)
            await wait_for(
                lambda: all(a != b for a, b in zip(cluster.renewals(orphan_leases), renewed, strict=True)),
                args.lease,
                "a renewal of the victim's buckets",
                every=0.01,
            )
            killed_at = datetime.now(UTC)
            cluster.replicas[victim].proc.kill()
            cluster.replicas[victim].proc.wait()
            cluster.audit.skip()  # (what came before is read later: reading stalls the API server)
            # What the API server allocated since the start (watch history, objects written) goes to the
            # permanent generation too: a full collection of it in the takeover would stall every request.
            gc.freeze()
            survivors = [name for name in names if name != victim]
            watched = {name: cluster.replicas[name].proc.pid for name in survivors}
            watched |= {"API server": os.getpid(), "metrics endpoint": endpoint.pid or 0}
            cpu_samples: list[tuple[datetime, dict[str, float]]] = []
            # Each orphan's first reconcile by a survivor: the first read of its metric (a reconcile reads
            # it right before it decides, after its scale; a scale read ahead of the takeover is no
            # reconcile), from the reads the metrics endpoint recorded since the last poll.
            first: dict[tuple[str, str], datetime] = {}
            polled = killed_at

            async def taken_over() -> bool:
                nonlocal polled
                cpu_samples.append((datetime.now(UTC), {n: cpu_seconds(pid) for n, pid in watched.items()}))
                for r in await metric_reads(cluster.metrics_url, polled):
                    t = (r.namespace, r.name)
                    if r.user in survivors and t in orphans and t not in first:
                        first[t] = r.when
                    polled = max(polled, r.when)
                return len(first) == len(orphans)

            await wait_for_async(
                taken_over, args.lease * 4 + args.period + 60, "the takeover of every orphan", every=0.5
            )
            firsts = [(when - killed_at).total_seconds() for when in first.values()]
            taken = lease_writes(cluster.audit.read(), killed_at, survivors)
            print(
                f"takeover after SIGKILL of {victim}: its buckets taken after "
                f"{spread_of(taken.get(n) for n in cluster.lease_names if n in orphan_leases)}; its "
                f"{len(orphans)} targets reconciled by a survivor after median "
                f"{statistics.median(firsts):.1f} s, all within {max(firsts):.1f} s "
                f"(lease {args.lease:g} s: target <= {args.lease + 1:g} s)"
            )
            took_from = killed_at + timedelta(
                seconds=min((t for n, t in taken.items() if n in orphan_leases), default=0.0)
            )
            window = [(t, c) for t, c in cpu_samples if t >= took_from]
            if len(window) > 1:
                (since, used0), (until, used1) = window[0], window[-1]
                seconds = (until - since).total_seconds()
                busy = ", ".join(f"{n} {(used1[n] - used0[n]) / seconds:.0%}" for n in watched)
                print(f"CPU from the buckets taken to the last orphan (of one core): {busy}")

            # 4. SIGSTOP another past its lease, then SIGCONT.
            paused = survivors[0]
            proc = cluster.replicas[paused].proc
            proc.send_signal(signal.SIGSTOP)
            await wait_for(
                lambda: paused not in cluster.holders() and "" not in cluster.holders(),
                args.lease * 4 + 30,
                "the takeover of the paused replica's buckets",
            )
            await asyncio.sleep(1.0)
            proc.send_signal(signal.SIGCONT)
            await asyncio.sleep(max(5.0, args.lease))  # it runs on, finds its buckets gone, re-balances
            dropped = total(await cluster.replicas[paused].scrape(), "surge_autoscaler_writes_dropped_total")
            stale = stale_writes(cluster.whole_log(), set(names), args)
            print(
                f"SIGSTOP of {paused} past its lease, SIGCONT: writes dropped by its fence {dropped:.0f}; "
                f"stale writes after a lost lease (audit log, all replicas, whole run): {len(stale)}"
            )

            # 5. A replica added later.
            late = "replica-late"
            joined_at = datetime.now(UTC)
            await cluster.start(late).wait_ready(first_pass)
            members = [*survivors, late]
            took = await wait_for(lambda: cluster.balanced(members), 120, "the late replica's share")
            share = len(cluster.targets_of(late)) / n
            await asyncio.sleep(args.period + 2)
            since = joined_at - timedelta(seconds=args.period)
            seen = reconciles_by_target(await metric_reads(cluster.metrics_url, since), since)
            end = datetime.now(UTC)
            gaps = []
            for t in cluster.targets():
                times = sorted(when for when, _ in seen.get(t, ()))
                points = [joined_at - timedelta(seconds=args.period), *times, end]
                gaps.append(max((b - a).total_seconds() for a, b in itertools.pairwise(points)))
            late_reconciles = sum(user == late for v in seen.values() for _, user in v)
            joined = lease_writes(cluster.audit.read(), joined_at, [late])
            member = next((t for n, t in joined.items() if "-member-" in n), None)
            print(
                f"late joiner: membership Lease written {spread_of([member])} after it was started, its "
                f"buckets taken after {spread_of(t for n, t in joined.items() if '-member-' not in n)}"
            )
            print(
                f"late joiner: balanced {took:.1f} s after it was ready ({share:.0%} of the targets, "
                f"{late_reconciles} reconciles); longest a target went unreconciled around the handover "
                f"{max(gaps):.1f} s (period {args.period:g} s: target <= {args.period + 15:g} s)"
            )
            stale = stale_writes(cluster.whole_log(), {*names, late}, args)
            print(f"stale writes after a lost lease: {len(stale)}")
            # Each target has a slot in every period: all but one of the measurement's whole periods
            # (a slot at its edge may move across it) must have its reconcile.
            windows = max(1, int(args.measure // args.period) - 1)
            counted = reconciles_by_target(
                await metric_reads(cluster.metrics_url, measured_from), measured_from, measured_to
            )
            missed = [t for t in cluster.targets() if len(counted.get(t, ())) < windows]
            examples = ", ".join("/".join(t) for t in missed[:3])
            print(
                f"targets reconciled fewer than {windows} times in the {args.measure:g} s measured: "
                f"{len(missed)}{f' ({examples} ...)' if missed else ''}"
            )
            require(not missed, "a target went unreconciled while the replicas were measured")
            require(not stale, "a replica wrote for a bucket it no longer held")
            require(late_reconciles > 0, "the late replica reconciled nothing")
        finally:
            for daemon in cluster.replicas.values():
                daemon.proc.send_signal(signal.SIGCONT)
                daemon.stop()
            endpoint.terminate()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--autoscalers", type=int, default=15_000)
    parser.add_argument("--namespaces", type=int, default=0, help="default: the others / 10")
    parser.add_argument(
        "--hot-namespace-targets",
        type=int,
        default=0,
        help="this many of the autoscalers in one namespace, the others over --namespaces",
    )
    parser.add_argument(
        "--hot-after", type=int, default=50, help="the replicas' --leader-elect-hot-namespace-targets"
    )
    parser.add_argument("--pods", type=int, default=10)
    parser.add_argument("--buckets", type=int, default=10)
    parser.add_argument("--period", type=float, default=15.0)
    parser.add_argument(
        "--lease", type=float, default=15.0, help="lease duration (renew deadline 2/3, retry 2/15)"
    )
    parser.add_argument("--measure", type=float, default=45.0)
    parser.add_argument("--qps", type=float, help="the replicas' --qps (default: theirs)")
    parser.add_argument("--burst", type=int, help="the replicas' --burst (default: theirs)")
    parser.add_argument("--workers", type=int, help="the replicas' --workers (default: theirs)")
    parser.add_argument("--log-level", default="warning", help="the replicas' (logs in the work folder)")
    args = parse_args(
        parser, {"autoscalers": 60, "pods": 2, "buckets": 6, "period": 2.0, "lease": 3.0, "measure": 4.0}
    )
    others = args.autoscalers - args.hot_namespace_targets
    args.namespaces = args.namespaces or max(1, math.ceil(others / 10))
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
