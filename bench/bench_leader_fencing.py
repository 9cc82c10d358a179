"""Leader election under a tight `--qps`: do lease renewals hold, and does a leader paused past its lease
write anything after the standby took over?

Two `python -m autoscaler --leader-elect` replicas (processes, each with a user of its own in the
simulated API server, so its audit log (`--audit-log`) says who sent what) share N HorizontalAutoscalers
at a 1 s period whose metric jumps between half and twice the target on every read, with no
stabilization: nearly every reconcile writes the scale, the status and an event, far more requests than
`--qps` lets through, so writes always wait in the client's rate limiter.

1. Renewals under load: both replicas run for `--steady` seconds; prints how often the lease changed hands
   and how many replicas exited having lost it (each is started again).
2. `--cycles` times: SIGSTOP the leader while it writes, wait until the standby holds the lease, SIGCONT
   it, and count from the audit log the writes (anything but a Lease; any answer) the API server received
   from the stopped replica after the takeover, until it exited or acquired the lease again. It is then
   started again (a restarted pod) and is the standby of the next cycle.

    .venv/bin/python bench/bench_leader_fencing.py [--cycles 20] [--autoscalers 40] [--qps 20]
    .venv/bin/python bench/bench_leader_fencing.py --smoke    # 2 cycles, a short steady phase
    .venv/bin/python bench/bench_leader_fencing.py --autoscaler-tree DIR   # another checkout's daemon

`--autoscaler-tree` runs the replicas from another source tree (e.g. `git archive` of an older commit),
against this tree's simulated API server: the "before" column of a comparison.

Measured on 2 shared cores (defaults: 40 autoscalers, --qps 20, 32 workers, 20 cycles), before (commit
0f5d940: leader check before the rate limiter, one limiter for renewals and reconciles) and after:

    renewals under load, 30 s           3 handovers, 3 replicas exited     0 handovers, 0 exited
    stale writes after takeover         940 (897 accepted) in 20 cycles    0 in 20 cycles
      per cycle median / worst          47 / 65                            0 / 0
      by resource                       status 423, events 289, scale 228  none (626 dropped by the fence)
    takeover after SIGSTOP              median 3.4 s, worst 4.4 s          median 4.0 s, worst 6.5 s
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

from bench_autoscaler_common import AuditEntry, AuditTail, free_port, seed_world
from bench_common import parse_args, require
from metrics_stub import serve_metrics

from sim.apiserver import ApiServer
from sim.runner import ServerThread

LEASES = ("coordination.k8s.io", "leases")
HZAS = ("autoscaling.surge.dev", "horizontalautoscalers")
LEASE_NAME = "surge-autoscaler"
LEASE, RENEW, RETRY = 3.0, 2.0, 0.5
BEHAVIOR = {
    "scaleUp": {
        "stabilizationWindowSeconds": 0,
        "policies": [{"type": "Percent", "value": 1000, "periodSeconds": 1}],
    },
    "scaleDown": {
        "stabilizationWindowSeconds": 0,
        "policies": [{"type": "Percent", "value": 100, "periodSeconds": 1}],
    },
}


class Replica:
    """One autoscaler replica: a process, restarted as a new one (a restarted pod) when asked."""

    def __init__(
        self, name: str, kubeconfig: Path, args: argparse.Namespace, metrics_url: str, workdir: Path
    ):
        self.name = name
        self._kubeconfig = kubeconfig
        self._args = args
        self._metrics_url = metrics_url
        self._workdir = workdir
        self.starts = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = workdir / f"{name}.log"

    def start(self) -> None:
        self.starts += 1
        tree = self._args.autoscaler_tree
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        if tree is not None:
            env["PYTHONPATH"] = str(tree)
        flags = [
            f"--kubeconfig={self._kubeconfig}",
            f"--metrics-url={self._metrics_url}",
            "--bind-address=127.0.0.1",
            "--secure-port=0",
            "--log-level=warning",
            "--log-format=json",
            f"--qps={self._args.qps:g}",
            f"--burst={self._args.qps:g}",
            "--shutdown-grace-period=2s",
            "--leader-elect",
            f"--leader-elect-identity={self.name}",
            "--leader-elect-resource-namespace=default",
            f"--leader-elect-lease-duration={LEASE:g}s",
            f"--leader-elect-renew-deadline={RENEW:g}s",
            f"--leader-elect-retry-period={RETRY:g}s",
        ]
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "autoscaler", *flags],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=tree,
            )

    def exited(self) -> bool:
        return self.proc is None or self.proc.poll() is not None

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def dropped_writes(self) -> int:
        """Writes this replica's fence dropped, from its log (all its starts)."""
        return self.log.read_text(errors="replace").count("write dropped: lease not held")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
            self.proc.wait()


def holder(api: ServerThread[ApiServer]) -> str:
    def read() -> str:
        try:
            lease = api.server.store.get(LEASES, "default", LEASE_NAME)
        except Exception:
            return ""
        return str(lease["spec"].get("holderIdentity") or "")

    return str(api.call(read))


async def wait_for(check: object, within: float, what: str) -> float:
    """Poll `check()` every 50 ms; the seconds it took. Fails the benchmark after `within` seconds."""
    started = time.monotonic()
    while time.monotonic() - started < within:
        if check():  # type: ignore[operator]
            return time.monotonic() - started
        await asyncio.sleep(0.05)
    raise SystemExit(f"benchmark failed: {what} not within {within:g} s")


async def steady(api: ServerThread[ApiServer], replicas: list[Replica], seconds: float) -> tuple[int, int]:
    """Both replicas for `seconds`: (lease handovers, exits), restarting the replicas that exit."""
    handovers = exits = 0
    last = holder(api)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        now = holder(api)
        if now and last and now != last:
            handovers += 1
        last = now or last
        for replica in replicas:
            if replica.exited():
                exits += 1
                replica.start()
        await asyncio.sleep(0.05)
    return handovers, exits


async def cycle(
    api: ServerThread[ApiServer], audit: AuditTail, replicas: list[Replica]
) -> tuple[list[AuditEntry], float]:
    """One SIGSTOP/SIGCONT of the leader: (its writes received after the takeover, seconds from the stop
    to the takeover)."""
    for replica in replicas:
        if replica.exited():
            replica.start()
    await wait_for(lambda: holder(api) in {r.name for r in replicas}, 60, "a leader")
    leader = next(r for r in replicas if r.name == holder(api))
    standby = next(r for r in replicas if r is not leader)
    # The leader is writing (so writes wait in its rate limiter) and the standby is up (it reads the lease).
    since = datetime.now(UTC)
    await wait_for(
        lambda: any(
            e.user == leader.name and e.received > since and e.resource == "deployments/scale"
            for e in audit.read()
        ),
        60,
        "a scale write by the leader",
    )
    leader.signal(signal.SIGSTOP)

    def taken_over() -> bool:
        if standby.exited():  # (lost the lease under load before: a restarted pod)
            standby.start()
        return holder(api) == standby.name

    took = await wait_for(taken_over, 30, "the standby's takeover")
    taken = datetime.now(UTC)
    await asyncio.sleep(1.0)
    leader.signal(signal.SIGCONT)
    try:
        await wait_for(leader.exited, 3 * LEASE + 10, "the stale leader's exit")
    finally:
        if not leader.exited():
            leader.stop()
    entries = audit.read()
    reacquired = min(
        (
            e.received
            for e in entries
            if e.user == leader.name and e.resource == "leases" and e.received > taken and e.code < 300
        ),
        default=None,
    )
    stale = [
        e
        for e in entries
        if e.user == leader.name
        and e.received > taken
        and e.resource != "leases"
        and (reacquired is None or e.received < reacquired)
    ]
    leader.start()
    return stale, took


async def run(args: argparse.Namespace) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="bench-fencing-"))
    metrics_port = free_port()
    endpoint = multiprocessing.Process(
        target=serve_metrics, args=(metrics_port, args.pods, {}, {"http_requests"}), daemon=True
    )
    endpoint.start()
    audit_path = workdir / "audit.log"
    with ServerThread(ApiServer(tls=False, audit_log=audit_path)) as api:

        def seed() -> None:
            store = api.server.store
            seed_world(store, args.autoscalers, args.pods, 1, 1.0)
            for i in range(args.autoscalers):
                store.patch(HZAS, "ns-0", f"w{i}", {"spec": {"behavior": BEHAVIOR}})

        api.call(seed, timeout=600)
        replicas = []
        for name in ("replica-a", "replica-b"):
            kubeconfig = api.write_kubeconfig(workdir / f"{name}.kubeconfig", user=name)
            replicas.append(Replica(name, kubeconfig, args, f"http://127.0.0.1:{metrics_port}", workdir))
        audit = AuditTail(audit_path)
        try:
            for replica in replicas:
                replica.start()
            await wait_for(lambda: holder(api) != "", 60, "a first leader")
            tree = args.autoscaler_tree or "this tree"
            print(
                f"leader fencing: 2 replicas ({tree}), {args.autoscalers} autoscalers x {args.pods} pods "
                f"at a 1 s period, --qps {args.qps:g}, lease {LEASE:g} s, renew deadline {RENEW:g} s, "
                f"retry {RETRY:g} s"
            )
            handovers, exits = await steady(api, replicas, args.steady)
            print(
                f"renewals under load: {handovers} lease handovers, {exits} replicas exited "
                f"in {args.steady:g} s"
            )
            counts, accepted, takeovers = [], [], []
            written: Counter[str] = Counter()
            for i in range(args.cycles):
                stale, took = await cycle(api, audit, replicas)
                counts.append(len(stale))
                accepted.append(sum(e.code < 300 for e in stale))
                takeovers.append(took)
                written.update(e.resource for e in stale)
                print(
                    f"cycle {i + 1:2d}: takeover {took:.1f} s after the stop, stale writes {counts[-1]} "
                    f"(accepted {accepted[-1]})",
                    flush=True,
                )
            dropped = sum(r.dropped_writes() for r in replicas)
            print(f"writes dropped by the fence (logged): {dropped}")
            kinds = ", ".join(f"{resource} {n}" for resource, n in written.most_common()) or "none"
            print(f"stale writes by resource: {kinds}")
            print(
                f"takeover after SIGSTOP: median {statistics.median(takeovers):.1f} s, "
                f"worst {max(takeovers):.1f} s"
            )
            print(
                f"stale writes after takeover: {sum(counts)} in {args.cycles} SIGSTOP/SIGCONT cycles "
                f"(accepted {sum(accepted)}; per cycle median {statistics.median(counts):g}, "
                f"worst {max(counts)})"
            )
            require(args.autoscaler_tree is not None or sum(counts) == 0, "a stale leader wrote")
        finally:
            for replica in replicas:
                replica.stop()
            endpoint.terminate()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cycles", type=int, default=20)
    parser.add_argument("--steady", type=float, default=30.0, help="seconds of the renewals-under-load phase")
    parser.add_argument("--autoscalers", type=int, default=40)
    parser.add_argument("--pods", type=int, default=10)
    parser.add_argument("--qps", type=float, default=20.0)
    parser.add_argument("--autoscaler-tree", type=Path, help="run the replicas from this source tree")
    args = parse_args(parser, {"cycles": 2, "steady": 5.0})
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
