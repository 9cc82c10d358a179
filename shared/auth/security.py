"""Start-up and lifetime of delegated auth: load CA files and the front-proxy ConfigMap, keep them fresh,
open the review clients, and hand the server its middleware and a hook for its TLS context.

Wiring (adapter/__main__.py, autoscaler/daemon.py):

    security = Security(auth_options_from_namespace(ns), user_agent=PROG)   # ValueError: bad flag values
    daemon = AdapterDaemon(options, config, middlewares=[security.middleware],
                           tls_hooks=[security.configure_tls], start_hooks=[security.start])
    ...
    await daemon.stop(); await security.close()

The port opens before `start()` has run (its health paths answer while the API server is unreachable);
until then the middleware answers every other request as k8s.io/apiserver answers while it is not
initialized (kube-apiserver's --startup-send-retry-after-until-ready): 503 with Retry-After, health paths
exempt, here as a metav1.Status. `start()` waits (shared.kube.wait) while the API server does not answer
the ConfigMap's read; with --insecure-http there is nothing to look up (no client certificate can be
presented over plain HTTP, so no CA could vouch for anyone).
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Callable
from pathlib import Path

import structlog
from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from shared.auth.attributes import request_attributes
from shared.auth.authenticator import Authenticator, CachingTokenReviewer
from shared.auth.authorizer import AlwaysAllowPaths, Authorizer
from shared.auth.cache import TTLCache
from shared.auth.certs import CertificateAuthority
from shared.auth.configmap import (
    CONFIGMAP_NAME,
    CONFIGMAP_NAMESPACE,
    AuthenticationSources,
    merge_sources,
    parse_configmap,
)
from shared.auth.flags import AuthOptions
from shared.auth.middleware import AttributesOf, make_middleware
from shared.auth.requestheader import RequestHeaderConfig
from shared.auth.tls import ClientCertificateTLS
from shared.auth.webhooks import (
    Backoff,
    ReviewError,
    SubjectAccessReviews,
    TokenReviews,
    read_authentication_configmap,
)
from shared.kube import KubeClient, KubeConfigError, load_access
from shared.kube.permissions import Permission
from shared.kube.wait import unavailable_status, until_available

log = structlog.get_logger(__name__)

# Upstream watches the ConfigMap; re-reading it this often bounds how long a rotated CA goes unseen.
DEFAULT_REFRESH_SECONDS = 60.0
_CACHE_ENTRIES = 8192
DEFAULT_BACKOFF = Backoff()
# Upstream's Retry-After while a server is not initialized.
_RETRY_AFTER_SECONDS = "5"


class SecurityStartupError(Exception):
    """Delegated authentication/authorization cannot be set up; the message says why."""


def _flag_sources(options: AuthOptions) -> AuthenticationSources:
    client_ca = None
    if options.client_ca_file:
        client_ca = CertificateAuthority.from_pem(Path(options.client_ca_file).read_bytes())
    request_header = None
    if options.requestheader_client_ca_file:
        request_header = RequestHeaderConfig(
            ca=CertificateAuthority.from_pem(Path(options.requestheader_client_ca_file).read_bytes()),
            allowed_names=options.requestheader_allowed_names,
            username_headers=options.requestheader_username_headers,
            uid_headers=options.requestheader_uid_headers,
            group_headers=options.requestheader_group_headers,
            extra_prefixes=options.requestheader_extra_headers_prefix,
        )
    return AuthenticationSources(client_ca=client_ca, request_header=request_header)


def _lookup_unavailable(err: Exception) -> str | None:
    """The kind of failure when the ConfigMap's read found the API server unable to answer (retried)."""
    return unavailable_status(err.status) if isinstance(err, ReviewError) else None


def _not_ready() -> web.Response:
    status = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "delegated authentication and authorization are not ready yet (waiting for the API "
        "server), please try again later",
        "reason": "ServiceUnavailable",
        "code": 503,
    }
    return web.json_response(status, status=503, headers={"Retry-After": _RETRY_AFTER_SECONDS})


async def _client_for(kubeconfig: str, user_agent: str) -> KubeClient:
    """A client from a kubeconfig file, or from the pod's service account when the path is empty."""
    return KubeClient(await load_access(kubeconfig or None), user_agent=user_agent)


class Security:
    def __init__(
        self,
        options: AuthOptions,
        *,
        user_agent: str,
        plain_http: bool = False,
        attributes_for: AttributesOf = request_attributes,
        refresh_seconds: float = DEFAULT_REFRESH_SECONDS,
        backoff: Backoff = DEFAULT_BACKOFF,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._options = options
        self._user_agent = user_agent
        # Routes that stand for an object (the autoscaler's decision records) are authorized as its read.
        self._attributes_for = attributes_for
        self._refresh_seconds = refresh_seconds
        self._backoff = backoff
        self._clock = clock
        self._sources = AuthenticationSources(client_ca=None, request_header=None)
        # `plain_http` (--insecure-http): no client certificate, nothing for the ConfigMap's CAs to verify.
        self._lookup = not plain_http and not options.skip_lookup and not (
            options.client_ca_file and options.requestheader_client_ca_file
        )
        self._always_allow = AlwaysAllowPaths(options.always_allow_paths)
        self._authn_kube: KubeClient | None = None
        self._authz_kube: KubeClient | None = None
        self._tls = ClientCertificateTLS(options.sni_certificates)
        self._authenticating: Middleware | None = None  # authenticate, authorize: once started

    @property
    def sources(self) -> AuthenticationSources:
        return self._sources

    @property
    def middleware(self) -> Middleware:
        """The aiohttp middleware: authenticate, authorize; before start() has finished, 503 but for the
        always-allowed paths."""
        return self._delegated_auth

    @web.middleware
    async def _delegated_auth(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if self._authenticating is not None:
            return await self._authenticating(request, handler)
        if self._always_allow.allows(request.path):
            return await handler(request)
        return _not_ready()

    def needed_permissions(self) -> list[Permission]:
        """What delegated authentication and authorization ask of the API server: the grants of the
        `system:auth-delegator` ClusterRole, and the front-proxy ConfigMap's `get` (the
        `extension-apiserver-authentication-reader` Role) unless the lookup is off."""
        needed = [
            Permission("create", "tokenreviews", "authentication.k8s.io", needed_for="authenticating tokens"),
            Permission(
                "create", "subjectaccessreviews", "authorization.k8s.io", needed_for="authorizing callers"
            ),
        ]
        if self._lookup:
            front_proxy_ca = "the front-proxy's client CA (requests the aggregator forwards)"
            needed.append(
                Permission(
                    "get", "configmaps", namespace=CONFIGMAP_NAMESPACE, name=CONFIGMAP_NAME,
                    needed_for=front_proxy_ca,
                )
            )
        return needed

    async def start(self) -> None:
        """Open the review clients and load the client CAs, waiting while the API server cannot answer the
        ConfigMap's read. Raises SecurityStartupError when delegated auth cannot work (bad kubeconfig or CA
        file, the ConfigMap's read refused and --authentication-tolerate-lookup-failure not set)."""
        try:
            self._authn_kube = await _client_for(self._options.authentication_kubeconfig, self._user_agent)
            self._authz_kube = await _client_for(self._options.authorization_kubeconfig, self._user_agent)
            self._sources = await self._initial_sources()
        except (OSError, ValueError, KubeConfigError) as err:
            raise SecurityStartupError(f"delegated authentication: {err}") from err
        self._request_client_certificates_if_due()
        token_reviewer = CachingTokenReviewer(
            TokenReviews(self._authn_kube, self._backoff),
            self._options.token_cache_ttl,
            TTLCache(_CACHE_ENTRIES, self._clock),
        )
        authorizer = Authorizer(
            SubjectAccessReviews(self._authz_kube, self._backoff),
            TTLCache(_CACHE_ENTRIES, self._clock),
            allowed_ttl=self._options.authorized_ttl,
            denied_ttl=self._options.unauthorized_ttl,
        )
        self._authenticating = make_middleware(
            Authenticator(lambda: self._sources, token_reviewer),
            authorizer,
            self._always_allow,
            self._attributes_for,
        )

    async def _initial_sources(self) -> AuthenticationSources:
        try:
            return await until_available(
                self._load_sources, "the front-proxy ConfigMap", unavailable_kind=_lookup_unavailable
            )
        except ReviewError as err:
            if not self._options.tolerate_lookup_failure:
                raise SecurityStartupError(
                    f"unable to load configmap based request-header-client-ca-file: {err}"
                ) from err
            log.warning("continuing without the front-proxy ConfigMap", error=str(err))
            return _flag_sources(self._options)

    async def _load_sources(self) -> AuthenticationSources:
        flags = _flag_sources(self._options)
        if not self._lookup:
            return flags
        assert self._authn_kube is not None
        data = await read_authentication_configmap(self._authn_kube, self._backoff)
        return merge_sources(flags, parse_configmap(data))

    async def refresh_forever(self) -> None:
        """Re-read the client CAs and the ConfigMap periodically; the daemon runs it under its supervisor."""
        while True:
            await asyncio.sleep(self._refresh_seconds)
            await self.refresh()

    async def refresh(self) -> None:
        """Re-read CA files and the ConfigMap; on failure keep what we have."""
        try:
            sources = await self._load_sources()
        except (OSError, ValueError, ReviewError) as err:
            log.warning("keeping previous client CAs", error=str(err))
            return
        if sources == self._sources:
            return
        log.info("client CAs or front-proxy settings changed")
        self._sources = sources
        self._request_client_certificates_if_due()

    def _request_client_certificates_if_due(self) -> None:
        """Handshakes ask for a client certificate once a client CA or front-proxy CA is known, as upstream
        (whose serving ClientCA is then set); the authenticators verify what is presented."""
        if self._sources.client_ca is not None or self._sources.request_header is not None:
            self._tls.request_client_certificates()

    def configure_tls(self, context: ssl.SSLContext) -> None:
        """Hook for the serving context (after start()): request client certificates, add SNI pairs."""
        self._tls.configure(context)

    async def close(self) -> None:
        for kube in (self._authn_kube, self._authz_kube):
            if kube is not None:
                await kube.close()
