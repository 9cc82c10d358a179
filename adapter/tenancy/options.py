"""The flags of tenant rules (MetricRule, ClusterMetricRule, MetricBackend, ClusterMetricBackend).

Off by default: `--tenant-rules` turns the watch of the four kinds on. What a tenant may make the adapter
call is the admin's: `--allowed-backend-urls` (RE2 patterns, each matching a whole URL; none by default,
so that no object can point the adapter at the API server or a cloud metadata address) and
`--allowed-backend-headers` (header names a backend may set beyond the plain ones; `Authorization` and
the hop-by-hop headers are refused unless named here). With `--backend-namespace-header` (for example
`X-Scope-OrgID`) the adapter itself sets that header on a MetricBackend's requests to the backend's
namespace, and the backend may not set it: on a multi-tenant Cortex, Mimir or Thanos URL a team reads its
own tenant only, whatever its object says.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import re2

from shared.cli import add_bool_flag, integer

# What one namespace may hold and discover (each refusal is stated in the object's status).
DEFAULT_MAX_RULES_PER_NAMESPACE = 50
DEFAULT_MAX_SERIES_PER_RULE = 10_000


@dataclass(frozen=True)
class TenantOptions:
    enabled: bool = False
    allowed_backend_urls: tuple[str, ...] = ()  # RE2 patterns, each matched against the whole URL
    allowed_backend_headers: frozenset[str] = frozenset()  # lower-case header names
    namespace_header: str = ""  # set to a MetricBackend's namespace on its requests ("": none)
    max_rules_per_namespace: int = DEFAULT_MAX_RULES_PER_NAMESPACE
    max_series_per_rule: int = DEFAULT_MAX_SERIES_PER_RULE

    def url_allowed(self, url: str) -> bool:
        return any(re2.fullmatch(pattern, url) is not None for pattern in self.allowed_backend_urls)


def _list(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def add_tenant_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("tenant rules (Surge extension)")
    add_bool_flag(
        group,
        "--tenant-rules",
        "serve MetricRule and ClusterMetricRule objects (metrics.surge.dev/v1alpha1) besides the config",
    )
    group.add_argument(
        "--allowed-backend-urls",
        action="append",
        default=[],
        metavar="REGEX[,REGEX]",
        help="URLs a MetricBackend or ClusterMetricBackend may name: RE2 patterns matching the whole URL "
        "(comma-separated, repeatable; none by default: only --prometheus-url is called)",
    )
    group.add_argument(
        "--allowed-backend-headers",
        action="append",
        default=[],
        metavar="NAME[,NAME]",
        help="header names a backend may set beyond the plain ones, e.g. Authorization (comma-separated, "
        "repeatable)",
    )
    group.add_argument(
        "--backend-namespace-header",
        default="",
        metavar="NAME",
        help="a header the adapter sets to a MetricBackend's namespace on its requests, which the backend "
        "may not set itself (e.g. X-Scope-OrgID: one tenant per namespace on Cortex, Mimir or Thanos)",
    )
    group.add_argument(
        "--max-rules-per-namespace",
        type=integer(1),
        default=DEFAULT_MAX_RULES_PER_NAMESPACE,
        help="MetricRules served per namespace; the newest beyond it are refused in their status",
    )
    group.add_argument(
        "--max-series-per-rule",
        type=integer(1),
        default=DEFAULT_MAX_SERIES_PER_RULE,
        help="series one MetricRule may discover; a rule finding more is refused in its status",
    )


def tenant_options_from_namespace(ns: argparse.Namespace) -> TenantOptions:
    """The tenant options; raises ValueError (a message naming the flag) when a pattern is invalid."""
    patterns = [pattern for arg in ns.allowed_backend_urls for pattern in _list(arg)]
    for pattern in patterns:
        try:
            re2.compile(pattern)
        except re2.error as err:
            raise ValueError(f"--allowed-backend-urls: {pattern!r}: {err}") from None
    headers = frozenset(name.lower() for arg in ns.allowed_backend_headers for name in _list(arg))
    namespace_header = ns.backend_namespace_header
    if namespace_header and re2.fullmatch(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+", namespace_header) is None:
        raise ValueError(f"--backend-namespace-header: {namespace_header!r} is not a header name")
    return TenantOptions(
        enabled=ns.tenant_rules,
        allowed_backend_urls=tuple(patterns),
        allowed_backend_headers=headers,
        namespace_header=namespace_header,
        max_rules_per_namespace=ns.max_rules_per_namespace,
        max_series_per_rule=ns.max_series_per_rule,
    )
