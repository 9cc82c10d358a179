"""The multiplexer's aiohttp middleware. It runs after authentication and authorization, so the caller is
authorized by Surge as for any metric before a delegate is asked (with Surge's own credentials).

- Discovery lists (`/apis/custom.metrics.k8s.io/<v>`, `/apis/external.metrics.k8s.io/v1beta1`) are
  Surge's merged with the delegates'.
- A read of a metric a delegate lists and Surge does not goes to that delegate, same path and query;
  its answer, errors included, goes back unchanged. Any other read is Surge's; when Surge answers 404 the
  fallback delegate of the group (if any) is asked instead, or else the lists are read again and the
  read forwarded if a delegate lists the metric now.
- A read over a short window (burst mode's `surge.dev/window` requirement) is Surge's alone: a delegate
  would not know the requirement (it might answer its normal value, which a burst check would take for
  the short window's), so a read that would go to a delegate is refused with 400, and the burst check
  leaves that metric out, as one whose query cannot be read over a window.
"""

from __future__ import annotations

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from adapter.delegate.listing import merged_custom, merged_external
from adapter.delegate.router import Delegate, Router
from adapter.server import documents
from adapter.server.routes import json_response, parse_custom_path
from adapter.server.status import CUSTOM_GROUP, EXTERNAL_GROUP, StatusError, bad_request
from shared.kube.http11 import Answer
from shared.metricwindow import WINDOW_LABEL
from shared.selectors import parse_selector

_CUSTOM_PREFIX = f"/apis/{CUSTOM_GROUP}/"
_EXTERNAL_PREFIX = f"/apis/{EXTERNAL_GROUP}/"


def metric_of(path: str) -> tuple[str, str, str] | None:
    """(group, resource, metric) of a metric read (resource "" for external metrics); None otherwise,
    also for a version Surge does not serve (Surge answers it: 404)."""
    if path.startswith(_CUSTOM_PREFIX):
        version, _, tail = path[len(_CUSTOM_PREFIX) :].partition("/")
        if version not in documents.CUSTOM_VERSIONS:
            return None
        try:
            read = parse_custom_path(tail, "", "") if tail else None
        except StatusError:
            return None  # malformed: Surge answers it
        return (CUSTOM_GROUP, read.resource, read.metric) if read is not None else None
    if path.startswith(_EXTERNAL_PREFIX):
        version, _, tail = path[len(_EXTERNAL_PREFIX) :].partition("/")
        if version not in documents.EXTERNAL_VERSIONS:
            return None
        parts = tail.split("/")
        if len(parts) == 3 and parts[0] == "namespaces" and all(parts):
            return EXTERNAL_GROUP, "", parts[2]
    return None


def discovery_list_of(path: str) -> tuple[str, str] | None:
    """(group, version) of a metric list path (with or without the trailing slash); None otherwise."""
    for group, prefix, versions in (
        (CUSTOM_GROUP, _CUSTOM_PREFIX, documents.CUSTOM_VERSIONS),
        (EXTERNAL_GROUP, _EXTERNAL_PREFIX, documents.EXTERNAL_VERSIONS),
    ):
        if path.startswith(prefix):
            version = path[len(prefix) :].removesuffix("/")
            return (group, version) if version in versions else None
    return None


def _asks_window(request: web.Request, group: str) -> bool:
    """Whether the read's selector (metricLabelSelector of a custom metric, labelSelector of an external
    one) has the window requirement; an unparsable selector is the delegate's to refuse."""
    text = request.query.get("metricLabelSelector" if group == CUSTOM_GROUP else "labelSelector", "")
    if WINDOW_LABEL not in text:
        return False
    try:
        return any(requirement.key == WINDOW_LABEL for requirement in parse_selector(text).requirements)
    except ValueError:
        return False


def _passed_through(answer: Answer) -> web.Response:
    headers = {"Content-Type": answer.content_type.decode("latin-1")} if answer.content_type else None
    return web.Response(status=answer.status, body=answer.body, headers=headers)


def make_delegate_middleware(router: Router) -> Middleware:
    def merged_list(group: str, version: str) -> web.Response:
        listings = router.listings(group)
        if group == CUSTOM_GROUP:
            entries = merged_custom(router.surge_custom_entries(), listings)
            return json_response(documents.custom_resource_list(version, entries))
        return json_response(
            documents.external_resource_list(merged_external(router.surge_external_names(), listings))
        )

    async def forward(request: web.Request, delegate: Delegate, group: str, metric: str) -> web.Response:
        if _asks_window(request, group):
            raise bad_request(
                f"{WINDOW_LABEL}: the metric {metric} is served by another metrics server (a delegate), "
                "which cannot read it over a window"
            )
        answer = await router.forward(delegate, request.raw_path, metric)
        if answer.status == 404:
            await router.refresh_after_miss()  # it may have dropped the metric: do not route it there
        return _passed_through(answer)

    @web.middleware
    async def multiplex(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.method != "GET":
            return await handler(request)
        listed = discovery_list_of(request.path)
        if listed is not None:
            return merged_list(*listed)
        read = metric_of(request.path)
        if read is None:
            return await handler(request)
        group, written, metric = read
        resource = router.canonical(written)  # lists name `pods`; a client may ask for `pod`
        delegate = router.owner(group, resource, metric)
        if delegate is not None:
            return await forward(request, delegate, group, metric)
        try:
            return await handler(request)
        except StatusError as err:
            if err.code != 404 or router.serves(group, resource, metric):
                raise
            delegate = router.fallback(group)
            if delegate is None and await router.refresh_after_miss():
                delegate = router.owner(group, resource, metric)
            if delegate is None:
                raise
        return await forward(request, delegate, group, metric)

    return multiplex
