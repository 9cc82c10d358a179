"""An explanation as JSON (the endpoint's body, `-o json`) and as text (the CLI's default): of a custom or
external metric read (Explanation), or of a metrics.k8s.io read (ResourceExplanation)."""

from __future__ import annotations

from typing import Any

from adapter.explain.explanation import Explanation
from adapter.explain.resource import ResourceExplanation
from adapter.explain.results import QueryOutcome
from adapter.explain.verdicts import RuleVerdict
from adapter.resourcemetrics.queries import ResourceQuery
from adapter.seriesshapes import Shape


def _series_json(series: tuple[Shape, ...]) -> list[dict[str, Any]]:
    return [{"name": name, "labels": sorted(set(labels) - {"__name__"})} for name, labels in series]


def _rule_json(verdict: RuleVerdict) -> dict[str, Any]:
    return {
        "rule": str(verdict.rule),
        "line": verdict.line,
        "seriesQuery": verdict.series_query,
        "serves": verdict.serves,
        "series": _series_json(verdict.series),
        "reasons": list(verdict.reasons),
        "promql": verdict.promql,
    }


def _result_json(outcome: QueryOutcome) -> dict[str, Any]:
    return {
        "samples": [
            {"labels": dict(sample.labels), "timestamp": sample.timestamp, "value": sample.value}
            for sample in outcome.samples
        ],
        "values": list(outcome.values),
        "error": outcome.error,
    }


def as_json(explanation: Explanation | ResourceExplanation) -> dict[str, Any]:
    if isinstance(explanation, ResourceExplanation):
        return _resource_json(explanation)
    return {
        "path": explanation.path,
        "api": explanation.api,
        "metric": explanation.metric,
        "resource": explanation.resource,
        "namespace": explanation.namespace,
        "object": explanation.objects,
        "discovery": "assumed" if explanation.assumed else "prometheus",
        "served": explanation.served,
        "rule": None if explanation.rule is None else str(explanation.rule),
        "promql": explanation.promql,
        "objectLabel": explanation.object_label,
        "series": _series_json(explanation.series),
        "reasons": list(explanation.reasons),
        "nearest": list(explanation.nearest),
        "rules": [_rule_json(verdict) for verdict in explanation.rules],
        "notes": list(explanation.notes),
        "result": None if explanation.result is None else _result_json(explanation.result),
    }


def _what(explanation: Explanation) -> str:
    if not explanation.resource:
        return f"external metric {explanation.metric} (namespace {explanation.namespace})"
    where = f" in namespace {explanation.namespace}" if explanation.namespace else ""
    return f"{explanation.metric} of {explanation.resource} {explanation.objects}{where}"


def _served(explanation: Explanation) -> str:
    if explanation.served is None and explanation.assumed:
        return "unknown: no Prometheus, so no discovery; each rule was tried on series it would need"
    if explanation.served is None:
        return "unknown: series discovery failed (below)"
    if explanation.rule is None:
        return "no"
    line = next(v.line for v in explanation.rules if v.rule == explanation.rule)
    return f"yes, by {explanation.rule} (line {line})"


def _shape_text(shape: Shape) -> str:
    name, labels = shape
    return f"{name}{{{', '.join(sorted(set(labels) - {'__name__'}))}}}"


def _value_text(value: dict[str, Any]) -> str:
    described = value.get("describedObject")
    who = described["name"] if described else str(value.get("metricLabels") or {})
    return f"{who} = {value['value']} at {value['timestamp']}"


def as_text(explanation: Explanation | ResourceExplanation) -> str:
    if isinstance(explanation, ResourceExplanation):
        return _resource_text(explanation)
    lines = [
        f"Path:      {explanation.path}",
        f"Asks:      {_what(explanation)}",
        f"Served:    {_served(explanation)}",
    ]
    if explanation.promql is not None:
        lines.append(f"PromQL:    {explanation.promql}")
    if explanation.series:
        lines.append(f"Series:    {', '.join(_shape_text(shape) for shape in explanation.series)}")
    lines.extend(
        f"Why not:   {reason}" if i == 0 else f"           {reason}"
        for i, reason in enumerate(explanation.reasons)
    )
    if explanation.nearest:
        lines.append(f"Nearest:   {', '.join(explanation.nearest)}")
    lines.extend(f"Note:      {note}" for note in explanation.notes)
    lines.append("Rules:")
    for verdict in explanation.rules:
        if verdict.serves:
            found = ", ".join(_shape_text(shape) for shape in verdict.series)
            head = f"would serve it from {found}" if explanation.assumed else f"serves it from {found}"
        else:
            head = "does not serve it"
        lines.append(f"  {verdict.rule} (line {verdict.line}, seriesQuery {verdict.series_query!r}): {head}")
        lines.extend(f"    - {reason}" for reason in verdict.reasons)
        if verdict.promql is not None and verdict.rule != explanation.rule:
            lines.append(f"    PromQL: {verdict.promql}")
    outcome = explanation.result
    if outcome is not None:
        lines.append("Result:")
        lines.extend(f"  {_value_text(value)}" for value in outcome.values)
        if not outcome.values:
            lines.append(f"  no values ({len(outcome.samples)} samples from Prometheus)")
        if outcome.error is not None:
            lines.append(f"  error: {outcome.error}")
    return "\n".join(lines) + "\n"


# --- metrics.k8s.io ----------------------------------------------------------------------------------


def _query_json(query: ResourceQuery) -> dict[str, Any]:
    return {"promql": query.promql, "objectLabel": query.object_label}


def _resource_json(explanation: ResourceExplanation) -> dict[str, Any]:
    read, outcome = explanation.read, explanation.result
    return {
        "path": explanation.path,
        "api": read.api,
        "resource": read.kind,
        "namespace": read.namespace,
        "object": read.name,
        "labelSelector": read.label_selector,
        "fieldSelector": read.field_selector,
        "served": explanation.served,
        "window": explanation.window,
        "queries": [
            {
                "namespace": pair.objects[0].namespace,
                "objects": [obj.name for obj in pair.objects],
                "cpu": _query_json(pair.cpu),
                "memory": _query_json(pair.memory),
            }
            for pair in explanation.queries
        ],
        "reasons": list(explanation.reasons),
        "notes": list(explanation.notes),
        "result": None
        if outcome is None
        else {"items": list(outcome.items), "leftOut": list(outcome.left_out), "error": outcome.error},
    }


def _resource_served(explanation: ResourceExplanation) -> str:
    if explanation.served is None:
        return f"by resourceRules (window {explanation.window}) for the objects the API server lists"
    if explanation.served:
        return f"yes, by resourceRules (window {explanation.window})"
    return "no"


def _usage_text(item: dict[str, Any]) -> list[str]:
    meta = item["metadata"]
    name = f"{meta['namespace']}/{meta['name']}" if "namespace" in meta else meta["name"]
    if "usage" in item:
        return [
            f"  {name}: cpu {item['usage']['cpu']}, memory {item['usage']['memory']} at {item['timestamp']}"
        ]
    return [f"  {name} at {item['timestamp']}:"] + [
        f"    {c['name'] or '(no container label)'}: cpu {c['usage']['cpu']}, memory {c['usage']['memory']}"
        for c in item["containers"]
    ]


def _block(label: str, promql: str) -> list[str]:
    """`promql` after `label`, its further lines (block scalars of the rules) under its first."""
    first, *rest = promql.rstrip("\n").split("\n")
    column = max(11, len(label) + 1)  # a long label (`Memory (namespace):`) moves the query right
    return [label.ljust(column) + first, *(" " * column + line for line in rest)]


def _resource_text(explanation: ResourceExplanation) -> str:
    lines = [
        f"Path:      {explanation.path}",
        f"Asks:      CPU and memory of {explanation.read.objects}",
        f"Served:    {_resource_served(explanation)}",
    ]
    several = len(explanation.queries) > 1
    for pair in explanation.queries:
        where = f" ({pair.objects[0].namespace})" if several else ""
        lines.extend(_block(f"CPU{where}:", pair.cpu.promql))
        lines.extend(_block(f"Memory{where}:", pair.memory.promql))
    lines.extend(
        f"Why not:   {reason}" if i == 0 else f"           {reason}"
        for i, reason in enumerate(explanation.reasons)
    )
    lines.extend(f"Note:      {note}" for note in explanation.notes)
    outcome = explanation.result
    if outcome is not None:
        lines.append("Result:")
        for item in outcome.items:
            lines.extend(_usage_text(item))
        lines.extend(f"  left out {why}" for why in outcome.left_out)
        if outcome.error is not None:
            lines.append(f"  error: {outcome.error}")
    return "\n".join(lines) + "\n"
