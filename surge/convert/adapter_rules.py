"""A prometheus-adapter config as MetricRule and ClusterMetricRule objects (metrics.surge.dev/v1alpha1): the
rules of `rules` (kind custom) and `externalRules` (kind external), each copied field for field into one
object's spec, less what reads as unset (surge/convert/rule_spec.py; docs/tenant-rules.md, "Moving rules
out of the config file"). A rule the CRDs would refuse (beyond their bounds, without a query) is refused.

A rule whose seriesQuery pins one namespace (the equality matcher `namespace="x"`) becomes a MetricRule
of namespace x, when the adapter would serve it as one (adapter/tenancy/confinement.py decides, with the
built-in resources standing in for the cluster's discovery); every other rule a ClusterMetricRule, which
the adapter serves as it served the config's. What serves differently is said, one line each:
`resourceRules` (metrics.k8s.io) have no object form and are left out; a pinned rule the adapter would
refuse as a MetricRule stays a ClusterMetricRule, and why; what a MetricRule serves differently
(surge/convert/tenant_changes.py); two rules of one scope that expose the same metric for the same
resources, where the config serves the later rule's and objects the older object's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from adapter.naming.resources import BUILTIN_RESOURCES, StaticResourceMapper
from adapter.tenancy.confinement import RuleRefused, confine_rule
from shared.promql.series_selector import pinned_namespace
from surge.convert.adapter_config import WrittenRule, read_config
from surge.convert.metadata import DNS_LABEL
from surge.convert.problems import ConvertError
from surge.convert.rule_names import Names, base_name, exposed_name
from surge.convert.rule_spec import rule_spec, spec_problems
from surge.convert.tenant_changes import changes

API_VERSION = "metrics.surge.dev/v1alpha1"
METRIC_RULE, CLUSTER_METRIC_RULE = "MetricRule", "ClusterMetricRule"
# Discovery stands in for the cluster's: an override to another resource is the adapter's to judge.
MAPPER = StaticResourceMapper(BUILTIN_RESOURCES)


@dataclass
class ConvertedConfig:
    """The objects of one config, in its order, and one line for each thing they serve differently."""

    objects: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def convert_config(text: str, source: str, names: Names) -> ConvertedConfig:
    """The objects for the config `text` (`source` names it in messages); ConvertError when the adapter
    would refuse the config, or the API server one of its objects (naming every such rule's problems).
    `names` are those taken by the objects converted before."""
    config = read_config(text, source)
    out = ConvertedConfig()
    if config.has_resource_rules:
        out.notes.append(
            f"{source}: resourceRules (metrics.k8s.io: kubectl top, cpu and memory of HPAs) have no object "
            "form: left out, keep them in the config file"
        )
    seen: dict[tuple[str, str, bool, str, str], str] = {}  # the first rule exposing a metric in a scope
    problems: list[str] = []
    for written in config.rules:
        spec = rule_spec(written.fields, written.external)
        problems += spec_problems(spec, written.where)
        namespace, refusal = _namespace(written)
        kind = METRIC_RULE if namespace else CLUSTER_METRIC_RULE
        name = names.take(kind, namespace or "", base_name(written))
        metadata = {"name": name, "namespace": namespace} if namespace else {"name": name}
        out.objects.append({"apiVersion": API_VERSION, "kind": kind, "metadata": metadata, "spec": spec})
        shown = f"{written.where} ({kind} {namespace + '/' if namespace else ''}{name})"
        if refusal:
            out.notes.append(f"{shown}: pins namespace {refusal[0]} but stays cluster-wide: {refusal[1]}")
        if namespace:
            out.notes += [f"{shown}: {change}" for change in changes(written.rule, spec, namespace, MAPPER)]
        metric = exposed_name(written)
        if metric:
            key = (kind, namespace or "", written.external, metric, repr(written.fields.get("resources")))
            if key in seen:
                out.notes.append(
                    f"{shown}: exposes {metric} as {seen[key]} does: the config served the later rule's, "
                    "objects serve the older object's (the newer is Ready=False, reason Conflict)"
                )
            seen.setdefault(key, written.where)
    if problems:
        raise ConvertError("; ".join(problems))
    return out


def _namespace(written: WrittenRule) -> tuple[str | None, tuple[str, str] | None]:
    """The namespace of the rule's MetricRule, or None and, for a pinned rule, (namespace, why not)."""
    namespace = pinned_namespace(written.rule.series_query)
    if namespace is None:
        return None, None
    if len(namespace) > 63 or not DNS_LABEL.fullmatch(namespace):
        return None, (repr(namespace), "not a namespace name (lowercase RFC 1123 label)")
    try:
        confine_rule(written.rule, namespace, MAPPER)
    except RuleRefused as err:
        return None, (namespace, f"the adapter would refuse it as a MetricRule: {err.message}")
    return namespace, None
