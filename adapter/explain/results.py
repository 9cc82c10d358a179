"""A query's answer → the values the API would return for it, or what it would answer instead.

As the provider maps them: a custom metric's samples by the value of the object label, NaN and ±Inf
dropped, values as milli Quantities; an external metric's every sample (or its scalar).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from adapter.naming.resources import ResourceInfo
from adapter.naming.results import Sample, samples_by_object
from adapter.prometheus import QueryResult
from adapter.resourcemapper import api_version
from adapter.server.bodies import (
    CustomValue,
    DescribedObject,
    ExternalValue,
    external_value_list,
    metric_value_list,
    sample_quantity,
)


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
    by_name = samples_by_object(result.samples, object_label)
    values = []
    for name in sorted(by_name) if names is None else names:
        sample = by_name.get(name)
        quantity = sample_quantity(sample.value) if sample is not None else None
        if sample is not None and quantity is not None:
            described = DescribedObject(resource.kind, api_version(resource), name, namespace)
            values.append(CustomValue(described, sample.timestamp, quantity))
    items = metric_value_list(api_version_name, metric, None, values)["items"]
    error = None
    if not items and names is not None and len(names) == 1:
        error = f"no value for {names[0]}: the API answers 404"
    return QueryOutcome(result.samples, tuple(items), error)


def external_outcome(result: QueryResult, metric: str) -> QueryOutcome:
    """The ExternalMetricValueList items."""
    if result.result_type == "scalar":
        sample = result.samples[0]
        quantity = sample_quantity(sample.value)
        values = [ExternalValue(None, sample.timestamp, quantity)] if quantity is not None else []
    elif result.result_type == "vector":
        values = [
            ExternalValue(dict(sample.labels), sample.timestamp, quantity)
            for sample in result.samples
            if (quantity := sample_quantity(sample.value)) is not None
        ]
    else:
        return QueryOutcome(result.samples, (), f"the query gave a {result.result_type}, not a vector: 500")
    return QueryOutcome(result.samples, tuple(external_value_list(metric, values)["items"]))
