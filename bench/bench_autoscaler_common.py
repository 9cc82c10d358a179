"""Shared pieces of the autoscaler benchmarks (not a benchmark itself): a seeded simulated API server, the
reads the metrics endpoint (metrics_stub.py) recorded, the daemon as a subprocess, readings of its
/metrics and /proc, and the simulated API server's audit log as it is written."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
import orjson
import yaml
from bench_common import ServerProcess

from sim.prometheus import free_port

REPO = Path(__file__).resolve().parents[1]
CRD_FILE = REPO / "manifests" / "crd-horizontalautoscaler.yaml"
NOW = "2026-01-01T00:00:00Z"


def seed_world(
    store: object,
    autoscalers: int,
    pods_each: int,
    namespaces: int,
    period: float | None,
    metric_of: Callable[[int], str] = lambda _: "http_requests",
    hot: int = 0,
) -> None:
    """CRD, namespaces, and per autoscaler: a Deployment, its ready pods and a HorizontalAutoscaler. The
    first `hot` autoscalers in namespace HOT_NAMESPACE, the others over the `namespaces` (`target_of`)."""
    create = store.create  # type: ignore[attr-defined]
    create(("apiextensions.k8s.io", "customresourcedefinitions"), yaml.safe_load(CRD_FILE.read_text()))
    for ns in [f"ns-{n}" for n in range(namespaces)] + ([HOT_NAMESPACE] if hot else []):
        create(("", "namespaces"), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    for i in range(autoscalers):
        ns, name = target_of(i, namespaces, hot)
        labels = {"app": name}
        create(
            ("apps", "deployments"),
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": name, "namespace": ns},
                "spec": {
                    "replicas": pods_each,
                    "selector": {"matchLabels": labels},
                    "template": {
                        "metadata": {"labels": labels},
                        "spec": {"containers": [{"name": "app", "image": "app"}]},
                    },
                },
            },
            namespace=ns,
        )
        for p in range(pods_each):
            create(
                ("", "pods"),
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": f"{name}-{p}", "namespace": ns, "labels": labels},
                    "spec": {"containers": [{"name": "app", "image": "app"}]},
                    "status": {
                        "phase": "Running",
                        "startTime": NOW,
                        "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": NOW}],
                    },
                },
                namespace=ns,
                keep_status=True,
            )
        spec: dict[str, object] = {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
            "minReplicas": 1,
            "maxReplicas": 100,
            "metrics": [
                {
                    "type": "Pods",
                    "pods": {
                        "metric": {"name": metric_of(i)},
                        "target": {"type": "AverageValue", "averageValue": "100"},
                    },
                }
            ],
        }
        if period is not None:
            spec["syncPeriodSeconds"] = int(period)
        create(
            ("autoscaling.surge.dev", "horizontalautoscalers"),
            {
                "apiVersion": "autoscaling.surge.dev/v1alpha1",
                "kind": "HorizontalAutoscaler",
                "metadata": {"name": name, "namespace": ns},
                "spec": spec,
            },
            namespace=ns,
        )


HOT_NAMESPACE = "hot"


def target_of(i: int, namespaces: int, hot: int = 0) -> tuple[str, str]:
    """The namespace and name of seed_world's i-th autoscaler."""
    return (HOT_NAMESPACE if i < hot else f"ns-{(i - hot) % namespaces}"), f"w{i}"


@dataclass(frozen=True)
class MetricRead:
    """A read of a target's metric (metrics_stub's, with `record`): the moment its reconcile decides."""

    when: datetime
    namespace: str
    name: str
    user: str  # the replica's identity, from its User-Agent "surge-autoscaler/VERSION (IDENTITY)"


async def metric_reads(url: str, since: datetime) -> list[MetricRead]:
    """The reads the metrics endpoint at `url` recorded from `since` on, in order."""
    async with aiohttp.ClientSession() as http, http.get(f"{url}/reads?since={since.timestamp()}") as r:
        rows = orjson.loads(await r.read())
    return [
        MetricRead(datetime.fromtimestamp(when, UTC), ns, app, agent.rpartition("(")[2].rstrip(")"))
        for when, ns, app, agent in rows
    ]


def _session() -> aiohttp.ClientSession:
    """For the daemon's port: its certificate is self-signed, not verified."""
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=False))


def kubeconfig_token(kubeconfig: Path) -> str:
    """The bearer token of a kubeconfig the simulated API server wrote: the daemon's port authenticates
    its scrapes with it (the cluster's admin: authorized without a review)."""
    return str(yaml.safe_load(kubeconfig.read_text())["users"][0]["user"]["token"])


class Daemon(ServerProcess):
    """The autoscaler daemon as a subprocess, and readings of its /metrics."""

    token: str  # what its scrapes authenticate with

    @classmethod
    def start(
        cls, kubeconfig: Path, metrics_url: str, log: Path, *flags: str, program: str = "autoscaler"
    ) -> Daemon:
        """`python -m autoscaler` (or `program`, a module or a script taking its flags) on a free port."""
        port = free_port()
        daemon = cls.spawn(
            program,
            f"https://127.0.0.1:{port}",
            log,
            f"--kubeconfig={kubeconfig}",
            f"--metrics-url={metrics_url}",
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            "--log-level=warning",
            "--log-format=json",
            *flags,
        )
        daemon.token = kubeconfig_token(kubeconfig)
        return daemon

    async def wait_ready(self, within: float) -> None:
        async def ready() -> bool:
            try:
                async with _session() as http, http.get(self.url + "/readyz") as r:
                    return r.status == 200
            except aiohttp.ClientError:
                return False

        await self.wait_until(ready, within, "/readyz")

    async def wait_for(self, check: Callable[[dict[str, float]], bool], within: float) -> None:
        """Poll /metrics until `check` holds."""

        async def holds() -> bool:
            return check(await self.scrape())

        await self.wait_until(holds, within, "the condition on its metrics", every=0.5)

    async def scrape(self) -> dict[str, float]:
        """/metrics as {series line without value: value}."""
        async with (
            _session() as http,
            http.get(self.url + "/metrics", headers={"Authorization": f"Bearer {self.token}"}) as r,
        ):
            text = await r.text()
        out: dict[str, float] = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                out[name] = float(value)
        return out


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int, field: str = "VmRSS") -> float:
    """The process's resident set now (VmRSS) or at its peak so far (VmHWM), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def peak_rss_mib(pid: int) -> float:
    return rss_mib(pid, "VmHWM")


def total(m: dict[str, float], prefix: str) -> float:
    return sum(v for k, v in m.items() if k.startswith(prefix))


def histogram_quantile(before: dict[str, float], after: dict[str, float], name: str, q: float) -> float:
    """The q-quantile of the observations between two scrapes, interpolated inside its bucket."""
    buckets: list[tuple[float, float]] = []
    for key, value in after.items():
        if key.startswith(name + "_bucket{"):
            bound = key.split('le="', 1)[1].split('"', 1)[0]
            buckets.append((float("inf") if bound == "+Inf" else float(bound), value - before.get(key, 0.0)))
    buckets.sort()
    count = buckets[-1][1] if buckets else 0.0
    if count <= 0:
        return float("nan")
    rank = q * count
    lower_le, lower_count = 0.0, 0.0
    for le, cumulative in buckets:
        if cumulative >= rank:
            if le == float("inf"):
                return lower_le
            fraction = (rank - lower_count) / max(cumulative - lower_count, 1e-9)
            return lower_le + (le - lower_le) * fraction
        lower_le, lower_count = le, cumulative
    return lower_le


WRITES = frozenset({"create", "update", "patch", "delete"})


@dataclass
class AuditEntry:
    user: str
    verb: str
    resource: str  # with its subresource: deployments/scale
    code: int
    received: datetime
    namespace: str = ""
    name: str = ""


def parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text)  # (RFC 3339 with "Z" and microseconds, as the audit log writes)


@dataclass
class AuditTail:
    """The audit log's new lines as they are written: writes (and lease updates), plus the reads of
    `also_read` resources (e.g. deployments/scale: one per reconcile).

    The simulated API server runs in the benchmark's process, so parsing stalls it: lines are sorted out
    by their verb's bytes first (most are reads), and only the rest are decoded."""

    path: Path
    also_read: frozenset[str] = frozenset()
    entries: list[AuditEntry] = field(default_factory=list)
    _offset: int = 0

    def skip(self) -> None:
        """Leave the lines written so far unread: what `read` returns from now on is what comes next."""
        with self.path.open("rb") as f:
            tail = max(0, f.seek(0, os.SEEK_END) - 65536)  # (a line is well under 64 KiB)
            f.seek(tail)
            self._offset = tail + f.read().rfind(b"\n") + 1  # (after the last whole line)

    def read(self) -> list[AuditEntry]:
        with self.path.open("rb") as f:
            f.seek(self._offset)
            data = f.read()
        end = data.rfind(b"\n") + 1
        self._offset += end
        for line in data[:end].splitlines():
            start = line.find(b'"verb":"') + 8
            verb = line[start : line.find(b'"', start)].decode()
            if verb not in WRITES and not (verb == "get" and self.also_read):
                continue
            event = orjson.loads(line)
            ref = event.get("objectRef") or {}
            resource = ref.get("resource", "") + ("/" + ref["subresource"] if ref.get("subresource") else "")
            if verb not in WRITES and resource not in self.also_read:
                continue
            self.entries.append(
                AuditEntry(
                    event["user"].get("username", ""),
                    verb,
                    resource,
                    event["responseStatus"]["code"],
                    parse_time(event["requestReceivedTimestamp"]),
                    ref.get("namespace", ""),
                    ref.get("name", ""),
                )
            )
        return self.entries
