"""The aggregation layer: APIService objects whose group-version is proxied to a backend server.

The backend's address comes from the annotation `sim.surge.dev/url` (there are no Service IPs in
the simulation); TLS is verified against `caBundle` for the name `<service>.<namespace>.svc`, or not at
all with `insecureSkipTLSVerify`. Requests carry the front-proxy client certificate (CN
`front-proxy-client`, CA published in `kube-system/extension-apiserver-authentication`) and the
caller's identity in X-Remote-User / X-Remote-Group / X-Remote-Extra-*, as kube-aggregator sends them.
"""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
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
URL_ANNOTATION = "sim.surge.dev/url"
FRONT_PROXY_USER = "front-proxy-client"
AUTH_CONFIGMAP = ("kube-system", "extension-apiserver-authentication")
PROBE_TIMEOUT = 5.0
_HOP_HEADERS = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "authorization",
        "content-length",
    }
)


class _TlsKwargs(TypedDict, total=False):
    """The TLS arguments of an aiohttp request to an APIService backend (none for plain http)."""

    ssl: ssl.SSLContext
    server_hostname: str


def _validate_apiservice(obj: Obj, _old: Obj | None) -> None:
    spec = obj.get("spec", {})
    name = obj["metadata"]["name"]
    expected = f"{spec.get('version', '')}.{spec.get('group', '')}"
    if name != expected:
        raise errors.invalid(
            "APIService",
            "apiregistration.k8s.io",
            name,
            "metadata.name",
            f'Invalid value: "{name}": must be {expected}',
        )
    if spec.get("insecureSkipTLSVerify") and spec.get("caBundle"):
        raise errors.invalid(
            "APIService",
            "apiregistration.k8s.io",
            name,
            "spec.insecureSkipTLSVerify",
            "Invalid value: true: may not be true if caBundle is present",
        )


def apiservice_type() -> ResourceType:
    return ResourceType(
        "apiregistration.k8s.io",
        "v1",
        "apiservices",
        "APIService",
        False,
        status=True,
        validator=_validate_apiservice,
        on_create=initial_status({}),
    )


def _condition(obj: Obj) -> Obj:
    for condition in obj.get("status", {}).get("conditions") or []:
        if condition.get("type") == "Available":
            return condition
    return {}


class Aggregator:
    """Registers APIServices into discovery, probes their availability and proxies their requests."""

    def __init__(
        self,
        registry: Registry,
        store: Store,
        client_ca: CertificateAuthority | None,
        probe_interval: float,
    ) -> None:
        self.registry = registry
        self.store = store
        self.front_proxy_ca = CertificateAuthority("front-proxy-ca")
        self.probe_interval = probe_interval
        self._client_cert = self.front_proxy_ca.issue_client(FRONT_PROXY_USER)
        self._cert_files: tuple[Path, Path] | None = None
        self._session: aiohttp.ClientSession | None = None
        self._prober: asyncio.Task[None] | None = None
        self._probes: set[asyncio.Task[None]] = set()
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
        store.create(
            ("", "configmaps"),
            {
                "metadata": {"name": AUTH_CONFIGMAP[1], "namespace": AUTH_CONFIGMAP[0]},
                "data": data,
            },
        )

    # ---- lifecycle -------------------------------------------------------------------------------

    async def start(self, workdir: Path) -> None:
        cert, key = workdir / "front-proxy-client.crt", workdir / "front-proxy-client.key"
        cert.write_bytes(self._client_cert.cert_pem)
        key.write_bytes(self._client_cert.key_pem)
        self._cert_files = (cert, key)
        self._session = aiohttp.ClientSession(auto_decompress=False)
        self._prober = asyncio.create_task(self._probe_forever())

    async def stop(self) -> None:
        tasks = [t for t in (self._prober, *self._probes) if t is not None]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)
        if self._session is not None:
            await self._session.close()
            self._session = None

    # ---- registration ----------------------------------------------------------------------------

    def _on_change(self, event_type: str, gr: GroupResource, obj: Obj) -> None:
        if gr != APISERVICES:
            return
        self._sync_group(obj.get("spec", {}).get("group", ""))
        if event_type != "DELETED" and self._session is not None:
            task = asyncio.get_running_loop().create_task(self.probe(obj["metadata"]["name"]))
            self._probes.add(task)
            task.add_done_callback(self._probes.discard)

    def _sync_group(self, group: str) -> None:
        services = [
            s
            for s in self.store.select(APISERVICES, Selection())
            if s.get("spec", {}).get("group") == group and s["spec"].get("service")
        ]
        services.sort(
            key=lambda s: (
                -int(s["spec"].get("versionPriority", 0)),
                version_priority(s["spec"].get("version", "")),
            )
        )
        self.registry.set_proxied(group, [s["spec"]["version"] for s in services])

    def backend(self, group: str, version: str) -> Obj | None:
        """The APIService proxying group/version, if there is one."""
        if version not in self.registry.proxied.get(group, []):
            return None
        try:
            return self.store.get_ref(APISERVICES, None, f"{version}.{group}")
        except errors.ApiError:
            return None

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

    def _request_kwargs(self, apiservice: Obj) -> _TlsKwargs:
        spec = apiservice["spec"]
        url = apiservice["metadata"].get("annotations", {}).get(URL_ANNOTATION, "")
        if not url.startswith("https://"):
            return {}
        service = spec["service"]
        return {
            "ssl": self._ssl(spec),
            "server_hostname": f"{service['name']}.{service.get('namespace', 'default')}.svc",
        }

    # ---- availability ----------------------------------------------------------------------------

    async def _probe_forever(self) -> None:
        while True:
            await self.probe_all()
            await asyncio.sleep(self.probe_interval)

    async def probe_all(self) -> None:
        names = [s["metadata"]["name"] for s in self.store.select(APISERVICES, Selection())]
        await asyncio.gather(*(self.probe(name) for name in names))

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
        base = apiservice["metadata"].get("annotations", {}).get(URL_ANNOTATION)
        if not base:
            service = spec["service"]
            self._set_available(
                name,
                "False",
                "ServiceNotFound",
                f'service/{service.get("name")} in "{service.get("namespace")}" is not present '
                f"(no {URL_ANNOTATION} annotation)",
            )
            return
        url = f"{base.rstrip('/')}/apis/{spec.get('group')}/{spec.get('version')}"
        headers = {"X-Remote-User": "system:kube-aggregator", "X-Remote-Group": "system:masters"}
        assert self._session is not None
        try:
            async with self._session.get(
                url,
                headers=headers,
                allow_redirects=False,
                timeout=aiohttp.ClientTimeout(total=PROBE_TIMEOUT),
                **self._request_kwargs(apiservice),
            ) as response:
                body = await response.read()
                if 200 <= response.status < 300:
                    self._remember_discovery(spec, body)
                    self._set_available(name, "True", "Passed", "all checks passed")
                    return
                problem = f"bad status from {url}: {response.status}"
        except (aiohttp.ClientError, TimeoutError, ssl.SSLError, OSError) as err:
            problem = f'Get "{url}": {err}'
        self._set_available(
            name, "False", "FailedDiscoveryCheck", f"failing or missing response from {url}: {problem}"
        )

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
        condition = {
            "type": "Available",
            "status": status,
            "lastTransitionTime": since or now_rfc3339(),
            "reason": reason,
            "message": message,
        }
        self.store.update(APISERVICES, {**obj, "status": {"conditions": [condition]}}, subresource="status")
        log.info("apiservice availability", apiservice=name, available=status, reason=reason)

    # ---- proxying --------------------------------------------------------------------------------

    async def proxy(self, request: web.Request, apiservice: Obj, user: UserInfo) -> web.StreamResponse:
        if _condition(apiservice).get("status") != "True":
            return web.Response(status=503, text="service unavailable", content_type="text/plain")
        base = apiservice["metadata"].get("annotations", {}).get(URL_ANNOTATION, "").rstrip("/")
        headers: CIMultiDict[str] = CIMultiDict()
        for key, value in request.headers.items():
            if key.lower() not in _HOP_HEADERS and not key.lower().startswith("x-remote-"):
                headers.add(key, value)
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
                request.method,
                base + request.raw_path,
                headers=headers,
                data=await request.read(),
                allow_redirects=False,
                **self._request_kwargs(apiservice),
            )
        except (aiohttp.ClientError, ssl.SSLError, OSError) as err:
            return web.Response(
                status=503, text=f"error trying to reach service: {err}", content_type="text/plain"
            )
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
