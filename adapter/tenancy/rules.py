"""MetricRule and ClusterMetricRule objects → rules the registry serves.

A rule object's spec is prometheus-adapter's own rule (`seriesQuery`, `seriesFilters`, `resources`, `name`,
`metricsQuery`), so it is read by the config file's own parser (adapter/config.py): the same checks, the
same messages, the same templates. Surge's additions (`kind`, `backendRef`, `absentValue`) are read here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from adapter.config import ConfigError, DiscoveryRule, parse_config
from adapter.tenancy.confinement import RuleRefused
from shared.quantity import parse_quantity

GROUP = "metrics.surge.dev"
VERSION = "v1alpha1"
METRIC_RULE = "MetricRule"
CLUSTER_METRIC_RULE = "ClusterMetricRule"
METRIC_BACKEND = "MetricBackend"
CLUSTER_METRIC_BACKEND = "ClusterMetricBackend"
# prometheus-adapter's fields of a rule: the rest of a spec is Surge's.
_RULE_FIELDS = ("seriesQuery", "seriesFilters", "resources", "name", "metricsQuery")


@dataclass(frozen=True, slots=True, order=True)
class ObjectKey:
    """A rule or backend object: its kind, namespace ("" for the cluster-scoped kinds) and name."""

    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind} {where}{self.name}"


@dataclass(frozen=True, slots=True)
class TenantRule:
    key: ObjectKey
    uid: str
    generation: int
    created: str  # creationTimestamp (RFC 3339, UTC: sorts as text)
    external: bool
    rule: DiscoveryRule  # as written; a MetricRule's is confined before it is served
    backend: ObjectKey | None  # spec.backendRef
    absent_value: float | None

    @property
    def age_order(self) -> tuple[str, str]:
        """Oldest first; a name breaks a tie of creation times, as kubectl sorts."""
        return self.created, self.key.name


def object_key(obj: Mapping[str, Any]) -> ObjectKey:
    meta = obj.get("metadata") or {}
    return ObjectKey(str(obj.get("kind", "")), str(meta.get("namespace") or ""), str(meta.get("name", "")))


def parse_rule(obj: Mapping[str, Any]) -> TenantRule:
    """A rule object as the API server returns it; raises RuleRefused (InvalidSpec or InvalidQuery)."""
    key = object_key(obj)
    meta = obj.get("metadata") or {}
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        raise RuleRefused("InvalidSpec", "spec: required")
    kind = spec.get("kind", "custom")
    if kind not in ("custom", "external"):
        raise RuleRefused("InvalidSpec", f'spec.kind: {kind!r}: use "custom" or "external"')
    external = kind == "external"
    fields = {f: spec[f] for f in _RULE_FIELDS if f in spec}
    if key.namespace and "resources" not in fields:
        # A MetricRule's series are its namespace's: their `namespace` label names it, so a request's
        # namespace matcher has a label to go to (without it an external rule's queries cannot be built).
        fields["resources"] = {"overrides": {"namespace": {"resource": "namespace"}}}
    rule = _discovery_rule(fields, external)
    return TenantRule(
        key=key,
        uid=str(meta.get("uid", "")),
        generation=int(meta.get("generation") or 0),
        created=str(meta.get("creationTimestamp", "")),
        external=external,
        rule=rule,
        backend=_backend_ref(spec.get("backendRef"), key),
        absent_value=_absent_value(spec.get("absentValue")),
    )


def _discovery_rule(fields: dict[str, Any], external: bool) -> DiscoveryRule:
    """The rule read by the config file's parser, as one entry of `rules` or `externalRules`."""
    section = "externalRules" if external else "rules"
    try:
        config = parse_config(yaml.safe_dump({section: [fields]}), "spec")
    except ConfigError as err:
        # The parser names the place as `spec:1: rules[0].metricsQuery: ...`; the object has no list.
        place = f"{section}[0]"
        text = str(err)
        message = "spec" + text.partition(place)[2] if place in text else text
        query = message.startswith(("spec.seriesQuery", "spec.metricsQuery"))
        raise RuleRefused("InvalidQuery" if query else "InvalidSpec", message) from None
    return (config.external_rules if external else config.rules)[0]


def _backend_ref(ref: Any, key: ObjectKey) -> ObjectKey | None:
    if ref is None:
        return None
    if not isinstance(ref, Mapping) or not ref.get("name"):
        raise RuleRefused("InvalidSpec", "spec.backendRef: needs a name")
    kind = ref.get("kind", METRIC_BACKEND)
    if kind == METRIC_BACKEND and key.namespace:
        return ObjectKey(METRIC_BACKEND, key.namespace, str(ref["name"]))
    if kind == CLUSTER_METRIC_BACKEND:
        return ObjectKey(CLUSTER_METRIC_BACKEND, "", str(ref["name"]))
    raise RuleRefused(
        "InvalidSpec",
        f"spec.backendRef.kind: {kind!r}: a {key.kind} may name "
        + ("a MetricBackend or a ClusterMetricBackend" if key.namespace else "a ClusterMetricBackend"),
    )


def _absent_value(value: Any) -> float | None:
    if value is None:
        return None
    try:
        return float(parse_quantity(str(value)))
    except ValueError as err:
        raise RuleRefused("InvalidSpec", f"spec.absentValue: {value!r}: not a quantity ({err})") from None
