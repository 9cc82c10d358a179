"""One probe check against a real container: HTTP(S) GET, TCP connect or `podman exec`, addressed on
the host's 127.0.0.1 at the port the container publishes there; and which ports those are.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import aiohttp
import structlog

from sim.apiserver.resources import Obj
from sim.workload.containers.probes import Check, ProbeSpec

log = structlog.get_logger(__name__)

Exec = Callable[[list[str]], Awaitable[int]]
"""Runs a command in the container: its exit code."""

PROBES = ("startupProbe", "livenessProbe", "readinessProbe")


def container_port(container: Obj, port: int | str) -> int | None:
    """A probe's port (a number, or the name of one of the container's ports) as a number."""
    if isinstance(port, int) or str(port).isdigit():
        return int(port)
    return next(
        (int(p["containerPort"]) for p in container.get("ports") or [] if p.get("name") == port), None
    )


def ports_to_publish(container: Obj) -> list[int]:
    """The container's TCP ports and those its probes use (a probe may target an undeclared port)."""
    ports = [
        int(p["containerPort"]) for p in container.get("ports") or [] if p.get("protocol", "TCP") == "TCP"
    ]
    for kind in PROBES:
        action = (container.get(kind) or {}).get("httpGet") or (container.get(kind) or {}).get("tcpSocket")
        number = None if action is None else container_port(container, action.get("port", ""))
        if number is not None:
            ports.append(number)
    return list(dict.fromkeys(ports))


def make_check(
    spec: ProbeSpec,
    container: Obj,
    host_ports: dict[int, int],
    exec_in: Exec,
    session: aiohttp.ClientSession,
) -> Check:
    """The check of `spec` for one running container (a timeout or an error is a failure)."""
    action = spec.action

    async def attempt() -> bool:
        if "exec" in action:
            return await exec_in([str(part) for part in action["exec"].get("command") or []]) == 0
        if "httpGet" in action:
            return await _http_get(action["httpGet"], _host_port(action["httpGet"]), session)
        if "tcpSocket" in action:
            _, writer = await asyncio.open_connection("127.0.0.1", _host_port(action["tcpSocket"]))
            writer.close()
            await writer.wait_closed()
            return True
        log.warning("probe kind not simulated; counted as passing", container=container["name"])
        return True

    def _host_port(target: Obj) -> int:
        number = container_port(container, target.get("port", ""))
        if number is None or number not in host_ports:
            raise OSError(f"probe port {target.get('port')!r} is not published")
        return host_ports[number]

    async def check() -> bool:
        try:
            async with asyncio.timeout(spec.timeout_seconds):
                return await attempt()
        except (TimeoutError, OSError, aiohttp.ClientError):
            return False

    return check


async def _http_get(action: Obj, host_port: int, session: aiohttp.ClientSession) -> bool:
    """Success is a status in [200, 400), as for the kubelet; HTTPS is not verified."""
    scheme = str(action.get("scheme", "HTTP")).lower()
    path = str(action.get("path", "/"))
    url = f"{scheme}://127.0.0.1:{host_port}{path if path.startswith('/') else '/' + path}"
    headers = {h["name"]: str(h.get("value", "")) for h in action.get("httpHeaders") or []}
    async with session.get(url, headers=headers, ssl=False) as response:
        return 200 <= response.status < 400
