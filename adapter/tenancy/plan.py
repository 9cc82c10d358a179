"""Which tenant rules are served, on which backend, and why the others are not — pure, from the objects.

* A rule object that does not parse, or cannot be confined to its namespace, is refused as it is.
* Its backend: `backendRef`, else its namespace's default `MetricBackend` (the oldest one marked default;
  a newer default is refused as `Conflict`), else the adapter's `--prometheus-url` (None here). A rule
  naming a backend that is missing or refused is refused (`BackendRefused`), never served elsewhere: it
  would read another Prometheus than the one its team chose.
* `--max-rules-per-namespace`: the oldest are served, the newer ones refused (`LimitExceeded`), so a
  new rule never takes the place of one that is served.
* Precedence between scopes (the config, then ClusterMetricRules, then a namespace's MetricRules) and
  conflicts inside one are settled where metric names are known: after discovery (adapter/tenancy/status.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from adapter.config import DiscoveryRule
from adapter.tenancy.confinement import RuleRefused
from adapter.tenancy.rules import METRIC_BACKEND, ObjectKey, TenantRule


@dataclass(frozen=True, slots=True)
class Refusal:
    reason: str  # a condition reason: InvalidSpec, InvalidQuery, BackendRefused, LimitExceeded, Conflict...
    message: str


@dataclass(frozen=True, slots=True)
class BackendEntry:
    """A backend object as planned from: its age and whether it may be used."""

    key: ObjectKey
    age_order: tuple[str, str]
    default: bool
    refusal: Refusal | None


@dataclass(frozen=True, slots=True)
class ServedRule:
    tenant: TenantRule
    rule: DiscoveryRule  # confined for a MetricRule
    backend: ObjectKey | None  # None: --prometheus-url


@dataclass(frozen=True)
class Plan:
    # Scope ("" for ClusterMetricRules, else a namespace) → its served rules, oldest first.
    scopes: dict[str, tuple[ServedRule, ...]] = field(default_factory=dict)
    refused: dict[ObjectKey, Refusal] = field(default_factory=dict)  # rules and backends not used


def default_backends(
    backends: Mapping[ObjectKey, BackendEntry],
) -> tuple[dict[str, ObjectKey], dict[ObjectKey, Refusal]]:
    """Each namespace's default MetricBackend (the oldest usable one marked default), and the newer
    defaults refused as conflicts."""
    chosen: dict[str, ObjectKey] = {}
    conflicts: dict[ObjectKey, Refusal] = {}
    for entry in sorted(backends.values(), key=lambda e: e.age_order):
        if not entry.default or entry.refusal is not None or entry.key.kind != METRIC_BACKEND:
            continue
        namespace = entry.key.namespace
        if namespace in chosen:
            conflicts[entry.key] = Refusal(
                "Conflict", f"{chosen[namespace]} is the namespace's default backend (the older one wins)"
            )
        else:
            chosen[namespace] = entry.key
    return chosen, conflicts


def plan(
    rules: Mapping[ObjectKey, TenantRule | Refusal],
    backends: Mapping[ObjectKey, BackendEntry],
    confine: Callable[[TenantRule], DiscoveryRule],
    max_rules_per_namespace: int,
) -> Plan:
    """The plan for these objects. `confine` gives the rule a MetricRule is served as (identity for a
    ClusterMetricRule), raising RuleRefused."""
    defaults, conflicts = default_backends(backends)
    refused: dict[ObjectKey, Refusal] = dict(conflicts)
    refused.update((key, entry.refusal) for key, entry in backends.items() if entry.refusal is not None)
    candidates: dict[str, list[ServedRule]] = {}
    for key, tenant in rules.items():
        if isinstance(tenant, Refusal):
            refused[key] = tenant
            continue
        backend = tenant.backend
        if backend is None and key.namespace:
            backend = defaults.get(key.namespace)
        why = _backend_refusal(backend, backends, refused) if backend is not None else None
        if why is not None:
            refused[key] = why
            continue
        try:
            served = ServedRule(tenant, confine(tenant), backend)
        except RuleRefused as err:
            refused[key] = Refusal(err.reason, str(err))
            continue
        candidates.setdefault(key.namespace, []).append(served)
    scopes: dict[str, tuple[ServedRule, ...]] = {}
    for namespace, served_rules in candidates.items():
        served_rules.sort(key=lambda s: s.tenant.age_order)
        limit = max_rules_per_namespace if namespace else len(served_rules)
        for over in served_rules[limit:]:
            refused[over.tenant.key] = Refusal(
                "LimitExceeded",
                f"the namespace has {len(served_rules)} rules; --max-rules-per-namespace serves the oldest "
                f"{limit}",
            )
        scopes[namespace] = tuple(served_rules[:limit])
    return Plan(scopes, refused)


def _backend_refusal(
    backend: ObjectKey, backends: Mapping[ObjectKey, BackendEntry], refused: Mapping[ObjectKey, Refusal]
) -> Refusal | None:
    if backend not in backends:
        return Refusal("BackendRefused", f"{backend} not found")
    if backend in refused:
        return Refusal("BackendRefused", f"{backend} is not usable: {refused[backend].message}")
    return None
