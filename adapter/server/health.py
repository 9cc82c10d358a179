"""`/healthz`, `/livez`, `/readyz` in k8s.io/apiserver's text format (`ok`, `?verbose` check lists)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from aiohttp import web

Check = Callable[[], bool]


def _always_ok() -> bool:
    return True


@dataclass
class HealthChecks:
    """Named checks per endpoint; `ping` is always present. Readiness checks are added by the daemon."""

    readiness: dict[str, Check] = field(default_factory=dict)

    def checks_for(self, endpoint: str) -> Mapping[str, Check]:
        checks: dict[str, Check] = {"ping": _always_ok}
        if endpoint == "readyz":
            checks.update(self.readiness)
        return checks

    def handler(self, endpoint: str) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handle(request: web.Request) -> web.Response:
            checks = self.checks_for(endpoint)
            only = request.match_info.get("check")
            if only is not None:
                if only not in checks:
                    return web.Response(status=404, text="404 page not found\n")
                checks = {only: checks[only]}
            results = {name: check() for name, check in checks.items()}
            healthy = all(results.values())
            if "verbose" in request.query or not healthy:
                lines = [
                    f"[+]{name} ok" if ok else f"[-]{name} failed: reason withheld"
                    for name, ok in results.items()
                ]
                lines.append(f"{endpoint} check passed" if healthy else f"{endpoint} check failed")
                text = "\n".join(lines) + "\n"
            else:
                text = "ok"
            return web.Response(status=200 if healthy else 500, text=text)

        return handle

    def add_routes(self, app: web.Application) -> None:
        for endpoint in ("healthz", "livez", "readyz"):
            handle = self.handler(endpoint)
            app.router.add_get(f"/{endpoint}", handle)
            app.router.add_get(f"/{endpoint}/{{check}}", handle)
