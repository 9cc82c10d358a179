"""Wiring of the whole adapter: Kubernetes discovery, registry, relist loop, Prometheus, HTTP(S) serving,
config reload.

The port opens before anything asks the API server: while it does not answer (shared/kube/wait.py) the
adapter waits with /livez answering and /readyz failing, serving no rules; the config's rules replace
them once discovery has resolved their resource overrides.

`AdapterDaemon` is what `python -m adapter` runs and what end-to-end tests start in-process.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import structlog
from aiohttp import web

from adapter.config import AdapterConfig, ConfigError, read_config_text
from adapter.delegate.middleware import make_delegate_middleware
from adapter.delegate.router import Router, SurgeRegistry, build_router
from adapter.discovery import Relister
from adapter.explain.paths import MetricRead
from adapter.flags import PROG, AdapterOptions
from adapter.objects import ObjectCaches
from adapter.prometheus import PrometheusClient, PrometheusSettings
from adapter.querycache import QueryCache
from adapter.resourcemapper import DISCOVERY_ERRORS, DiscoveryResourceMapper
from adapter.server.app import AppDependencies, Middleware, make_app
from adapter.server.documents import group_versions
from adapter.server.explain_routes import ExplainRoutes
from adapter.server.health import Check, HealthChecks
from adapter.server.reload import ConfigReloader, config_digest
from adapter.server.routes import MetricsProvider
from adapter.server.rules import RulesBuilder, RulesHolder, ServedRules
from adapter.server.selfmetrics import AdapterMetrics
from adapter.tenancy.controller import TenantRules
from adapter.tenancy.explain import TenantExplanation, explain_tenant
from adapter.tenancy.layered import ServedMetrics
from shared.kube import KubeClient, KubeConfigError, RestMapper, bearer_token, load_access, load_configuration
from shared.kube.permissions import Permission, PermissionCheck
from shared.kube.wait import unavailable, until_available, wait_for_api_server
from shared.serving.listener import ConnectionMetrics, Listener
from shared.serving.options import serving_tls
from shared.serving.tls import ServingTLS
from shared.supervisor import Loop, Supervisor

log = structlog.get_logger(__name__)

_IN_CLUSTER_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"
_IN_CLUSTER_CA = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
# What is served until discovery has resolved the config's resource overrides: no rules.
_NO_RULES = AdapterConfig(rules=(), external_rules=(), resource_rules=None)


class StartupError(Exception):
    """The adapter cannot start (bad Prometheus TLS files, unresolvable overrides, ...)."""


class _Undiscovered(Exception):
    """The config names a resource of a group whose discovery failed: start-up waits for that group."""

    def __init__(self, groups: frozenset[tuple[str, str]], err: ConfigError) -> None:
        names = ", ".join(sorted(f"{g}/{v}" if g else v for g, v in groups))
        super().__init__(f"{err} (discovery failed for {names})")


def _unavailable(err: Exception) -> str | None:
    """What `until_available` retries at start-up: the API server's unavailability, and groups undiscovered
    that the config may need."""
    return "groups undiscovered" if isinstance(err, _Undiscovered) else unavailable(err)


async def prometheus_settings(options: AdapterOptions) -> PrometheusSettings:
    """Prometheus connection settings from the flags, with prometheus-adapter's precedence: a CA file wins
    over --prometheus-auth-config / --prometheus-auth-incluster, and a token file applies on top of any."""
    credentials = options.prometheus_credentials
    settings = PrometheusSettings(
        url=options.prometheus_url,
        verb=options.prometheus_verb,
        timeout=options.prometheus_timeout,
        headers=options.prometheus_headers,
        token_file=credentials.token_file,
    )
    if credentials.ca_file:
        return replace(
            settings,
            ca_file=credentials.ca_file,
            client_cert=credentials.client_cert,
            client_key=credentials.client_key,
        )
    if options.prometheus_auth_incluster:
        return replace(settings, ca_file=_IN_CLUSTER_CA, token_file=settings.token_file or _IN_CLUSTER_TOKEN)
    if options.prometheus_auth_config:
        configuration = await load_configuration(options.prometheus_auth_config)
        return replace(
            settings,
            ca_file=configuration.ssl_ca_cert or "",
            client_cert=configuration.cert_file or "",
            client_key=configuration.key_file or "",
            insecure_skip_verify=not configuration.verify_ssl,
            token=bearer_token(configuration),
        )
    return settings


def _watch_permissions(objects: ObjectCaches) -> list[Permission]:
    """The list and watch of every resource the adapter's informers hold (its `resource-reader` grants)."""
    return [
        Permission(verb, info.resource, info.group, needed_for=f"reading {info.resource} (label selectors, "
                   "kubectl top)")
        for info in objects.watched()
        for verb in ("list", "watch")
    ]


@dataclass
class AdapterDaemon:
    options: AdapterOptions
    config: AdapterConfig
    # Extension points for authentication/authorization: middlewares run inside error rendering (so a
    # StatusError they raise is answered as a Status); tls_hooks configure the serving SSLContext (client
    # certificate verification) before the port opens.
    middlewares: Sequence[Middleware] = ()
    tls_hooks: Sequence[Callable[[ssl.SSLContext], None]] = ()
    # More background loops to run under the daemon's supervisor (e.g. the auth settings' refresh).
    loops: Mapping[str, Loop] = field(default_factory=dict)
    # What the middlewares ask of the API server (delegated auth's reviews), checked with what the
    # adapter's own reads need (PermissionCheck).
    needed_permissions: Callable[[], Sequence[Permission]] = tuple
    # Awaited once the API server has answered and the rules are built, before the background loops start
    # (delegated auth's start: its front-proxy ConfigMap); what they raise ends the start.
    start_hooks: Sequence[Callable[[], Awaitable[None]]] = ()
    cert_reload_interval: float = 10.0
    config_reload_interval: float = 10.0  # between two looks at the --config file
    # Set (by SIGHUP in `python -m adapter`) to reload the --config file now, changed or not.
    reload_requested: asyncio.Event = field(default_factory=asyncio.Event)
    # The SHA-256 of the text `config` was parsed from; None: the file is read (hashed) at start-up.
    config_digest: str | None = None
    metrics: AdapterMetrics = field(default_factory=AdapterMetrics)
    port: int = field(default=0, init=False)
    tls: ServingTLS | None = field(default=None, init=False)
    rules: RulesHolder = field(init=False)
    relister: Relister = field(init=False)
    reloader: ConfigReloader = field(init=False)
    supervisor: Supervisor = field(init=False)
    permission_check: PermissionCheck = field(init=False)
    tenants: TenantRules | None = field(default=None, init=False)  # with --tenant-rules
    _listener: Listener | None = field(default=None, init=False)
    _discovered: bool = field(default=False, init=False)  # the API server's resources are known
    _closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        self.supervisor = Supervisor(self.metrics.registry, "surge_adapter")

    async def start(self) -> None:
        """Connect, discover resources, start serving and the background loops. Ready comes later."""
        try:
            await self._start()
        except BaseException:
            await self.stop()
            raise

    async def _start(self) -> None:
        try:
            access = await load_access(self.options.lister_kubeconfig or None)
        except KubeConfigError as err:
            raise StartupError(f"invalid Kubernetes connection settings: {err}") from err
        kube = KubeClient(access, user_agent=PROG)
        self._closers.append(kube.close)
        mapper = DiscoveryResourceMapper(RestMapper(kube))
        try:
            settings = await prometheus_settings(self.options)
            prometheus = PrometheusClient(settings, observe=self.metrics.observe_prometheus)
        except (KubeConfigError, OSError, ssl.SSLError, ValueError) as err:
            raise StartupError(f"invalid Prometheus connection settings: {err}") from err
        self._closers.append(prometheus.close)
        objects = ObjectCaches(kube, self.supervisor)
        self.permission_check = permissions = PermissionCheck(
            kube,
            lambda: [
                *self.needed_permissions(),
                *_watch_permissions(objects),
                *(self.tenants.permissions() if self.tenants is not None else ()),
            ],
        )
        queries = QueryCache(
            prometheus.query,
            self.metrics,
            ttl=self.options.metrics_cache_ttl,
            max_entries=self.options.metrics_cache_max_entries,
        )
        builder = RulesBuilder(
            mapper,
            prometheus,
            queries,
            objects,
            self.metrics,
            self.options.regex_escape_values,
            self.options.batch_namespace_queries,
        )
        self.rules = RulesHolder(builder.build(_NO_RULES, "no rules before discovery"))
        if self.options.tenants.enabled:
            self.tenants = TenantRules(
                kube,
                self.options.tenants,
                prometheus=prometheus,
                queries=queries,
                base_settings=settings,
                platform=lambda: self.rules.current.provider,
                mapper=mapper,
                objects=objects,
                metrics=self.metrics,
                relist_interval=self.options.relist_interval,
                max_age=self.options.max_age,
                regex_escape_values=self.options.regex_escape_values,
                batch_namespace_queries=self.options.batch_namespace_queries,
            )
            self._closers.append(self.tenants.close)

        def once_discovered(check: Check, before: bool) -> Check:
            """`check` of what is built after discovery; `before` until then."""
            return lambda: check() if self._discovered else before

        health = HealthChecks(
            readiness={
                "api-server": lambda: self._discovered,
                "metrics-discovery": once_discovered(lambda: self.relister.ready, False),
                # Why discovery is not done yet, when that is the cause (adapter/discovery.py).
                "prometheus": once_discovered(
                    lambda: self.relister.ready or self.relister.unreachable is None, True
                ),
                "background-tasks": lambda: not self.supervisor.down(),
                "api-permissions": permissions.ready,
            }
        )
        # Delegates: forwarded reads pass the same authentication and authorization first.
        delegates = self._delegate_router()
        middlewares = list(self.middlewares)
        if delegates is not None:
            middlewares.append(make_delegate_middleware(delegates))
        explain = ExplainRoutes(
            lambda: self.rules.current,
            prometheus,
            self.options.max_age,
            permissions=permissions.notes,
            tenant=self._explain_tenant if self.tenants is not None else None,
        )
        dependencies = AppDependencies(self.rules, health, self.metrics, explain, self._metrics_provider)
        await self._serve(make_app(dependencies, middlewares))

        await wait_for_api_server(kube)
        config_file = self.options.config

        async def discovered_rules() -> ServedRules:
            await mapper.refresh()
            try:
                return builder.build(self.config, str(config_file))
            except ConfigError as err:
                if mapper.failing:
                    # A resource of a group whose discovery failed (a 503 while the API server restarts)
                    # is not the config's fault yet: retried as the API server's unavailability is.
                    raise _Undiscovered(mapper.failing, err) from err
                raise

        try:
            rules = await until_available(discovered_rules, "discovery", unavailable_kind=_unavailable)
        except ConfigError as err:  # (a ValueError, as some discovery errors are: caught first)
            raise StartupError(str(err)) from err
        except DISCOVERY_ERRORS as err:
            raise StartupError(f"unable to discover the Kubernetes API's resources: {err!r}") from err
        self.rules.swap(rules)
        self._discovered = True
        self.relister = Relister(
            prometheus, rules.registry, self.options.relist_interval, self.options.max_age, self.metrics
        )
        self.reloader = ConfigReloader(
            config_file,
            builder.build,
            self.rules,
            self.relister,
            self.metrics,
            self.config_reload_interval,
            self.reload_requested,
            loaded=self._served_digest(),
            max_bytes=self.options.config_max_bytes,
        )
        for hook in self.start_hooks:
            await hook()
        self.supervisor.start("relist", self.relister.run)
        self.supervisor.start("api permissions", permissions.run)
        self.supervisor.start("config reload", self.reloader.run)
        self.supervisor.start("resource mapper", lambda: mapper.run(self.options.mapper_refresh_interval))
        if delegates is not None:
            self.supervisor.start("delegate discovery", delegates.run)
        if self.tenants is not None:
            for name, loop in self.tenants.loops().items():
                self.supervisor.start(name, loop)
        for name, loop in self.loops.items():
            self.supervisor.start(name, loop)
        log.info(
            "serving",
            address=self.options.serving.bind_address,
            port=self.port,
            scheme="http" if self.tls is None else "https",
            apis=group_versions(rules.groups),
        )

    async def _serve(self, app: web.Application) -> None:
        """Open the port (TLS configured by the hooks first) and keep its certificate fresh."""
        serving = self.options.serving
        try:
            self.tls = serving_tls(serving)
        except (OSError, ssl.SSLError, ValueError) as err:
            raise StartupError(f"invalid serving certificate or TLS settings: {err}") from err
        if self.tls is not None:
            for configure in self.tls_hooks:
                configure(self.tls.context)
        try:
            self._listener = await Listener.start(
                app,
                serving.bind_address,
                serving.secure_port,
                self.tls.context if self.tls is not None else None,
                serving.limits,
                ConnectionMetrics(self.metrics.registry, "surge_adapter"),
            )
        except OSError as err:
            raise StartupError(
                f"cannot listen on {serving.bind_address}:{serving.secure_port}: {err}"
            ) from err
        self.port = self._listener.port
        if self.tls is not None:
            tls = self.tls
            self.supervisor.start("cert reload", lambda: tls.watch(self.cert_reload_interval))

    def _metrics_provider(self) -> MetricsProvider:
        """What custom.metrics.k8s.io and external.metrics.k8s.io read now: the config's rules, and the
        tenant rules after them."""
        base = self.rules.current.provider
        return base if self.tenants is None else self.tenants.provider(base)

    def _explain_tenant(self, path: str, read: MetricRead) -> TenantExplanation | None:
        return None if self.tenants is None else explain_tenant(self.tenants, path, read)

    def _delegate_router(self) -> Router | None:
        """The --delegate-url servers' router (closed on stop); None without delegates."""
        if not self.options.delegates.delegates:
            return None
        try:
            served: Callable[[], SurgeRegistry] = lambda: self.rules.current.registry  # noqa: E731
            if self.tenants is not None:
                tenants = self.tenants
                metrics = ServedMetrics(lambda: self.rules.current.registry, lambda: tenants.scopes)
                served = lambda: metrics  # noqa: E731
            router = build_router(self.options.delegates, served, self.metrics.registry, PROG)
        except (OSError, ssl.SSLError, ValueError) as err:
            raise StartupError(f"invalid delegate connection settings: {err}") from err
        self._closers.append(router.close)
        return router

    def _served_digest(self) -> str | None:
        """The digest of the config served; None when the file cannot be read (the first look at it
        reports that)."""
        digest = self.config_digest
        if digest is None:
            try:
                digest = config_digest(read_config_text(self.options.config, self.options.config_max_bytes))
            except ConfigError as err:
                log.warning("cannot read the config file to watch it", error=str(err))
                return None
        self.metrics.config_served(digest, time.time())
        return digest

    async def stop(self) -> None:
        await self.supervisor.stop()
        if self._listener is not None:
            await self._listener.close()
        for close in reversed(self._closers):
            await close()
        self._closers = []
