"""Slowloris against the adapter: RSS with thousands of trickling TLS connections held, and whether others
are still served.

The adapter runs as a subprocess over HTTPS with delegated authentication against the simulated API server
(as deployed). `--connections` attackers each hold a TLS connection, shared among `--kinds` (all by
default): `head` trickles a header line every `--trickle` seconds and never ends its head, `body` sends a
complete POST head announcing a 1 MB body and trickles that body, `unread-body` sends a complete GET head
announcing a 10 MB body (which no handler reads) and trickles it a byte at a beat (issue 32). An attacker
whose connection the adapter closes reconnects on its next beat, so as many connections are held as the
adapter lets be held, for `--hold` seconds. Meanwhile a client asks
`/healthz` every second, on one kept-alive connection (as the kube-apiserver's aggregator keeps its own)
and on a new connection each time. Printed: the adapter's RSS before, at its peak and at the end; the
connections held at most and closed, by kind, with how long the adapter held them; the others' answers
and their worst latency.

    .venv/bin/python bench/bench_slowloris.py                  # 5,000 connections held for 60 s
    .venv/bin/python bench/bench_slowloris.py --pythonpath DIR  # the adapter of another source tree
    .venv/bin/python bench/bench_slowloris.py --smoke           # 200 connections, cap 150 (the suite's)
    .venv/bin/python bench/bench_slowloris.py --kinds unread-body --connections 300 \
        --adapter-flags=--max-connections=200                    # can body tricklers lock others out?
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import re
import resource
import shlex
import ssl
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import uvloop
import yaml
from bench_common import ServerProcess, parse_args, require, spawn_adapter

from sim.apiserver import ApiServer
from sim.prometheus import free_port
from sim.runner import ServerThread

Connection = tuple[asyncio.StreamReader, asyncio.StreamWriter]
KINDS = ("head", "body", "unread-body")
_PATH = "/apis/custom.metrics.k8s.io/v1beta2"
HEADS = {  # what each kind sends first
    "head": f"GET {_PATH} HTTP/1.1\r\nHost: a\r\n".encode(),
    "body": f"POST {_PATH} HTTP/1.1\r\nHost: a\r\nContent-Length: 1000000\r\n\r\n".encode(),
    "unread-body": f"GET {_PATH} HTTP/1.1\r\nHost: a\r\nContent-Length: 10000000\r\n\r\n".encode(),
}


def kinds(text: str) -> list[str]:
    """--kinds: a comma-separated list of KINDS."""
    chosen = [kind.strip() for kind in text.split(",") if kind.strip()]
    unknown = set(chosen) - set(KINDS)
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(f"kinds are {', '.join(KINDS)}")
    return chosen


@dataclass
class Tally:
    held: int = 0  # TLS connections open now
    most_held: int = 0
    closed_by_adapter: int = 0
    # By kind: connections open now, and how long the closed ones were held.
    open: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    held_for: dict[str, list[float]] = field(default_factory=lambda: {kind: [] for kind in KINDS})
    probes: dict[str, list[float | None]] = field(default_factory=lambda: {"kept-alive": [], "new": []})

    def opened(self, kind: str) -> None:
        self.held += 1
        self.open[kind] += 1
        self.most_held = max(self.most_held, self.held)

    def closed(self, kind: str, held_for: float) -> None:
        self.held -= 1
        self.open[kind] -= 1
        self.closed_by_adapter += 1
        self.held_for[kind].append(held_for)


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def beat(kind: str, line: int) -> bytes:
    """What an attacker of this kind sends at its `line`th beat."""
    if kind == "head":
        return f"X-Trickle-{line}: {'x' * 40}\r\n".encode()
    return b"x" * 40 if kind == "body" else b"x"


async def attacker(kind: str, port: int, tls: ssl.SSLContext, trickle: float, tally: Tally) -> None:
    """One slowloris connection, re-opened on its next beat whenever the adapter closes it."""
    while True:
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port, ssl=tls), 30)
        except (OSError, TimeoutError):
            await asyncio.sleep(1)  # refused or still queued at the adapter's cap: try again
            continue
        tally.opened(kind)
        opened = time.monotonic()
        try:
            writer.write(HEADS[kind])
            line = 0
            while not reader.at_eof():
                # The adapter's answer (to an unread body) is read, so that its close is seen as EOF.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(reader.read(65536), trickle * random.uniform(0.5, 1.5))
                line += 1
                writer.write(beat(kind, line))
                await writer.drain()
        except (OSError, ssl.SSLError):
            pass
        finally:
            tally.closed(kind, time.monotonic() - opened)
            writer.close()
        await asyncio.sleep(trickle)


async def probe(
    port: int, tls: ssl.SSLContext, tally: Tally, until: Callable[[], float], kept: Connection | None
) -> None:
    """/healthz every second, on a kept-alive connection (opened before the attack, as the aggregator's
    are) and on a new one; None for no answer in 10 s."""
    request = b"GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n"

    async def ask(connection: Connection) -> None:
        reader, writer = connection
        writer.write(request)
        status = await reader.readuntil(b"\r\n\r\n")
        if not status.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(status.decode(errors="replace"))
        await reader.readexactly(2)  # "ok"

    while time.monotonic() < until():
        for kind in ("kept-alive", "new"):
            started = time.monotonic()
            try:
                async with asyncio.timeout(10):
                    if kind == "new":
                        connection = await asyncio.open_connection("127.0.0.1", port, ssl=tls)
                        await ask(connection)
                        connection[1].close()
                    else:
                        kept = kept or await asyncio.open_connection("127.0.0.1", port, ssl=tls)
                        await ask(kept)
                tally.probes[kind].append(time.monotonic() - started)
            except (OSError, ssl.SSLError, TimeoutError, RuntimeError, asyncio.IncompleteReadError):
                tally.probes[kind].append(None)
                if kind == "kept-alive" and kept is not None:
                    kept[1].close()
                    kept = None
        await asyncio.sleep(1)


async def closed_by_limit(port: int, tls: ssl.SSLContext, token: str) -> str:
    """The adapter's own count of connections its limits closed, by limit (its /metrics, as the admin)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=tls)
    head = f"GET /metrics HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer {token}\r\nConnection: close"
    writer.write(f"{head}\r\n\r\n".encode())
    text = (await reader.read()).decode()
    writer.close()
    counts = re.findall(
        r'^surge_adapter_connections_closed_by_limit_total\{reason="(\w+)"\} ([\d.e+]+)$', text, re.M
    )
    return ", ".join(f"{reason} {float(value):,.0f}" for reason, value in counts) or "none reported"


async def attack(args: argparse.Namespace, adapter: ServerProcess, port: int, token: str) -> Tally:
    tls = ssl.create_default_context()
    tls.check_hostname = False
    tls.verify_mode = ssl.CERT_NONE
    tally = Tally()
    pid = adapter.proc.pid
    baseline = rss_mib(pid)
    # The others' client starts first: its kept-alive connection has asked once before the attack.
    kept = await asyncio.open_connection("127.0.0.1", port, ssl=tls)
    until = float("inf")
    probing = asyncio.create_task(probe(port, tls, tally, lambda: until, kept))
    await asyncio.sleep(0.5)
    started = time.monotonic()
    attackers = []
    for number in range(args.connections):  # opened 100 at a time, as fast as the handshakes go
        kind = args.kinds[number % len(args.kinds)]
        attackers.append(asyncio.create_task(attacker(kind, port, tls, args.trickle, tally)))
        if number % 100 == 99:
            await asyncio.sleep(0.05)
    ramp = time.monotonic() - started
    until = time.monotonic() + args.hold
    peak = baseline
    while time.monotonic() < until:
        adapter.check_running()
        peak = max(peak, rss_mib(pid))
        await asyncio.sleep(0.5)
        elapsed = args.hold - (until - time.monotonic())
        print(
            f"  {elapsed:3.0f} s: held {tally.held:,}, RSS {rss_mib(pid):.0f} MiB",
            file=sys.stderr,
            flush=True,
        )
    held_at_end, open_at_end, end = tally.held, dict(tally.open), rss_mib(pid)
    await probing

    print(f"adapter flags: {args.adapter_flags or '(defaults)'}")
    print(
        f"attack: {args.connections:,} TLS connections, a line every {args.trickle:g} s, held {args.hold:g} s"
    )
    print(f"  (opened over {ramp:.1f} s; kinds, sharing them: {', '.join(args.kinds)})")
    print(f"RSS before: {baseline:.0f} MiB")
    print(f"RSS growth: {peak - baseline:.0f} MiB")
    print(
        f"RSS with {args.connections:,} trickling connections held for {args.hold:g} s: peak {peak:.0f} MiB, "
        f"at the end {end:.0f} MiB"
    )
    print(
        f"connections held at once (as the attackers see them): at most {tally.most_held:,}, "
        f"at the end {held_at_end:,}"
    )
    print(f"connections closed by the adapter: {tally.closed_by_adapter:,}")
    for kind in args.kinds:
        held = sorted(tally.held_for[kind])
        spans = f", held for median {held[len(held) // 2]:.1f} s, at most {held[-1]:.1f} s" if held else ""
        print(f"  {kind}: {len(held):,}{spans}; open at the end {open_at_end[kind]:,}")
    print(f"  by its limits: {await closed_by_limit(port, tls, token)}")
    for kind, times in tally.probes.items():
        answered = [t for t in times if t is not None]
        worst = f"{max(answered) * 1000:.0f} ms" if answered else "-"
        unanswered = len(times) - len(answered)
        print(
            f"others served ({kind}): {len(answered)}/{len(times)} ({unanswered} unanswered), worst {worst}"
        )
    sys.stdout.flush()
    # The adapter goes first: every attacker's connection, queued connect or handshake then ends at once.
    await asyncio.to_thread(adapter.stop)
    for task in attackers:
        task.cancel()
    await asyncio.wait(attackers, timeout=30)
    return tally


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--connections", type=int, default=5000)
    parser.add_argument("--hold", type=float, default=60.0, help="seconds the connections are held")
    parser.add_argument("--trickle", type=float, default=3.0, help="seconds between an attacker's lines")
    parser.add_argument(
        "--kinds",
        type=kinds,
        default=list(KINDS),
        help=f"comma-separated attack kinds the connections share (default all: {','.join(KINDS)})",
    )
    parser.add_argument(
        "--adapter-flags", default="", help="more adapter flags, e.g. '--read-header-timeout=5s'"
    )
    parser.add_argument("--pythonpath", default="", help="run the adapter from this source tree")
    args = parse_args(
        parser,
        smoke={
            "connections": 200,
            "hold": 8.0,
            "trickle": 0.5,
            "adapter_flags": "--read-header-timeout=2s --read-body-timeout=2s --max-connections=150",
        },
    )
    # Both ends hold every connection: the attacker here, the adapter (which inherits the limit).
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4 * args.connections + 1024)), hard))
    with tempfile.TemporaryDirectory(prefix="bench-slowloris-") as tmp, ServerThread(ApiServer()) as api:
        work = Path(tmp)
        kubeconfig = api.write_kubeconfig(work / "kubeconfig")
        config = work / "rules.yaml"
        config.write_text("rules: []\n")
        port = free_port()
        env = {**os.environ, "PYTHONPATH": args.pythonpath} if args.pythonpath else None
        adapter = spawn_adapter(
            config,
            f"http://127.0.0.1:{free_port()}",  # not needed to be attacked
            kubeconfig,
            work,
            port,
            "--log-level=error",
            *shlex.split(args.adapter_flags),
            env=env,
        )
        try:
            # uvloop: asyncio's own TLS transport holds a 256 KiB buffer per connection, too much for the
            # attackers' side of 5,000 connections.
            uvloop.run(
                _run(
                    args,
                    adapter,
                    port,
                    str(yaml.safe_load(kubeconfig.read_text())["users"][0]["user"]["token"]),
                )
            )
        finally:
            adapter.stop()


async def _run(args: argparse.Namespace, adapter: ServerProcess, port: int, token: str) -> None:
    tls = ssl.create_default_context()
    tls.check_hostname = False
    tls.verify_mode = ssl.CERT_NONE

    async def healthy() -> bool:
        with contextlib.suppress(OSError, ssl.SSLError, asyncio.IncompleteReadError):
            reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=tls)
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
            answer = await reader.read()
            writer.close()
            return answer.startswith(b"HTTP/1.1 200")
        return False

    await adapter.wait_until(healthy, 60, "/healthz")
    await asyncio.sleep(1)  # settled
    tally = await attack(args, adapter, port, token)
    if args.smoke:
        require(tally.closed_by_adapter > 0, "the adapter closed no trickling connection")
        require(all(t is not None for t in tally.probes["kept-alive"]), "a kept-alive probe went unanswered")


if __name__ == "__main__":
    main()
