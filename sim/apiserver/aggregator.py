"""The aggregation layer: APIService objects whose group-version is proxied to a backend server.

An APIService's backend is found as kube-aggregator finds it (pkg/controllers/status/remote
remote_available_controller.go, with kube-apiserver's endpoint routing): its Service must exist and
have the port `spec.service.port` (default 443), the Service's EndpointSlices must list a ready
endpoint with that port's name, and the backend is `https://<endpoint address>:<endpoint port>`.
Pods have no network here, so `Aggregator.pod_address` turns (pod IP, port) into a reachable
(host, port), e.g. a real container's published port; the default reaches nothing. The annotation
`sim.surge.dev/url` bypasses all of that: a backend at a URL on this machine, with no Service at all.

Availability (`Available` condition, kube-aggregator's reasons and messages) is probed periodically and
again soon after the APIService, its Service or its EndpointSlices change. TLS is verified against
`caBundle` for the name `<service>.<namespace>.svc`, or not at all with `insecureSkipTLSVerify`.
Requests carry the front-proxy client certificate (CN `front-proxy-client`, CA published in
`kube-system/extension-apiserver-authentication`) and the caller's identity in X-Remote-User /
X-Remote-Group / X-Remote-Extra-*, as kube-aggregator sends them.
"""

from __future__ import annotations

import asyncio
import base64
import json
import random
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict
from urllib.parse import quote

import aiohttp
import structlog
from aiohttp import web
from multidict import CIMultiDict

from sim.apiserver import errors
from sim.apiserver.builtins import initial_status
from sim.apiserver.certs import CertificateAuthority
from sim.apiserver.crds import version_priority
from sim.apiserver.resources import GroupResource, Obj, Registry, ResourceType
from sim.apiserver.reviews import UserInfo
from sim.apiserver.selection import Selection
from sim.apiserver.store import Store, now_rfc3339

log = structlog.get_logger(__name__)

APISERVICES: GroupResource = ("apiregistration.k8s.io", "apiservices")
SERVICES: GroupResource = ("", "services")
ENDPOINTSLICES: GroupResource = ("discovery.k8s.io", "endpointslices")
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
URL_ANNOTATION = "sim.surge.dev/url"
FRONT_PROXY_USER = "front-proxy-client"
AUTH_CONFIGMAP = ("kube-system", "extension-apiserver-authentication")
PROBE_TIMEOUT = 5.0
PROBE_ATTEMPTS = 5  # kube-aggregator's concurrent discovery GETs; one 2xx is enough
DEFAULT_SERVICE_PORT = 443
_HOP_HEADERS = frozenset(
    {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
     "transfer-encoding", "upgrade", "host", "authorization", "content-length"}
)

PodAddress = Callable[[str, int], tuple[str, int] | None]
"""(pod IP, port) → the (host, port) that reaches it from this process, or None: unreachable."""


def unreachable(_ip: str, _port: int) -> None:
    """The default `Aggregator.pod_address`: no pod is reachable (nothing runs the pods)."""
    return None


class _TlsKwargs(TypedDict, total=False):
    """The TLS arguments of an aiohttp request to an APIService backend (none for plain http)."""

    ssl: ssl.SSLContext
    server_hostname: str


def _validate_apiservice(obj: Obj, _old: Obj | None) -> None:
    spec = obj.get("spec", {})
    name = obj["metadata"]["name"]
    expected = f"{spec.get('version', '')}.{spec.get('group', '')}"
    if name != expected:
        raise errors.invalid("APIService", "apiregistration.k8s.io", name, "metadata.name",
                             f'Invalid value: "{name}": must be {expected}')
    if spec.get("insecureSkipTLSVerify") and spec.get("caBundle"):
        raise errors.invalid("APIService", "apiregistration.k8s.io", name, "spec.insecureSkipTLSVerify",
                             "Invalid value: true: may not be true if caBundle is present")


def apiservice_type() -> ResourceType:
    return ResourceType("apiregistration.k8s.io", "v1", "apiservices", "APIService", False,
                        status=True, validator=_validate_apiservice, on_create=initial_status({}))


class Unavailable(Exception):
    """The APIService's backend cannot be used: the Available=False reason and message say why."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


@dataclass(frozen=True)
class Backend:
    """Where one probe or proxied request goes."""

    url: str  # the base URL as kube-aggregator names it in messages: https://<pod IP>:<port>
    dialed: str | None  # the base URL actually requested; None when nothing reaches the pod
    tls_name: str  # the name the backend's certificate must carry: <service>.<namespace>.svc
    host_header: str | None  # Host as kube-aggregator sends it (the pod's ip:port); None: dialed's


def _host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _available_endpoint(port_name: str, slices: list[Obj]) -> bool:
    """kube-aggregator's hasAvailableEndpoint: a slice with a ready (or unknown) endpoint and the port."""
    return any(
        any((e.get("conditions") or {}).get("ready") is not False for e in s.get("endpoints") or [])
        and any(p.get("name") == port_name and p.get("port") is not None for p in s.get("ports") or [])
        for s in slices
    )


def _ready_addresses(port_name: str, slices: list[Obj]) -> list[tuple[str, int]]:
    """Each ready endpoint's (address, port) for the service port named `port_name`, in a stable order."""
    found: set[tuple[str, int]] = set()
    for endpoint_slice in slices:
        ports = [p["port"] for p in endpoint_slice.get("ports") or []
                 if p.get("name") == port_name and p.get("port") is not None]
        for endpoint in endpoint_slice.get("endpoints") or []:
            if (endpoint.get("conditions") or {}).get("ready") is False or not endpoint.get("addresses"):
                continue
            found.update((endpoint["addresses"][0], int(port)) for port in ports)
    return sorted(found)


def _condition(obj: Obj) -> Obj:
    for condition in obj.get("status", {}).get("conditions") or []:
        if condition.get("type") == "Available":
            return condition
    return {}


class Aggregator:
    """Registers APIServices into discovery, probes their availability and proxies their requests."""

    def __init__(
        self, registry: Registry, store: Store, client_ca: CertificateAuthority | None,
        probe_interval: float,
    ) -> None:
        self.registry = registry
        self.store = store
        self.front_proxy_ca = CertificateAuthority("front-proxy-ca")
        self.probe_interval = probe_interval
        self.pod_address: PodAddress = unreachable
        self._client_cert = self.front_proxy_ca.issue_client(FRONT_PROXY_USER)
        self._cert_files: tuple[Path, Path] | None = None
        self._session: aiohttp.ClientSession | None = None
        self._prober: asyncio.Task[None] | None = None
        # One probe at a time per APIService, so an older result never overwrites a newer one; a change
        # arriving meanwhile marks it to be probed once more when the running probe ends.
        self._probing: dict[str, asyncio.Task[None]] = {}
        self._probe_again: set[str] = set()
        # Each APIService's (generation, URL annotation) when last scheduled: its own status writes change
        # neither, and must not schedule another probe.
        self._scheduled_as: dict[str, tuple[int, str | None]] = {}
        # (group, version) -> the APIResource list its backend served at the last good probe
        self.discovery: dict[tuple[str, str], list[Obj]] = {}
        self._contexts: dict[str, ssl.SSLContext] = {}
        registry.add(apiservice_type())
        store.add_listener(self._on_change)
        data = {
            "requestheader-client-ca-file": self.front_proxy_ca.cert_pem.decode(),
            "requestheader-allowed-names": json.dumps([FRONT_PROXY_USER]),
            "requestheader-username-headers": json.dumps(["X-Remote-User"]),
            "requestheader-group-headers": json.dumps(["X-Remote-Group"]),
            "requestheader-extra-headers-prefix": json.dumps(["X-Remote-Extra-"]),
        }
        if client_ca is not None:
            data["client-ca-file"] = client_ca.cert_pem.decode()
        store.create(("", "configmaps"), {
            "metadata": {"name": AUTH_CONFIGMAP[1], "namespace": AUTH_CONFIGMAP[0]}, "data": data,
        })

    # ---- lifecycle -------------------------------------------------------------------------------

    async def start(self, workdir: Path) -> None:
        cert, key = workdir / "front-proxy-client.crt", workdir / "front-proxy-client.key"
        cert.write_bytes(self._client_cert.cert_pem)
        key.write_bytes(self._client_cert.key_pem)
        self._cert_files = (cert, key)
        self._session = aiohttp.ClientSession(auto_decompress=False)
        self._prober = asyncio.create_task(self._probe_forever())

    async def stop(self) -> None:
        tasks = [t for t in (self._prober, *self._probing.values()) if t is not None]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)
        if self._session is not None:
            await self._session.close()
            self._session = None

    # ---- registration ----------------------------------------------------------------------------

    def _on_change(self, event_type: str, gr: GroupResource, obj: Obj) -> None:
        meta = obj.get("metadata", {})
        if gr == APISERVICES:
            self._sync_group(obj.get("spec", {}).get("group", ""))
            if event_type == "DELETED":
                self._scheduled_as.pop(meta["name"], None)
                return
            version = (meta.get("generation", 0), (meta.get("annotations") or {}).get(URL_ANNOTATION))
            if self._scheduled_as.get(meta["name"]) != version:
                self._scheduled_as[meta["name"]] = version
                self._schedule_probe(meta["name"])
        elif gr == SERVICES:
            self._schedule_probes_of(meta.get("namespace", ""), meta["name"])
        elif gr == ENDPOINTSLICES and (service_name := (meta.get("labels") or {}).get(SERVICE_NAME_LABEL)):
            self._schedule_probes_of(meta.get("namespace", ""), service_name)

    def _schedule_probes_of(self, namespace: str, service_name: str) -> None:
        """Re-probe the APIServices backed by this Service (kube-aggregator's Service and slice handlers)."""
        for apiservice in self.store.select(APISERVICES, Selection()):
            ref = apiservice.get("spec", {}).get("service") or {}
            if (ref.get("namespace"), ref.get("name")) == (namespace, service_name):
                self._schedule_probe(apiservice["metadata"]["name"])

    def _sync_group(self, group: str) -> None:
        services = [
            s for s in self.store.select(APISERVICES, Selection())
            if s.get("spec", {}).get("group") == group and s["spec"].get("service")
        ]
        services.sort(key=lambda s: (-int(s["spec"].get("versionPriority", 0)),
                                     version_priority(s["spec"].get("version", ""))))
        self.registry.set_proxied(group, [s["spec"]["version"] for s in services])

    def backend(self, group: str, version: str) -> Obj | None:
        """The APIService proxying group/version, if there is one."""
        if version not in self.registry.proxied.get(group, []):
            return None
        try:
            return self.store.get_ref(APISERVICES, None, f"{version}.{group}")
        except errors.ApiError:
            return None

    # ---- resolution ------------------------------------------------------------------------------

    def resolve(self, apiservice: Obj) -> list[Backend]:
        """Where the APIService's requests can go (raises Unavailable with kube-aggregator's reason)."""
        ref = apiservice["spec"]["service"]
        namespace, name = ref.get("namespace", ""), ref.get("name", "")
        tls_name = f"{name}.{namespace}.svc"
        url = (apiservice["metadata"].get("annotations") or {}).get(URL_ANNOTATION)
        if url:
            return [Backend(url.rstrip("/"), url.rstrip("/"), tls_name, None)]
        backends = []
        for ip, port in self._endpoint_addresses(namespace, name, ref.get("port") or DEFAULT_SERVICE_PORT):
            pod = _host_port(ip, port)
            published = self.pod_address(ip, port)
            dialed = None if published is None else f"https://{_host_port(*published)}"
            backends.append(Backend(f"https://{pod}", dialed, tls_name, pod))
        return backends

    def _endpoint_addresses(self, namespace: str, name: str, port: int) -> list[tuple[str, int]]:
        """The availability controller's Service checks, then kube-apiserver's endpoint resolution."""
        service_ref = f'service/{name} in "{namespace}"'
        try:
            service = self.store.get_ref(SERVICES, namespace, name)
        except errors.ApiError:
            raise Unavailable("ServiceNotFound", f"{service_ref} is not present") from None
        spec = service.get("spec", {})
        service_port = next((p for p in spec.get("ports") or [] if p.get("port") == port), None)
        port_name = str((service_port or {}).get("name", ""))
        slices = self.store.select(ENDPOINTSLICES, Selection(namespace, f"{SERVICE_NAME_LABEL}={name}"))
        service_type = spec.get("type", "ClusterIP")
        if service_type == "ClusterIP":
            if service_port is None:
                raise Unavailable("ServicePortError", f"{service_ref} is not listening on port {port}")
            if not slices:
                raise Unavailable("EndpointsNotFound", f"cannot find endpointslices for {service_ref}")
            if not _available_endpoint(port_name, slices):
                raise Unavailable("MissingEndpoints", f"endpointslices for {service_ref} have no addresses "
                                                      f'with port name "{port_name}"')
        elif service_type not in ("NodePort", "LoadBalancer"):
            raise Unavailable("FailedDiscoveryCheck", f'unsupported service type "{service_type}"')
        if service_port is None:
            raise Unavailable("FailedDiscoveryCheck", f'no service port {port} found for service "{name}"')
        addresses = _ready_addresses(port_name, slices)
        if not addresses:
            raise Unavailable("FailedDiscoveryCheck", f'no endpoints available for service "{name}"')
        return addresses

    # ---- TLS -------------------------------------------------------------------------------------

    def _ssl(self, spec: Obj) -> ssl.SSLContext:
        ca_bundle = spec.get("caBundle") or ""
        key = "insecure" if spec.get("insecureSkipTLSVerify") else ca_bundle
        context = self._contexts.get(key)
        if context is None:
            context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
            if spec.get("insecureSkipTLSVerify"):
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            elif ca_bundle:
                context.load_verify_locations(cadata=base64.b64decode(ca_bundle).decode())
            assert self._cert_files is not None
            context.load_cert_chain(*self._cert_files)
            self._contexts[key] = context
        return context

    def _request_kwargs(self, apiservice: Obj, backend: Backend) -> _TlsKwargs:
        if not (backend.dialed or "").startswith("https://"):
            return {}
        return {"ssl": self._ssl(apiservice["spec"]), "server_hostname": backend.tls_name}

    # ---- availability ----------------------------------------------------------------------------

    async def _probe_forever(self) -> None:
        while True:
            await self.probe_all()
            await asyncio.sleep(self.probe_interval)

    async def probe_all(self) -> None:
        """Probe every APIService (and wait for it); a probe already running is followed by a new one."""
        names = [s["metadata"]["name"] for s in self.store.select(APISERVICES, Selection())]
        tasks = [task for name in names if (task := self._schedule_probe(name)) is not None]
        if tasks:
            await asyncio.gather(*tasks)

    def _schedule_probe(self, name: str) -> asyncio.Task[None] | None:
        """The task that will have probed `name` after now (None before start)."""
        if self._session is None:
            return None
        task = self._probing.get(name)
        if task is not None:
            self._probe_again.add(name)
            return task
        task = asyncio.get_running_loop().create_task(self._probe_until_settled(name))
        self._probing[name] = task
        return task

    async def _probe_until_settled(self, name: str) -> None:
        try:
            while True:
                self._probe_again.discard(name)
                try:
                    await self.probe(name)
                except Exception:  # one APIService's broken probe must not stop the periodic ones
                    log.exception("apiservice probe failed", apiservice=name)
                if name not in self._probe_again:
                    return
        finally:
            self._probing.pop(name, None)
            self._probe_again.discard(name)

    async def probe(self, name: str) -> None:
        """GET /apis/<group>/<version> as system:kube-aggregator; any 2xx makes it Available."""
        try:
            apiservice = self.store.get_ref(APISERVICES, None, name)
        except errors.ApiError:
            return
        spec = apiservice.get("spec", {})
        if not spec.get("service"):
            self._set_available(name, "True", "Local", "Local APIServices are always available")
            return
        try:
            backends = self.resolve(apiservice)
        except Unavailable as unavailable:
            self._set_available(name, "False", unavailable.reason, unavailable.message)
            return
        path = f"/apis/{spec.get('group')}/{spec.get('version')}"
        # kube-aggregator sends its attempts to randomly resolved endpoints; distinct endpoints in a fixed
        # order probe as much and keep the failure message (the last attempt's) stable between probes.
        attempts = backends[:PROBE_ATTEMPTS]
        results = await asyncio.gather(*(self._discover(apiservice, b, path) for b in attempts))
        body = next((body for body, _ in results if body is not None), None)
        if body is not None:
            self._remember_discovery(spec, body)
            self._set_available(name, "True", "Passed", "all checks passed")
            return
        self._set_available(name, "False", "FailedDiscoveryCheck", results[-1][1])

    async def _discover(self, apiservice: Obj, backend: Backend, path: str) -> tuple[bytes | None, str]:
        """One discovery GET: (the 2xx body, "") or (None, kube-aggregator's failure message)."""
        url = backend.url + path
        if backend.dialed is None:
            problem = f'Get "{url}": dial tcp {backend.host_header}: connect: no route to host'
            return None, f"failing or missing response from {url}: {problem}"
        headers = {"X-Remote-User": "system:kube-aggregator", "X-Remote-Group": "system:masters"}
        if backend.host_header is not None:
            headers["Host"] = backend.host_header
        assert self._session is not None
        try:
            async with self._session.get(
                backend.dialed + path, headers=headers, allow_redirects=False,
                timeout=aiohttp.ClientTimeout(total=PROBE_TIMEOUT),
                **self._request_kwargs(apiservice, backend),
            ) as response:
                body = await response.read()
                if 200 <= response.status < 300:
                    return body, ""
                problem = f"bad status from {url}: {response.status}"
        except (aiohttp.ClientError, TimeoutError, ssl.SSLError, OSError) as err:
            problem = f'Get "{url}": {err}'
        return None, f"failing or missing response from {url}: {problem}"

    def _remember_discovery(self, spec: Obj, body: bytes) -> None:
        try:
            resources = json.loads(body).get("resources") or []
        except (ValueError, AttributeError):
            resources = []
        self.discovery[(spec.get("group", ""), spec.get("version", ""))] = resources

    def _set_available(self, name: str, status: str, reason: str, message: str) -> None:
        try:
            obj = self.store.get_ref(APISERVICES, None, name)
        except errors.ApiError:
            return
        current = _condition(obj)
        if [current.get(k) for k in ("status", "reason", "message")] == [status, reason, message]:
            return
        since = current.get("lastTransitionTime") if current.get("status") == status else now_rfc3339()
        condition = {"type": "Available", "status": status, "lastTransitionTime": since or now_rfc3339(),
                     "reason": reason, "message": message}
        self.store.update(APISERVICES, {**obj, "status": {"conditions": [condition]}}, subresource="status")
        log.info("apiservice availability", apiservice=name, available=status, reason=reason)

    # ---- proxying --------------------------------------------------------------------------------

    async def proxy(self, request: web.Request, apiservice: Obj, user: UserInfo) -> web.StreamResponse:
        if _condition(apiservice).get("status") != "True":
            return _unavailable("service unavailable")
        try:
            # kube-apiserver's endpoint routing picks one ready endpoint at random for each request.
            backend = random.choice(self.resolve(apiservice))
        except Unavailable:
            return _unavailable("service unavailable")
        if backend.dialed is None:
            return _unavailable(f"error trying to reach service: dial tcp {backend.host_header}: "
                                "connect: no route to host")
        headers: CIMultiDict[str] = CIMultiDict()
        for key, value in request.headers.items():
            if key.lower() not in _HOP_HEADERS and not key.lower().startswith("x-remote-"):
                headers.add(key, value)
        if backend.host_header is not None:
            headers.add("Host", backend.host_header)
        headers.add("X-Remote-User", user.name)
        for group in user.groups:
            headers.add("X-Remote-Group", group)
        for extra_key, values in user.extra.items():
            for value in values:
                headers.add(f"X-Remote-Extra-{quote(extra_key, safe='')}", value)
        headers.add("X-Forwarded-For", request.remote or "")
        assert self._session is not None
        try:
            upstream = await self._session.request(
                request.method, backend.dialed + request.raw_path, headers=headers, data=await request.read(),
                allow_redirects=False, **self._request_kwargs(apiservice, backend),
            )
        except (aiohttp.ClientError, ssl.SSLError, OSError) as err:
            return _unavailable(f"error trying to reach service: {err}")
        async with upstream:
            response = web.StreamResponse(status=upstream.status)
            for key, value in upstream.headers.items():
                if key.lower() not in _HOP_HEADERS:
                    response.headers.add(key, value)
            await response.prepare(request)
            async for chunk in upstream.content.iter_any():
                await response.write(chunk)
            await response.write_eof()
            return response


def _unavailable(text: str) -> web.Response:
    return web.Response(status=503, text=text, content_type="text/plain")
