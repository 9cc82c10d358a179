"""Command-line flags: prometheus-adapter's flags (and the Helm chart's argv) plus Surge's own.

Go's `flag`/pflag syntax differs from argparse in a few ways that real deployments rely on:
single-dash long flags (`-v=4`), `--bool=false`, and a leading program-path positional (`/adapter`).
`normalize_argv` rewrites argv into argparse form and drops flags we accept only for
compatibility, returning a warning for each so the caller can log it once logging is set up.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from adapter.config import CONFIG_MAX_BYTES
from adapter.delegate.options import DelegateOptions, add_delegate_flags, delegate_options_from_namespace
from adapter.querycache import DEFAULT_MAX_ENTRIES, DEFAULT_TTL
from adapter.tenancy.options import TenantOptions, add_tenant_flags, tenant_options_from_namespace
from shared.cli import (
    OneLineErrorParser,
    add_bool_flag,
    add_version_flag,
    go_bool,
    go_duration,
    http_url,
    integer,
)
from shared.logging import add_logging_flags
from shared.prometheus import check_header
from shared.prometheus_flags import (
    PrometheusCredentials,
    add_prometheus_credential_flags,
    prometheus_credentials,
)
from shared.serving.options import ServingOptions, add_serving_flags, serving_options_from_namespace

# argparse type of the adapter's Go duration flags: seconds, never negative.
duration_arg = go_duration()

FlagGroup = Callable[[argparse.ArgumentParser], None]

PROG = "surge-adapter"

# klog verbosity flags: still valid upstream, meaningless here (we log via --log-level).
_KLOG_FLAGS = frozenset({"v", "vmodule", "log-flush-frequency"})
# klog flags removed in prometheus-adapter v0.11.0; old charts still pass them and upstream crashes.
_REMOVED_KLOG_FLAGS = frozenset(
    {
        "logtostderr",
        "alsologtostderr",
        "log-dir",
        "log-file",
        "log-file-max-size",
        "one-output",
        "stderrthreshold",
        "skip-log-headers",
        "add-dir-header",
        "skip-headers",
        "log-backtrace-at",
    }
)
# Upstream flags with no effect in Surge (HTTP/2 is never served; no client-side rate limiter;
# no profiling endpoints, on the port or a debug socket; no API priority and fairness, each listener has
# its own connection cap). Accepted so a swapped image keeps starting.
_NO_EFFECT_FLAGS = frozenset(
    {
        "disable-http2",
        "client-qps",
        "client-burst",
        "profiling",
        "contention-profiling",
        "debug-socket-path",
        "enable-priority-and-fairness",
        "http2-max-streams-per-connection",
        "permit-port-sharing",
        "permit-address-sharing",
    }
)
_BOOL_COMPAT_FLAGS = frozenset(
    {"logtostderr", "alsologtostderr", "one-output", "skip-log-headers", "add-dir-header", "skip-headers"}
    | {"disable-http2", "profiling", "contention-profiling", "permit-port-sharing", "permit-address-sharing"}
    | {"enable-priority-and-fairness"}
)


def explicit_bools(parser: argparse.ArgumentParser, argv: Sequence[str]) -> list[str]:
    """`argv` with each bare boolean of `parser` (add_bool_flag) written `--flag=true`: as in Go's flag
    package, a boolean then never takes the argument after it (a command's positional) as its value."""
    bools = {
        option for action in parser._actions if action.type is go_bool for option in action.option_strings
    }
    return [f"{arg}=true" if arg in bools else arg for arg in argv]


def add_regex_escape_flag(group: argparse._ActionsContainer) -> None:
    """`--regex-escape-values`, which changes the PromQL rendered: the daemon's and `explain`'s flag."""
    add_bool_flag(
        group,
        "--regex-escape-values",
        "regex-escape object names and selector values joined into =~/!~ matchers and "
        ".LabelValuesByName so each matches only itself (Surge extension; by default they pass "
        "through as regexes, as in prometheus-adapter)",
    )


def canonical_header_key(key: str) -> str:
    """Go's textproto.CanonicalMIMEHeaderKey for the ASCII token case."""
    if not key or any(not (c.isalnum() or c == "-") for c in key):
        return key
    return "-".join(part[:1].upper() + part[1:].lower() for part in key.split("-"))


def parse_header_args(values: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """`key=value` pairs split on the first `=`; a bare key gets an empty value; repeats accumulate."""
    headers: list[tuple[str, str]] = []
    for raw in values:
        for item in raw.split(","):
            item = item.strip()
            if not item:
                continue
            key, _, value = item.partition("=")
            headers.append((canonical_header_key(key), value))
    return tuple(headers)


def add_prometheus_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("prometheus")
    group.add_argument(
        "--prometheus-url",
        type=http_url,
        default="https://localhost",
        help="Prometheus base URL (http or https)",
    )
    group.add_argument(
        "--prometheus-verb",
        default="GET",
        choices=["GET", "POST"],
        help="HTTP verb for Prometheus API calls (GET switches to POST for long URLs anyway)",
    )
    add_bool_flag(
        group, "--prometheus-auth-incluster", "use the pod's service-account token and CA for Prometheus"
    )
    group.add_argument(
        "--prometheus-auth-config",
        default="",
        help="kubeconfig whose TLS/auth settings are used for Prometheus",
    )
    add_prometheus_credential_flags(group)
    group.add_argument(
        "--prometheus-header",
        action="append",
        default=[],
        help="extra header key=value sent to Prometheus (repeatable)",
    )
    group.add_argument(
        "--prometheus-timeout",
        type=duration_arg,
        default=10.0,
        help="per-query timeout, sent to Prometheus and enforced client-side (Go duration)",
    )
    add_regex_escape_flag(group)
    group.add_argument(
        "--metrics-cache-ttl",
        type=duration_arg,
        default=DEFAULT_TTL,
        help="how long an answer of Prometheus is reused for identical queries; 0 disables the cache "
        "(Go duration; identical queries in flight are always sent once)",
    )
    group.add_argument(
        "--metrics-cache-max-entries",
        type=integer(1),
        default=DEFAULT_MAX_ENTRIES,
        help="most answers kept by the cache; the least recently used goes first",
    )
    add_bool_flag(
        group,
        "--batch-namespace-queries",
        "answer custom metrics of namespaced objects from one query over the whole namespace, grouped "
        "by object and filtered (Surge extension; only for rules whose query computes each object's "
        "value from that object's series alone)",
    )


def add_discovery_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("discovery")
    group.add_argument(
        "--config",
        default="",
        help="prometheus-adapter rules file, also its resourceRules for metrics.k8s.io (required)",
    )
    group.add_argument(
        "--config-max-bytes",
        type=integer(1),
        default=CONFIG_MAX_BYTES,
        help="largest --config file read, at start-up or reload; a larger one is refused (default: 1 MiB,"
        " what a ConfigMap holds)",
    )
    group.add_argument(
        "--metrics-relist-interval",
        type=duration_arg,
        default=600.0,
        help="how often to rediscover series (Go duration)",
    )
    group.add_argument(
        "--metrics-max-age",
        type=duration_arg,
        default=0.0,
        help="look-back for series discovery; 0 means the relist interval",
    )
    group.add_argument(
        "--kubeconfig",
        default=os.environ.get("KUBECONFIG", ""),
        help="kubeconfig of the three Kubernetes clients (lister, authentication, authorization) when "
        "their own flag is not given (Surge extension; default: $KUBECONFIG, else in-cluster)",
    )
    group.add_argument(
        "--lister-kubeconfig",
        default="",
        help="kubeconfig for the Kubernetes API (default: --kubeconfig, else in-cluster)",
    )
    group.add_argument(
        "--discovery-interval",
        type=duration_arg,
        default=0.0,
        help="how often to refresh the resource mapper; 0 means 5m",
    )


def add_adapter_serving_flags(parser: argparse.ArgumentParser) -> None:
    # A TLS connection costs the adapter (on uvloop) 40-95 KiB (bench_slowloris): 2,048 stay inside 512Mi.
    add_serving_flags(
        parser, secure_port=443, cert_dir="apiserver.local.config/certificates", max_connections=2048
    )


# The flag groups, in help order. The daemon adds delegated authentication and authorization's
# (adapter.__main__.adapter_auth_flags); `adapter explain` has no use for them.
FLAG_GROUPS: tuple[FlagGroup, ...] = (
    add_discovery_flags,
    add_prometheus_flags,
    add_adapter_serving_flags,
    add_delegate_flags,
    add_tenant_flags,
    add_logging_flags,
)


def build_parser(groups: Sequence[FlagGroup] = FLAG_GROUPS) -> argparse.ArgumentParser:
    parser = OneLineErrorParser(
        prog=PROG,
        description="Serves custom.metrics.k8s.io, external.metrics.k8s.io and (from the config's "
        "resourceRules) metrics.k8s.io from Prometheus.",
        allow_abbrev=False,
    )
    add_version_flag(parser)
    for add_group in groups:
        add_group(parser)
    return parser


def normalize_argv(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """Rewrite Go-style argv for argparse; return (argv, warnings about dropped flags)."""
    args = list(argv)
    if args and not args[0].startswith("-"):
        args = args[1:]  # the Helm chart passes the binary path ("/adapter") as the first argument
    out: list[str] = []
    warnings: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":
            out.extend(args[i - 1 :])
            break
        if not arg.startswith("-") or arg == "-":
            out.append(arg)
            continue
        name, has_value, _ = arg.lstrip("-").partition("=")
        dropped = _REMOVED_KLOG_FLAGS | _KLOG_FLAGS | _NO_EFFECT_FLAGS
        if name in dropped:
            takes_value = name not in _BOOL_COMPAT_FLAGS
            if takes_value and not has_value and i < len(args):
                i += 1  # `--v 4`: swallow the separate value
            if name in _REMOVED_KLOG_FLAGS:
                warnings.append(f"flag --{name} was removed from klog and is ignored")
            elif name in _KLOG_FLAGS:
                warnings.append(f"flag --{name} is ignored; use --log-level")
            else:
                warnings.append(f"flag --{name} has no effect in surge-adapter and is ignored")
            continue
        # Go accepts single-dash long flags (`-config=x`); argparse needs two dashes.
        out.append(arg if arg.startswith("--") else "-" + arg)
    return out, warnings


@dataclass(frozen=True)
class AdapterOptions:
    config: Path
    config_max_bytes: int
    prometheus_url: str
    prometheus_verb: str
    prometheus_auth_incluster: bool
    prometheus_auth_config: str
    prometheus_credentials: PrometheusCredentials
    prometheus_headers: tuple[tuple[str, str], ...]
    prometheus_timeout: float
    regex_escape_values: bool
    metrics_cache_ttl: float
    metrics_cache_max_entries: int
    batch_namespace_queries: bool
    relist_interval: float
    max_age: float
    lister_kubeconfig: str
    mapper_refresh_interval: float
    serving: ServingOptions
    log_level: str
    log_format: str
    delegates: DelegateOptions
    tenants: TenantOptions


class FlagError(ValueError):
    """Flags parsed but are inconsistent; the message is shown to the user."""


def options_from_namespace(ns: argparse.Namespace) -> AdapterOptions:
    if not ns.config:
        raise FlagError("--config: required (the rules file)")
    if ns.metrics_relist_interval <= 0:
        raise FlagError("--metrics-relist-interval: must be more than 0s")
    max_age = ns.metrics_max_age or ns.metrics_relist_interval
    if max_age < ns.metrics_relist_interval:
        raise FlagError("--metrics-max-age: must be at least --metrics-relist-interval")
    if ns.prometheus_auth_incluster and ns.prometheus_auth_config:
        raise FlagError("--prometheus-auth-incluster and --prometheus-auth-config are mutually exclusive")
    try:
        credentials = prometheus_credentials(ns)
    except ValueError as err:
        raise FlagError(str(err)) from None
    try:
        serving = serving_options_from_namespace(ns)
    except ValueError as err:
        raise FlagError(str(err)) from None
    if ns.prometheus_timeout <= 0:
        raise FlagError("--prometheus-timeout: must be more than 0s")
    headers = parse_header_args(ns.prometheus_header)
    try:
        for name, value in headers:
            check_header(name, value)
    except ValueError as err:
        raise FlagError(f"--prometheus-header: {err}") from None
    try:
        delegates = delegate_options_from_namespace(ns)
        tenants = tenant_options_from_namespace(ns)
    except ValueError as err:
        raise FlagError(str(err)) from None
    return AdapterOptions(
        config=Path(ns.config),
        config_max_bytes=ns.config_max_bytes,
        prometheus_url=ns.prometheus_url,
        prometheus_verb=ns.prometheus_verb,
        prometheus_auth_incluster=ns.prometheus_auth_incluster,
        prometheus_auth_config=ns.prometheus_auth_config,
        prometheus_credentials=credentials,
        prometheus_headers=headers,
        prometheus_timeout=ns.prometheus_timeout,
        regex_escape_values=ns.regex_escape_values,
        metrics_cache_ttl=ns.metrics_cache_ttl,
        metrics_cache_max_entries=ns.metrics_cache_max_entries,
        batch_namespace_queries=ns.batch_namespace_queries,
        relist_interval=ns.metrics_relist_interval,
        max_age=max_age,
        lister_kubeconfig=ns.lister_kubeconfig or ns.kubeconfig,
        mapper_refresh_interval=ns.discovery_interval or 300.0,
        serving=serving,
        log_level=ns.log_level,
        log_format=ns.log_format,
        delegates=delegates,
        tenants=tenants,
    )


def parse_flags(
    argv: Sequence[str], groups: Sequence[FlagGroup] = FLAG_GROUPS
) -> tuple[AdapterOptions, argparse.Namespace, list[str]]:
    """Parse argv (without the interpreter's argv[0] unless it is a Helm-style positional).

    Returns the adapter options, the raw namespace (for flag groups owned by other modules) and the
    warnings about ignored flags. argparse exits with status 2 on unknown flags, like Go's flag package.
    """
    parser = build_parser(groups)
    normalized, warnings = normalize_argv(argv)
    ns = parser.parse_args(normalized)
    try:
        options = options_from_namespace(ns)
    except FlagError as err:
        parser.error(str(err))
    return options, ns, warnings
