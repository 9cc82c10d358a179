"""Mapping Prometheus instant-vector samples back to the objects they describe.

The object's name is the value of the rule's object label (`pod`, `kube_service`, …): samples
without it are ignored, and when several samples name the same object the last one in the answer
wins, as in prometheus-adapter (its `MatchValuesToNames` fills a map in answer order and says nothing).
Surge keeps that value, so a config moved from prometheus-adapter scales the same, and says which
objects had several (`repeated_objects`): a metricsQuery that does not aggregate by the object label
serves an arbitrary one of their values.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Sample:
    """One instant-vector sample: its labels, timestamp (seconds) and value as Prometheus wrote it."""

    labels: Mapping[str, str]
    timestamp: float
    value: str


def parse_vector(result: Iterable[Mapping[str, Any]]) -> list[Sample]:
    """Samples of a Prometheus `resultType: vector` `result` list (`{"metric": …, "value": [t, "v"]}`)."""
    samples = []
    for item in result:
        timestamp, value = item["value"]
        samples.append(Sample(item.get("metric") or {}, float(timestamp), str(value)))
    return samples


def samples_by_object(samples: Iterable[Sample], object_label: str) -> dict[str, Sample]:
    """Object name → its sample, keyed by the value of `object_label`."""
    by_name: dict[str, Sample] = {}
    for sample in samples:
        name = sample.labels.get(object_label)
        if name is not None:
            by_name[name] = sample
    return by_name


def repeated_objects(samples: Iterable[Sample], object_label: str) -> dict[str, int]:
    """Objects named by more than one sample → how many samples name each."""
    counts: dict[str, int] = {}
    for sample in samples:
        name = sample.labels.get(object_label)
        if name is not None:
            counts[name] = counts.get(name, 0) + 1
    return {name: count for name, count in counts.items() if count > 1}
