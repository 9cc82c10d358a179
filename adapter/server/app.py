"""The aiohttp application: routes, error rendering, content negotiation, self-metrics."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import metadata

import structlog
from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from adapter.server import documents
from adapter.server.explain_routes import ExplainRoutes
from adapter.server.health import HealthChecks
from adapter.server.negotiation import accepts_plain_json
from adapter.server.resource_routes import ResourceMetricRoutes
from adapter.server.routes import MetricRoutes, MetricsProvider
from adapter.server.rules import RulesHolder
from adapter.server.selfmetrics import AdapterMetrics
from adapter.server.status import StatusError, internal_error, method_not_allowed, not_acceptable, not_found

log = structlog.get_logger(__name__)


def _package_version() -> str:
    try:
        return "v" + metadata.version("surge")
    except metadata.PackageNotFoundError:  # running from a source tree that was never installed
        return "v0.0.0-dev"


VERSION = _package_version()
_JSON_PREFIXES = ("/apis", "/openapi", "/version")


@web.middleware
async def render_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every error leaves as a metav1.Status; JSON endpoints refuse non-JSON Accept headers with 406."""
    try:
        if request.path.startswith(_JSON_PREFIXES) and not accepts_plain_json(request.headers.get("Accept")):
            raise not_acceptable()
        return await handler(request)
    except StatusError as err:
        return err.response()
    except web.HTTPMethodNotAllowed as err:
        return method_not_allowed(err.method).response()
    except web.HTTPNotFound:
        return not_found().response()
    except web.HTTPException:
        raise
    except Exception:
        log.exception("request failed", path=request.path)
        return internal_error("unexpected server error").response()


@dataclass
class AppDependencies:
    rules: RulesHolder  # the rules served now; a config reload swaps them
    health: HealthChecks
    metrics: AdapterMetrics
    explain: ExplainRoutes  # /debug/explain
    # custom.metrics.k8s.io and external.metrics.k8s.io: the rules' provider unless given (tenant rules
    # layer theirs over it).
    provider: Callable[[], MetricsProvider] | None = None


def make_app(deps: AppDependencies, middlewares: Sequence[Middleware] = ()) -> web.Application:
    """The adapter's application. `middlewares` run inside error rendering (authn/authz go here), so a
    StatusError they raise is rendered like any other."""
    app = web.Application(middlewares=[deps.metrics.middleware(), render_errors, *middlewares])
    MetricRoutes(deps.provider or (lambda: deps.rules.current.provider)).add_routes(app)
    ResourceMetricRoutes(lambda: deps.rules.current.resource_metrics).add_routes(app)
    deps.health.add_routes(app)
    deps.explain.add_routes(app)

    async def apis(request: web.Request) -> web.Response:
        return web.json_response(documents.api_group_list(deps.rules.current.groups))

    async def openapi_v2(request: web.Request) -> web.Response:
        return web.json_response(documents.openapi_v2())

    async def openapi_v3(request: web.Request) -> web.Response:
        return web.json_response(documents.openapi_v3())

    async def version(request: web.Request) -> web.Response:
        return web.json_response(documents.version_info(VERSION))

    # Only `/apis`: custom-metrics-apiserver answers 404 for `/apis/` (its installer tests check it).
    app.router.add_get("/apis", apis)
    app.router.add_get("/openapi/v2", openapi_v2)
    app.router.add_get("/openapi/v3", openapi_v3)
    app.router.add_get("/version", version)
    app.router.add_get("/metrics", deps.metrics.handle)
    return app
