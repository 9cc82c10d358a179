"""Run the real Prometheus binary for tests, the demo and benchmarks, scraping a file_sd file every second.

The binary runs under a tiny `sh` guard that holds the read end of a pipe: when this process closes
the pipe — on `stop()`, at interpreter exit, or because it died — the guard terminates Prometheus, so
no Prometheus outlives the process that started it, whatever the way it ends.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import errno
import fcntl
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import aiohttp
import structlog

log = structlog.get_logger(__name__)

PROMETHEUS_BINARY = "/usr/bin/prometheus"

# Runs Prometheus in the background; once stdin reaches EOF, stops it and removes its temp dir.
_GUARD = (
    'dir="$1"; prometheus="$2"; shift 2; "$prometheus" "$@" </dev/null & pid=$!; '
    'read -r _ || true; kill -TERM "$pid" 2>/dev/null; wait "$pid"; rm -rf "$dir"'
)

Result = list[dict[str, Any]]


class PrometheusError(RuntimeError):
    pass


class PortTaken(PrometheusError):
    """Prometheus could not bind its port: something else listens there."""


BIND_ATTEMPTS = 3


# Ports are chosen from here up, outside the kernel's ephemeral range (see `free_port`).
_FIRST_PORT = 20000
_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_PORT_LOCKS = Path(tempfile.gettempdir()) / f"surge-ports-{os.getuid()}"
_reserved: dict[int, int] = {}  # port -> the descriptor holding its lock, open for the process's lifetime
_spread = random.SystemRandom()  # not the global generator, which tests may seed alike in every worker


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = _EPHEMERAL_RANGE.read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def free_port() -> int:
    """A loopback TCP port for a server the caller starts (a child process binds it), or for a URL that
    must find nothing listening; it stays reserved until this process exits.

    Binding port 0 and closing the socket would leave a race: the kernel hands ports of its ephemeral
    range to any process's port-0 binds and outgoing connections, so the port could be taken before the
    child binds it. Instead the port comes from outside that range, where the kernel never assigns one,
    and every process using this function (parallel test workers, demos, benchmarks) takes an exclusive
    lock on a file named after it first; the lock goes with the process (also when it is killed), so a
    port is never handed out twice while its user may still bind it. A trial bind skips ports that
    something else holds right now."""
    _PORT_LOCKS.mkdir(mode=0o700, exist_ok=True)
    low, high = _ephemeral_range()
    candidates = [port for port in range(_FIRST_PORT, 65536) if not low <= port <= high]
    first = _spread.randrange(len(candidates))  # parallel callers start far apart
    for port in candidates[first:] + candidates[:first]:
        if port in _reserved:
            continue
        fd = os.open(_PORT_LOCKS / str(port), os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)  # another process's port
            continue
        if _bindable(port):
            _reserved[port] = fd
            return port
        os.close(fd)
    raise OSError(errno.EADDRNOTAVAIL, "no free loopback port outside the ephemeral range")


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def render_config(
    sd_file: Path,
    interval_seconds: float,
    query_log: Path | None = None,
    scrape_jobs: Sequence[Mapping[str, Any]] = (),
) -> str:
    """The config file; with `query_log`, Prometheus appends every query it runs there (a JSON line each).
    `scrape_jobs`: more scrape configs after the pods' (a daemon's authenticated /metrics, say)."""
    interval = f"{int(interval_seconds * 1000)}ms"
    settings = {"scrape_interval": interval, "evaluation_interval": interval, "scrape_timeout": interval}
    if query_log is not None:
        settings["query_log_file"] = str(query_log)
    config = {
        "global": settings,
        "scrape_configs": [
            {
                "job_name": "sim-pods",
                "file_sd_configs": [{"files": [str(sd_file)], "refresh_interval": interval}],
            },
            *scrape_jobs,
        ],
    }
    # JSON is valid YAML, and Prometheus reads YAML.
    return json.dumps(config, indent=1)


class PrometheusProcess:
    """One Prometheus on a free loopback port with its own temp data dir."""

    def __init__(
        self,
        sd_file: Path,
        *,
        interval_seconds: float = 1.0,
        binary: str = PROMETHEUS_BINARY,
        query_log: bool = False,
        scrape_jobs: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        self.sd_file = Path(sd_file)
        self.scrape_jobs = scrape_jobs  # scraped beside the pods (render_config)
        self.interval_seconds = interval_seconds
        self.binary = binary
        self.query_log = query_log  # log every query to `query_log_path`
        self.port = 0
        self._dir: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def work_dir(self) -> Path:
        """Config, data and log; removed on stop."""
        if self._dir is None:
            raise PrometheusError("Prometheus is not started")
        return self._dir

    @property
    def log_path(self) -> Path:
        return self.work_dir / "prometheus.log"

    @property
    def query_log_path(self) -> Path:
        """The query log (with `query_log=True`): a JSON object per query, `params.query` its PromQL."""
        return self.work_dir / "queries.log"

    @property
    def process_group(self) -> int:
        """The process group of Prometheus and its guard (for checks that nothing is left)."""
        if self._proc is None:
            raise PrometheusError("Prometheus is not started")
        return self._proc.pid

    def start(self, timeout: float = 30.0, port: int | None = None) -> None:
        """Start on `port` (a restart on the port it had), by default on a `free_port`. A free port that
        something outside `free_port`'s reservations took meanwhile makes Prometheus fail to bind: the
        start is then made again on another port, up to BIND_ATTEMPTS times."""
        if self._proc is not None:
            raise PrometheusError("Prometheus is already started")
        if shutil.which(self.binary) is None:
            raise PrometheusError(f"{self.binary} not found (apt-get install prometheus)")
        for attempt in range(1, BIND_ATTEMPTS + 1):
            try:
                self._start_on(free_port() if port is None else port, timeout)
                return
            except PortTaken:
                if port is not None or attempt == BIND_ATTEMPTS:
                    raise
                log.warning("prometheus port taken; starting on another", port=self.port)

    def _start_on(self, port: int, timeout: float) -> None:
        self.port = port
        self._dir = Path(tempfile.mkdtemp(prefix="surge-prometheus-"))
        config = self._dir / "prometheus.yml"
        query_log = self.query_log_path if self.query_log else None
        config.write_text(render_config(self.sd_file, self.interval_seconds, query_log, self.scrape_jobs))
        args = [
            f"--config.file={config}",
            f"--storage.tsdb.path={self._data_dir}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--storage.tsdb.retention.time=1h",
            "--web.enable-lifecycle",
            "--log.level=warn",
        ]
        with self.log_path.open("wb") as logfile:
            self._proc = subprocess.Popen(
                ["sh", "-c", _GUARD, "guard", str(self._dir), self.binary, *args],
                stdin=subprocess.PIPE,
                stdout=logfile,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: stop() can kill the guard and child at once
            )
        atexit.register(self.stop)
        try:
            self._wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        log.info("prometheus started", url=self.url, pid=self._proc.pid)

    @property
    def _data_dir(self) -> Path:
        return self.work_dir / "data"

    def _wait_ready(self, timeout: float) -> None:
        """Until this Prometheus answers on its port: ready, and with our data dir (whatever else might
        answer there while ours fails to bind is not taken for it)."""
        assert self._proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            # Prometheus's own error, logged before it exits (the guard outlives it, so the log tells).
            if "bind: address already in use" in (output := self.log_path.read_text()):
                raise PortTaken(f"Prometheus could not bind port {self.port}: {output[-2000:]}")
            if self._proc.poll() is not None:
                raise PrometheusError(f"Prometheus exited at startup: {output[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/api/v1/status/flags", timeout=1) as response:
                    flags = json.load(response)["data"]
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as response:
                    if response.status == 200 and flags.get("storage.tsdb.path") == str(self._data_dir):
                        return
            except (urllib.error.URLError, OSError, ValueError, KeyError):
                pass
            time.sleep(0.05)
        raise PrometheusError(f"Prometheus not ready after {timeout}s")

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM (through the guard), then SIGKILL to the whole group; removes the data dir."""
        proc, self._proc = self._proc, None
        atexit.unregister(self.stop)
        if proc is not None:
            assert proc.stdin is not None
            proc.stdin.close()  # the guard's cue to terminate Prometheus
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                log.warning("prometheus did not stop in time; killing it", pid=proc.pid)
            # Whatever is left of the group (Prometheus itself if the guard went first) is killed.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __enter__(self) -> PrometheusProcess:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # Queries.

    def query_sync(self, promql: str, timeout_seconds: float = 5.0) -> Result:
        url = f"{self.url}/api/v1/query?{urllib.parse.urlencode({'query': promql})}"
        try:
            with urllib.request.urlopen(url, timeout=timeout_seconds) as response:
                body = json.load(response)
        except urllib.error.HTTPError as e:
            body = json.load(e)
        return _result(promql, body)

    async def query(self, promql: str, timeout_seconds: float = 5.0) -> Result:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_seconds)) as session,
            session.get(f"{self.url}/api/v1/query", params={"query": promql}) as response,
        ):
            body = await response.json(content_type=None)
        return _result(promql, body)

    async def wait_for_data(
        self,
        promql: str,
        timeout_seconds: float = 20.0,
        predicate: Callable[[Result], bool] = bool,
        poll_seconds: float = 0.25,
    ) -> Result:
        """Poll until the query's result satisfies `predicate` (default: non-empty); return it."""
        deadline = time.monotonic() + timeout_seconds
        while True:
            result = await self.query(promql)
            if _satisfied(promql, result, predicate, deadline, timeout_seconds):
                return result
            await asyncio.sleep(poll_seconds)

    def wait_for_data_sync(
        self,
        promql: str,
        timeout_seconds: float = 20.0,
        predicate: Callable[[Result], bool] = bool,
        poll_seconds: float = 0.25,
    ) -> Result:
        """`wait_for_data` for callers without an event loop."""
        deadline = time.monotonic() + timeout_seconds
        while True:
            result = self.query_sync(promql)
            if _satisfied(promql, result, predicate, deadline, timeout_seconds):
                return result
            time.sleep(poll_seconds)


def _satisfied(
    promql: str, result: Result, predicate: Callable[[Result], bool], deadline: float, timeout_seconds: float
) -> bool:
    """Whether polling is done; raises TimeoutError once `deadline` has passed without success."""
    if predicate(result):
        return True
    if time.monotonic() >= deadline:
        raise TimeoutError(f"{promql!r} did not satisfy the predicate in {timeout_seconds}s; last: {result}")
    return False


def _result(promql: str, body: dict[str, Any]) -> Result:
    if body.get("status") != "success":
        raise PrometheusError(f"query {promql!r} failed: {body.get('errorType')}: {body.get('error')}")
    data = body["data"]
    if data["resultType"] in ("scalar", "string"):
        return [{"metric": {}, "value": data["result"]}]
    return list(data["result"])


def scalar(result: Result) -> float:
    """The value of a one-sample instant-vector (or scalar) result."""
    if len(result) != 1:
        raise PrometheusError(f"expected one sample, got {len(result)}: {result}")
    return float(result[0]["value"][1])
