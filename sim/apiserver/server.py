"""ApiServer: the aiohttp application, TLS, authentication (and impersonation), authorization (AlwaysAllow or
RBAC), routing, ServiceAccount TokenRequests, kubeconfig, and plug-in hooks."""

from __future__ import annotations

import asyncio
import base64
import secrets
import shutil
import ssl
import tempfile
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Literal
from urllib.parse import unquote

import structlog
import yaml
from aiohttp import web

from sim.apiserver import authz, discovery, errors
from sim.apiserver.aggregator import Aggregator
from sim.apiserver.audit import AuditLevel, AuditLog
from sim.apiserver.builtins import new_registry
from sim.apiserver.certs import CertificateAuthority
from sim.apiserver.crds import CrdSync
from sim.apiserver.errors import ApiError
from sim.apiserver.fault_admin import FaultAdmin
from sim.apiserver.faults import Faults
from sim.apiserver.handlers import PodLogs, ResourceHandlers, dumps, error_response, json_response, read_body
from sim.apiserver.hpa_validation import FeatureGates
from sim.apiserver.rbac import ClusterRoleAggregator, RbacAuthorizer, ensure_bootstrap_policy
from sim.apiserver.resources import Obj, ResourceType
from sim.apiserver.reviews import (
    ACCESS_REVIEW_RESOURCES,
    ANONYMOUS,
    TOKEN_REVIEW_RESOURCES,
    Reviews,
    UserInfo,
)
from sim.apiserver.store import Store, now_rfc3339

log = structlog.get_logger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
INITIAL_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
CONTAINER_HOST_ADDRESS = "10.0.2.2"
"""The host's loopback as seen from a container in its own network namespace (podman's slirp4netns with
allow_host_loopback): containers the simulated kubelet runs reach this server and Prometheus there."""


USER = web.RequestKey("user", UserInfo)
"""Who each request acts as: `request[USER]` (the impersonated user when it impersonates)."""
REQUESTER = web.RequestKey("requester", UserInfo)
"""Who authenticated each request (the audit log's `user`), impersonating or not."""
AuthorizationMode = Literal["AlwaysAllow", "RBAC"]
SERVICE_ACCOUNTS = ("", "serviceaccounts")
API_AUDIENCE = "https://kubernetes.default.svc.cluster.local"
"""kube-apiserver's default --api-audiences (its --service-account-issuer), for TokenRequests naming none."""
MIN_TOKEN_SECONDS, MAX_TOKEN_SECONDS, DEFAULT_TOKEN_SECONDS = 600, 1 << 32, 3600
IMPERSONATE_EXTRA = "impersonate-extra-"


class ApiServer:
    """A simulated kube-apiserver. `store` is usable (on the server's loop) before `start()` too.

    tls=False serves plain HTTP. `ca` lets many servers share one CA (fast test start-up).
    `history_size` is the per-resource watch window; `bookmark_interval` the seconds between watch
    bookmarks for clients that allow them; `probe_interval` the seconds between APIService
    availability probes (aggregation, see aggregator.py); `audit_log` a file to append the audit log to
    (audit.py: one audit.k8s.io/v1 Event per request), at `audit_level` ("Request" adds write bodies).

    `authorization_mode` is kube-apiserver's --authorization-mode: "AlwaysAllow" (the default) lets every
    request through `reviews.policy`, which allows all unless a test replaces it; "RBAC" makes that policy
    the Roles and Bindings in the store (rbac/), creates the default policy at start and runs the
    ClusterRole aggregation controller. Either way system:masters bypasses the policy and health checks
    are open.
    """

    def __init__(
        self,
        *,
        tls: bool = True,
        ca: CertificateAuthority | None = None,
        history_size: int = 1000,
        bookmark_interval: float = 1.0,
        probe_interval: float = 5.0,
        audit_log: Path | None = None,
        audit_level: AuditLevel = "Metadata",
        authorization_mode: AuthorizationMode = "AlwaysAllow",
    ) -> None:
        if authorization_mode not in ("AlwaysAllow", "RBAC"):
            raise ValueError(f"unknown authorization mode {authorization_mode!r}")
        # kube-apiserver's --feature-gates that validation reads (v1.37 defaults); a test may flip them.
        self.feature_gates = FeatureGates()
        self.registry = new_registry(self.feature_gates)
        self.store = Store(self.registry, history_size)
        self.store.add_listener(CrdSync(self.registry, self.store))
        self.tls = tls
        self.ca = (ca or CertificateAuthority()) if tls else None
        self.admin_token = secrets.token_urlsafe(24)
        self.tokens: dict[str, UserInfo] = {
            self.admin_token: UserInfo("admin", ("system:masters", "system:authenticated"))
        }
        self._handlers = ResourceHandlers(self.registry, self.store, bookmark_interval)
        self._extra: dict[tuple[str, str], Handler] = {}
        self.faults = Faults(self.store, self._caller, self.restart)
        self._fault_admin = FaultAdmin(self.faults)
        self.reviews = Reviews(self.tokens, lambda request: request[USER])
        self.add_api_group("authentication.k8s.io", "v1", TOKEN_REVIEW_RESOURCES, self.reviews.token_review)
        self.add_api_group("authorization.k8s.io", "v1", ACCESS_REVIEW_RESOURCES, self.reviews.access_review)
        self.role_aggregation: ClusterRoleAggregator | None = None
        if authorization_mode == "RBAC":
            self.reviews.policy = authz.privileged_first(RbacAuthorizer(self.store).policy)
            self.role_aggregation = ClusterRoleAggregator(self.store)
        self._audit_path = audit_log
        self._audit_level = audit_level
        self.audit: AuditLog | None = None
        self._runner: web.AppRunner | None = None
        self._site: web.TCPSite | None = None
        self._serving_ssl: ssl.SSLContext | None = None
        self._workdir: Path | None = None
        self._url = ""
        for name in INITIAL_NAMESPACES:
            self.store.create(("", "namespaces"), {"metadata": {"name": name}})
        self.aggregator = Aggregator(self.registry, self.store, self.ca, probe_interval)

    # ---- lifecycle -------------------------------------------------------------------------------

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self._workdir = Path(tempfile.mkdtemp(prefix="surge-apiserver-"))
        ssl_context = self._ssl_context(host) if self.ca is not None else None
        await self.aggregator.start(self._workdir)
        if self.role_aggregation is not None:
            # kube-apiserver's rbac/bootstrap-roles post-start hook, done before the first request is served.
            ensure_bootstrap_policy(self.store)
            self.role_aggregation.start()
        middlewares = [self._errors, self.faults.middleware, self._authenticate]
        if self._audit_path is not None:
            # Outermost: it sees every answer, the refused and the injected ones too.
            self.audit = AuditLog(self._audit_path, self._caller, self._audit_level)
            middlewares.insert(0, self.audit.middleware)
        app = web.Application(middlewares=middlewares, client_max_size=64 << 20)
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=1.0)
        await self._runner.setup()
        self._serving_ssl = ssl_context
        self._site = web.TCPSite(self._runner, host, port, ssl_context=ssl_context)
        await self._site.start()
        bound = self._runner.addresses[0]
        netloc = f"[{bound[0]}]:{bound[1]}" if ":" in bound[0] else f"{bound[0]}:{bound[1]}"
        self._url = f"{'https' if ssl_context else 'http'}://{netloc}"
        log.info("apiserver started", url=self._url)

    async def restart(self, down_for: float) -> None:
        """What a restart of kube-apiserver looks like to its clients (its storage, etcd, stays): every
        connection dropped, watches included, connections refused for `down_for` seconds, then the same
        address served again with the same objects and resourceVersions."""
        assert self._runner is not None and self._site is not None, "start() the server first"
        host, port = self._runner.addresses[0][:2]
        await self._site.stop()
        self.store.close_watches()
        server = self._runner.server
        for connection in list(server.connections if server is not None else ()):
            if connection.transport is not None:
                connection.transport.abort()
        log.info("apiserver down for a restart", seconds=down_for)
        await asyncio.sleep(down_for)
        self._site = web.TCPSite(self._runner, host, port, ssl_context=self._serving_ssl)
        await self._site.start()
        log.info("apiserver restarted", url=self._url)

    def _ssl_context(self, host: str) -> ssl.SSLContext:
        assert self.ca is not None and self._workdir is not None
        # CONTAINER_HOST_ADDRESS: how a container on slirp4netns reaches this machine's loopback.
        names = [host, "127.0.0.1", "localhost", "::1", CONTAINER_HOST_ADDRESS]
        pair = self.ca.issue_server(list(dict.fromkeys(names)))
        cert, key = self._workdir / "apiserver.crt", self._workdir / "apiserver.key"
        cert.write_bytes(pair.cert_pem)
        key.write_bytes(pair.key_pem)
        self.ca_file.write_bytes(self.ca.cert_pem)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(cert, key)
        # Request (not require) a client certificate; one signed by our CA authenticates its CN.
        context.verify_mode = ssl.CERT_OPTIONAL
        context.load_verify_locations(cadata=self.ca.cert_pem.decode())
        return context

    async def stop(self) -> None:
        self.store.close_watches()
        await self.aggregator.stop()
        if self.role_aggregation is not None:
            self.role_aggregation.stop()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = self._site = None
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None
        if self.audit is not None:
            self.audit.close()
            self.audit = None

    @property
    def url(self) -> str:
        """Base URL, e.g. https://127.0.0.1:41234 (set by start())."""
        return self._url

    @property
    def ca_file(self) -> Path:
        """PEM file of the CA that signed the serving certificate (exists while running)."""
        assert self._workdir is not None, "start() the server first"
        return self._workdir / "ca.crt"

    def add_token(
        self, token: str, user: str, groups: tuple[str, ...] = ("system:authenticated",), uid: str = "",
        extra: dict[str, list[str]] | None = None,
    ) -> None:
        """Accept `token` as `user` — for requests to this server and in TokenReviews."""
        self.tokens[token] = UserInfo(user, groups, uid, extra or {})

    def service_account_token(self, namespace: str, name: str) -> str:
        """A new bearer token for ServiceAccount `namespace/name`, authenticating as kube-apiserver's
        service-account authenticator does: user `system:serviceaccount:<ns>:<name>` in the groups
        `system:serviceaccounts`, `system:serviceaccounts:<ns>` and `system:authenticated`."""
        token = secrets.token_urlsafe(32)
        self.add_token(
            token,
            f"system:serviceaccount:{namespace}:{name}",
            ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"),
        )
        return token

    def write_kubeconfig(self, path: str | Path, user: str = "admin", namespace: str = "default") -> Path:
        """A kubeconfig for this server: CA data embedded, bearer token for `user` (admin is in
        system:masters; other users get a new token and the groups [system:authenticated])."""
        token = next((t for t, u in self.tokens.items() if u.name == user), None)
        if token is None:
            token = secrets.token_urlsafe(24)
            self.add_token(token, user)
        cluster: Obj = {"server": self.url}
        if self.ca is not None:
            cluster["certificate-authority-data"] = _b64(self.ca.cert_pem)
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "sim", "cluster": cluster}],
            "users": [{"name": user, "user": {"token": token}}],
            "contexts": [
                {"name": "sim", "context": {"cluster": "sim", "user": user, "namespace": namespace}}
            ],
            "current-context": "sim",
            "preferences": {},
        }
        target = Path(path)
        target.write_text(yaml.safe_dump(config, sort_keys=False))
        return target

    # ---- hooks -----------------------------------------------------------------------------------

    def add_api_group(self, group: str, version: str, resources: list[Obj], handler: Handler) -> None:
        """Serve `/apis/<group>/<version>/...` with `handler` (e.g. metrics.k8s.io).

        `resources` are the APIResource dicts listed at `/apis/<group>/<version>`; the group also
        appears in `/apis`. The handler gets every request below that prefix, already authenticated
        (`request[USER]` is a UserInfo); `request.match_info["tail"]` is the full path.
        """
        self.registry.add_extra(group, version, resources)
        self._extra[(group, version)] = handler

    def serve_pod_logs(self, logs: PodLogs) -> None:
        """Answer `pods/<name>/log` from `logs` (a kubelet's); without it a pod's log is empty."""
        self._handlers.pod_logs = logs

    def add_resource_type(self, rt: ResourceType) -> None:
        """Serve another built-in-like resource type (stored and watched like the others)."""
        self.registry.add(rt)

    def seed(self, objects: Iterable[Obj]) -> list[Obj]:
        """Create objects as they are (status kept), in order; `apiVersion`/`kind` pick the resource."""
        created = []
        for obj in objects:
            rt = self.resource_for(obj["apiVersion"], obj["kind"])
            stored = rt.codec.to_storage(obj, None) if rt.codec is not None else obj
            created.append(self.store.create(rt.storage, stored, keep_status=True))
        return created

    def resource_for(self, api_version: str, kind: str) -> ResourceType:
        group, _, version = api_version.rpartition("/")
        for rt in self.registry.resources(group, version):
            if rt.kind == kind:
                return rt
        raise errors.bad_request(f'no matches for kind "{kind}" in version "{api_version}"')

    # ---- HTTP ------------------------------------------------------------------------------------

    @web.middleware
    async def _errors(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except ApiError as err:
            return error_response(err)
        except (web.HTTPException, ConnectionResetError):
            raise
        except Exception:
            log.exception("apiserver handler failed", method=request.method, path=request.path)
            return error_response(ApiError(500, "InternalError", "an error on the server has prevented "
                                           "the request from succeeding"))

    @web.middleware
    async def _authenticate(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        requester = request[REQUESTER] = self._user(request)
        user = request[USER] = self._impersonated(request, requester)
        if request.path not in authz.ALWAYS_ALLOWED_PATHS:
            self._authorize(user, authz.attributes(request.method, request.path, request.query))
        return await handler(request)

    def _authorize(self, user: UserInfo, attrs: Obj) -> None:
        if authz.PRIVILEGED_GROUP not in user.groups:
            decision = self.reviews.policy(authz.review_spec(user, attrs))
            if not decision.allowed:
                raise authz.forbidden(user, attrs, decision)

    def _impersonated(self, request: web.Request, requester: UserInfo) -> UserInfo:
        """The user the Impersonate-* headers ask for, once `requester` is allowed each part of it."""
        headers = request.headers
        name = headers.get("Impersonate-User", "")
        groups = headers.getall("Impersonate-Group", [])
        uid = headers.get("Impersonate-Uid", "")
        extra: dict[str, list[str]] = {}
        for header, value in headers.items():
            if header.lower().startswith(IMPERSONATE_EXTRA):
                extra.setdefault(unquote(header[len(IMPERSONATE_EXTRA):].lower()), []).append(value)
        if not name:
            if groups or extra or uid:
                raise ApiError(500, "InternalError", "Internal error occurred: requested impersonation of "
                               "groups, extra or uid without impersonating a user")
            return requester
        checks, user = authz.impersonation(name, groups, extra, uid)
        for attrs in checks:
            self._authorize(requester, attrs)
        return user

    def _caller(self, request: web.Request) -> UserInfo | None:
        """Who made a request, for the audit log: None if it could not be authenticated."""
        if REQUESTER in request:
            return request[REQUESTER]
        try:
            return self._user(request)
        except ApiError:
            return None

    def _user(self, request: web.Request) -> UserInfo:
        auth = request.headers.get("Authorization", "")
        if auth.startswith("Bearer "):
            user = self.tokens.get(auth[len("Bearer "):].strip())
            if user is None:
                raise ApiError(401, "Unauthorized", "Unauthorized")
            return user
        peer = request.transport.get_extra_info("peercert") if request.transport else None
        if peer:
            subject = [attr for rdn in peer.get("subject", ()) for attr in rdn]
            cn = next((v for k, v in subject if k == "commonName"), None)
            if cn:
                orgs = tuple(v for k, v in subject if k == "organizationName")
                return UserInfo(cn, (*orgs, "system:authenticated"))
        return ANONYMOUS

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        parts = [p for p in request.path.split("/") if p]
        accept = request.headers.get("Accept", "")
        if request.method != "GET" and (len(parts) < 3 or (parts[0] == "apis" and len(parts) == 3)):
            raise errors.method_not_allowed(request.method, "", request.path)
        match parts:
            case ["version"]:
                return json_response(discovery.version_info())
            case ["debug", "sim", "faults", *rest]:
                return await self._fault_admin.handle(request, request[USER], rest)
            case ["healthz" | "livez" | "readyz", *_]:
                return web.Response(text="ok", content_type="text/plain")
            case ["api" | "apis"] if (version := discovery.aggregated_version(accept)):
                body = discovery.aggregated_discovery(
                    self.registry, parts[0] == "api", version, self.aggregator.discovery
                )
                return web.Response(body=dumps(body).encode(),
                                    headers={"Content-Type": discovery.aggregated_content_type(version)})
            case ["api"]:
                return json_response(discovery.api_versions(self.url.split("://", 1)[-1]))
            case ["apis"]:
                return json_response(discovery.api_group_list(self.registry))
            case ["openapi", "v2"]:
                if discovery.OPENAPI_V2_PROTOBUF in accept:
                    return web.Response(body=discovery.openapi_v2_protobuf(),
                                        headers={"Content-Type": discovery.OPENAPI_V2_PROTOBUF_CONTENT_TYPE})
                return json_response(discovery.openapi_v2_doc())
            case ["openapi", "v3"]:
                return json_response(discovery.openapi_v3_root(self.registry))
            case ["openapi", "v3", "api", version]:
                return self._found(discovery.openapi_v3_doc(self.registry, "", version))
            case ["openapi", "v3", "apis", group, version]:
                return self._found(discovery.openapi_v3_doc(self.registry, group, version))
            case ["api", version]:
                return self._found(discovery.resource_list(self.registry, "", version))
            case ["apis", group]:
                return self._found(discovery.api_group(self.registry, group))
            case ["apis", group, version, *rest] if (backend := self.aggregator.backend(group, version)):
                return await self.aggregator.proxy(request, backend, request[USER])
            case ["apis", group, version]:
                return self._found(discovery.resource_list(self.registry, group, version))
            case ["api", "v1", "namespaces", namespace, "serviceaccounts", name, "token"]:
                return await self._token_request(request, namespace, name)
            case ["api", version, *rest]:
                return await self._handlers.handle(request, "", version, "/".join(rest))
            case ["apis", group, version, *rest]:
                extra = self._extra.get((group, version))
                if extra is not None:
                    return await extra(request)
                return await self._handlers.handle(request, group, version, "/".join(rest))
        raise errors.route_not_found()

    async def _token_request(self, request: web.Request, namespace: str, name: str) -> web.StreamResponse:
        """`POST .../serviceaccounts/<name>/token`: an authentication.k8s.io/v1 TokenRequest answered with a
        new token for the ServiceAccount (bearer auth and TokenReviews accept it; its expiry is reported,
        not enforced)."""
        if request.method != "POST":
            raise errors.method_not_allowed(request.method, "", "serviceaccounts")
        self.store.get_ref(SERVICE_ACCOUNTS, namespace, name)
        body = await read_body(request)
        spec = body.get("spec") if isinstance(body, dict) else None
        spec = spec if isinstance(spec, dict) else {}
        seconds = spec.get("expirationSeconds") or DEFAULT_TOKEN_SECONDS
        if not isinstance(seconds, int) or isinstance(seconds, bool):
            raise errors.bad_request("spec.expirationSeconds must be an integer")
        problem = ("less than 10 minutes" if seconds < MIN_TOKEN_SECONDS
                   else "larger than 2^32 seconds" if seconds > MAX_TOKEN_SECONDS else "")
        if problem:
            raise errors.invalid("TokenRequest", "authentication.k8s.io", name, "spec.expirationSeconds",
                                 f"Invalid value: {seconds}: may not specify a duration {problem}")
        answer = {
            "kind": "TokenRequest",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": name, "namespace": namespace, "creationTimestamp": None},
            "spec": {"audiences": spec.get("audiences") or [API_AUDIENCE], "expirationSeconds": seconds,
                     "boundObjectRef": spec.get("boundObjectRef")},
            "status": {"token": self.service_account_token(namespace, name),
                       "expirationTimestamp": now_rfc3339(seconds)},
        }
        return json_response(answer, 201)

    @staticmethod
    def _found(body: Obj | None) -> web.Response:
        if body is None:
            raise errors.route_not_found()
        return json_response(body)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()
