"""The aiohttp middleware: authenticate, authorize, then hand over to the route.

Kept free of start-up concerns: it gets the authenticator, the authorizer and the always-allowed paths.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import structlog
from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from shared.auth import status
from shared.auth.attributes import InvalidRequestPath, RequestAttributes, request_attributes
from shared.auth.authenticator import AuthenticationFailed, Authenticator
from shared.auth.authorizer import AlwaysAllowPaths, AuthorizationError, Authorizer, Decision
from shared.auth.certs import parse_der_chain
from shared.auth.identity import UserInfo
from shared.auth.tls import peer_chain_der

log = structlog.get_logger(__name__)

USER_KEY = web.RequestKey("surge.auth.user", UserInfo)
"""request[USER_KEY]: the authenticated caller, for handlers and logs."""


@dataclass(frozen=True)
class CallerAccess:
    """The review the middleware runs, for another request the caller's own stands for (/debug/explain
    reads a metric on the caller's behalf: it may only if the caller may read that metric's path)."""

    user: UserInfo
    authorizer: Authorizer

    async def allows(self, method: str, path: str, query: Mapping[str, Sequence[str]]) -> Decision:
        """The decision on `method path?query`, its attributes built as for a request (InvalidRequestPath,
        AuthorizationError as there)."""
        return await self.authorizer.authorize(self.user, request_attributes(method, path, query))


ACCESS_KEY = web.RequestKey("surge.auth.access", CallerAccess)
"""request[ACCESS_KEY]: the caller's access, for handlers that act for the caller on other paths."""

_TARGETS_KEPT = 1024


# The attributes a request is authorized with, from its method, decoded path and decoded query.
AttributesOf = Callable[[str, str, Mapping[str, Sequence[str]]], RequestAttributes]


def make_middleware(
    authenticator: Authenticator,
    authorizer: Authorizer,
    always_allow: AlwaysAllowPaths,
    attributes_for: AttributesOf = request_attributes,
) -> Middleware:
    # The attributes of a request depend on its method and target alone, and clients repeat targets
    # (an HPA asks the same paths every period): they are kept, the oldest going first when full.
    # Plain dictionary reads and writes between awaits: no lock on the hot path.
    attributes_by_target: dict[tuple[str, str], RequestAttributes] = {}

    def attributes_of(request: web.Request) -> RequestAttributes:
        target = (request.method, request.raw_path)
        attributes = attributes_by_target.get(target)
        if attributes is None:
            query = {key: request.query.getall(key) for key in request.query}
            attributes = attributes_for(request.method, request.path, query)
            if len(attributes_by_target) >= _TARGETS_KEPT:
                del attributes_by_target[next(iter(attributes_by_target))]
            attributes_by_target[target] = attributes
        return attributes

    @web.middleware
    async def delegated_auth(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            attributes = attributes_of(request)
        except InvalidRequestPath as err:
            return web.json_response(
                status.internal_error(f"failed to create RequestInfo: {err}"), status=500
            )
        # Every request is authenticated, always-allowed paths included (upstream's WithAuthentication
        # wraps the whole handler chain): credentials that fail are a 401 there too. A probe without
        # credentials is anonymous and asks the kube-apiserver nothing.
        ssl_object = request.transport.get_extra_info("ssl_object") if request.transport else None
        try:
            user = await authenticator.authenticate(
                parse_der_chain(peer_chain_der(ssl_object)), request.headers
            )
        except (AuthenticationFailed, ValueError) as err:
            log.info("unauthenticated request", path=request.path, error=str(err))
            return web.json_response(status.unauthorized(), status=401)
        request[USER_KEY] = user
        request[ACCESS_KEY] = CallerAccess(user, authorizer)

        if not attributes.resource_request and always_allow.allows(attributes.path):
            return await handler(request)  # the path authorizer allows anyone, no review
        try:
            decision = await authorizer.authorize(user, attributes)
        except AuthorizationError as err:
            log.warning("authorization failed", path=request.path, user=user.name, error=str(err))
            return web.json_response(status.internal_error(str(err)), status=500)
        if not decision.allowed:
            log.info("forbidden", path=request.path, user=user.name, reason=decision.reason)
            return web.json_response(status.forbidden(user.name, attributes, decision.reason), status=403)
        return await handler(request)

    return delegated_auth
