"""What a KEDA prometheus trigger reads that a direct PromQL metric reads differently, each as a change line
(or a refusal): where the query runs (`serverAddress`, `customHeaders`, `authenticationRef`, the Thanos
`namespace` parameter), which namespaces it reads (a direct query is confined to the object's), and what
no series reads (`ignoreNullValues`).

KEDA's prometheus scaler (pkg/scalers/prometheus_scaler.go) reads an empty result, or a NaN or infinite
value, as 0 when `ignoreNullValues` is true (its default) and fails otherwise. A direct metric's
`absentValue: "0"` gives the first; NaN and infinities fail a direct metric's read whatever it says
(docs/convert.md says so). Where the query runs cannot be expressed in a HorizontalAutoscaler: it runs on
the autoscaler's `--prometheus-url`; the way to keep another Prometheus, or headers, is a MetricBackend
and a MetricRule in the adapter (docs/tenant-rules.md), whose YAML the line gives, on one line."""

from __future__ import annotations

import re
from typing import Any

import promql_parser as pp
import yaml

from autoscaler.core.parsebool import parse_bool
from shared.promql.confine import NAMESPACE_LABEL, QueryRefused, check, render
from surge.convert.problems import ConvertError, short

RULES_API_VERSION = "metrics.surge.dev/v1alpha1"
# The trigger's settings of how and where to connect, besides those a line of their own covers.
CONNECTION_FIELDS = ("authModes", "unsafeSsl", "queryParameters", "timeout", "awsRegion", "identityOwner")


def absent_value(meta: dict[str, Any], where: str) -> str | None:
    """The direct metric's absentValue: "0" unless `ignoreNullValues` is false (KEDA's default is true);
    a value strconv.ParseBool refuses is refused, as KEDA refuses the trigger."""
    raw = meta.get("ignoreNullValues")
    if raw is None:
        return "0"
    parsed = raw if isinstance(raw, bool) else parse_bool(str(raw)) if isinstance(raw, str) else None
    if parsed is None:
        raise ConvertError(f"{where}.metadata.ignoreNullValues: {short(raw)}: not a boolean")
    return "0" if parsed else None


def _same_server(address: str, prometheus_url: str | None) -> bool:
    def norm(url: str) -> str:
        # A Service's names in the cluster: name.namespace, with .svc and .svc.cluster.local or not.
        return re.sub(r"\.svc(\.cluster\.local)?(?=[:/]|$)", "", url.strip().rstrip("/").lower())

    return prometheus_url is not None and norm(address) == norm(prometheus_url)


def custom_headers(raw: Any, where: str) -> dict[str, str]:
    """KEDA's `customHeaders`, `name=value` pairs separated by commas, as a map."""
    if not isinstance(raw, str):
        raise ConvertError(f"{where}.metadata.customHeaders: not a string: {short(raw)}")
    headers = {}
    for pair in (p for p in raw.split(",") if p.strip()):
        name, equals, value = pair.partition("=")
        if not equals or not name.strip():
            raise ConvertError(f"{where}.metadata.customHeaders: {short(pair)}: not name=value")
        headers[name.strip()] = value.strip()
    return headers


def _one_line_yaml(obj: dict[str, Any]) -> str:
    text: str = yaml.safe_dump(obj, default_flow_style=True, sort_keys=False, width=2**31 - 1)
    return text.strip()


def connection_changes(
    trigger: dict[str, Any],
    meta: dict[str, Any],
    where: str,
    object_namespace: str | None,
    metric: str,
    absent: str | None,
    prometheus_url: str | None,
) -> list[str]:
    """The change lines of where and how the trigger's query runs; `metric` is the direct metric's
    name without its prefix."""
    changes: list[str] = []
    address = meta.get("serverAddress")
    address = address.strip() if isinstance(address, str) else ""
    headers = custom_headers(meta["customHeaders"], where) if meta.get("customHeaders") else {}
    auth = trigger.get("authenticationRef")
    thanos = meta.get("namespace")
    if thanos not in (None, "", object_namespace):
        changes.append(
            f"{where} namespace: KEDA asks {address or 'Prometheus'} for namespace {short(thanos)}'s "
            f"series; Surge confines the query to {_namespace(object_namespace)} instead"
        )
    # Without a serverAddress KEDA has no server to keep (its scaler refuses the trigger).
    if (not address or _same_server(address, prometheus_url)) and not headers and not auth:
        return changes
    runs_on = (
        f"the autoscaler's --prometheus-url {prometheus_url}"
        if prometheus_url
        else ("the autoscaler's --prometheus-url (pass surge convert --prometheus-url to compare)")
    )
    sent = f" with the headers {', '.join(sorted(headers))}" if headers else ""
    backend_name = re.sub(r"[^a-z0-9-]", "-", metric.lower()).strip("-") or "prometheus"
    backend = {
        "apiVersion": RULES_API_VERSION,
        "kind": "MetricBackend",
        "metadata": _metadata(backend_name, object_namespace),
        "spec": {"url": address or "<its Prometheus URL>", **({"headers": headers} if headers else {})},
    }
    selector = _first_selector(meta["query"])
    rule_spec: dict[str, Any] = {
        "kind": "external",
        "seriesQuery": selector or "<a series selector of the query>",
        "name": {"as": re.sub(r"[^A-Za-z0-9_]", "_", metric)},
        "metricsQuery": meta["query"].strip(),
        "backendRef": {"kind": "MetricBackend", "name": backend_name},
    }
    if absent is not None:
        rule_spec["absentValue"] = absent
    rule = {
        "apiVersion": RULES_API_VERSION,
        "kind": "MetricRule",
        "metadata": _metadata(backend_name, object_namespace),
        "spec": rule_spec,
    }
    changes.append(
        f"{where} serverAddress: KEDA sends the query to {address or 'its serverAddress'}{sent}; Surge runs "
        f"it on {runs_on}. To keep that server, create in the adapter (--tenant-rules) "
        f"{_one_line_yaml(backend)} and {_one_line_yaml(rule)}, and read it as an External metric "
        f"{rule_spec['name']['as']} without a query"
    )
    if isinstance(auth, dict):
        kind = auth.get("kind") or "TriggerAuthentication"
        changes.append(
            f"{where} authenticationRef: the credentials of {kind} {short(auth.get('name'))} are not used; "
            "put them in a Secret of the namespace and name it in the MetricBackend's spec.auth "
            "(secretRef, with basicAuth, bearerTokenKey or tls keys)"
        )
    dropped = [field for field in CONNECTION_FIELDS if meta.get(field) not in (None, "")]
    if dropped:
        changes.append(
            f"{where} {', '.join(dropped)}: dropped (the autoscaler's own connection settings apply)"
        )
    return changes


def _selectors(expr: Any) -> list[pp.VectorSelector]:
    """The series selectors of a parsed query, in order."""
    if isinstance(expr, pp.VectorSelector):
        return [expr]
    if isinstance(expr, pp.MatrixSelector):
        return [expr.vector_selector]
    if isinstance(expr, pp.SubqueryExpr | pp.ParenExpr | pp.UnaryExpr):
        return _selectors(expr.expr)
    if isinstance(expr, pp.BinaryExpr):
        return _selectors(expr.lhs) + _selectors(expr.rhs)
    if isinstance(expr, pp.AggregateExpr):
        return (_selectors(expr.param) if expr.param is not None else []) + _selectors(expr.expr)
    if isinstance(expr, pp.Call):
        return [vs for arg in expr.args for vs in _selectors(arg)]
    return []


def _printed(selector: pp.VectorSelector) -> str:
    text = render(selector)
    return text.removesuffix("{}") if selector.name else text


def _parsed(query: str) -> Any:
    try:
        check(query)
    except QueryRefused:
        return None  # refused when the object is checked
    return pp.parse(query)


def _first_selector(query: str) -> str | None:
    found = _selectors(_parsed(query))
    return _printed(found[0]) if found else None


def unconfined_selectors(query: str) -> list[str]:
    """The series selectors of `query` without a `namespace` matcher, as PromQL (each once)."""
    found = [
        _printed(vs)
        for vs in _selectors(_parsed(query))
        if not any(m.name == NAMESPACE_LABEL for m in vs.matchers.matchers)
    ]
    return list(dict.fromkeys(found))


def _namespace(namespace: str | None) -> str:
    return f"namespace {namespace!r}" if namespace else "the namespace the object is created in"


def _metadata(name: str, namespace: str | None) -> dict[str, str]:
    return {"name": name, "namespace": namespace} if namespace else {"name": name}


def confinement_change(meta: dict[str, Any], where: str, object_namespace: str | None) -> list[str]:
    """The line saying which selectors the confinement narrows to the object's namespace; none when the
    Thanos `namespace` parameter names that namespace (prom-label-proxy confines KEDA's query the same)."""
    if object_namespace and meta.get("namespace") == object_namespace:
        return []
    selectors = unconfined_selectors(meta["query"].strip())
    if not selectors:
        return []
    return [
        f"{where} query: {', '.join(selectors)} read every namespace on KEDA; Surge confines them to "
        f"{_namespace(object_namespace)}. To keep them cluster-wide the operator runs the autoscaler with "
        f"--cluster-wide-query-namespace={object_namespace or '<namespace>'} (every autoscaler of that "
        "namespace then "
        "queries unconfined; docs/deploy.md section 11)"
    ]
