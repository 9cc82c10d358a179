"""A query's answer → the values the API would return for it, or what it would answer instead.

As the provider maps them (with its own functions): a custom metric's samples by the value of the object
label, NaN and ±Inf dropped, values as milli Quantities; an external metric's every sample (or its scalar).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from adapter.naming.resources import ResourceInfo
from adapter.naming.results import Sample
from adapter.prometheus import QueryResult
from adapter.server.bodies import external_value_list, metric_value_list
from adapter.server.provider import custom_values_of, external_values_of


@dataclass(frozen=True)
class QueryOutcome:
    """What Prometheus answered (`samples`) and the API's items for it (`values`), or the error."""

    samples: tuple[Sample, ...] = ()
    values: tuple[dict[str, Any], ...] = ()
    error: str | None = None  # Prometheus failed, or the API would answer an error instead
    answered: bool = True  # False: Prometheus did not answer the query


def custom_outcome(
    result: QueryResult,
    api_version_name: str,
    metric: str,
    resource: ResourceInfo,
    namespace: str,
    object_label: str,
    names: Sequence[str] | None,
) -> QueryOutcome:
    """The MetricValueList items for `names` (None: every object the answer has)."""
    if result.result_type != "vector":
        return QueryOutcome(result.samples, (), f"the query gave a {result.result_type}, not a vector: 500")
    values = custom_values_of(result.samples, object_label, resource, namespace, names)
    items = metric_value_list(api_version_name, metric, None, values)["items"]
    error = None
    if not items and names is not None and len(names) == 1:
        error = f"no value for {names[0]}: the API answers 404"
    return QueryOutcome(result.samples, tuple(items), error)


def external_outcome(result: QueryResult, metric: str) -> QueryOutcome:
    """The ExternalMetricValueList items."""
    values = external_values_of(result)
    if values is None:
        return QueryOutcome(result.samples, (), f"the query gave a {result.result_type}, not a vector: 500")
    return QueryOutcome(result.samples, tuple(external_value_list(metric, values)["items"]))
