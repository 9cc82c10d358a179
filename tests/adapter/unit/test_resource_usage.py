"""Samples → pod and node usage, with the cases of prometheus-adapter's resource provider tests."""

from __future__ import annotations

import pytest

from adapter.naming.results import Sample
from adapter.objects import CachedObject
from adapter.resourcemetrics.usage import (
    ContainerUsage,
    by_namespace,
    cpu_quantity,
    memory_quantity,
    milli_value,
    node_usage,
    pod_usage,
    samples_by_object,
)

POD1 = CachedObject("some-ns", "pod1", {"app": "a"})


def container(pod: str, name: str, value: str, at: float) -> Sample:
    return Sample({"pod": pod, "container": name, "namespace": "some-ns"}, at, value)


def usage_strings(containers: tuple[ContainerUsage, ...]) -> list[tuple[str, str, str]]:
    return [(c.name, str(c.cpu), str(c.memory)) for c in containers]


def test_pod_usage_per_container_with_the_earliest_timestamp() -> None:
    cpu = [container("pod1", "cont1", "1100", 10.270), container("pod1", "cont2", "1110", 10.010)]
    memory = [container("pod1", "cont1", "3100", 10.020), container("pod1", "cont2", "3110", 10.300)]
    usage = pod_usage(POD1, cpu, memory, "container", "container")
    assert usage is not None
    assert usage.pod is POD1 and usage.timestamp == 10.010
    assert usage_strings(usage.containers) == [("cont1", "1100", "3100"), ("cont2", "1110", "3110")]


def test_pod_without_cpu_or_memory_samples_is_left_out() -> None:
    samples = [container("pod1", "cont1", "1", 1.0)]
    assert pod_usage(POD1, samples, [], "container", "container") is None
    assert pod_usage(POD1, [], samples, "container", "container") is None


def test_container_with_one_resource_gets_zero_for_the_other() -> None:
    cpu = [container("pod1", "app", "0.25", 1.0)]
    memory = [container("pod1", "app", "67108864", 1.0), container("pod1", "sidecar", "1048576", 2.0)]
    usage = pod_usage(POD1, cpu, memory, "container", "container")
    assert usage is not None
    assert usage_strings(usage.containers) == [("app", "250m", "64Mi"), ("sidecar", "0", "1Mi")]


def test_each_rule_reads_its_own_container_label() -> None:
    cpu = [Sample({"pod": "pod1", "c": "app"}, 1.0, "1")]
    memory = [Sample({"pod": "pod1", "container_name": "app"}, 1.0, "2048")]
    usage = pod_usage(POD1, cpu, memory, "c", "container_name")
    assert usage is not None
    assert usage_strings(usage.containers) == [("app", "1", "2Ki")]
    # A sample without the label is the container "" (Go's map lookup of a missing label).
    unlabelled = pod_usage(POD1, cpu, memory, "container", "container")
    assert unlabelled is not None and usage_strings(unlabelled.containers) == [("", "1", "2Ki")]


@pytest.mark.parametrize(
    ("value", "milli"),
    [
        ("1100", 1_100_000),
        ("0.25", 250),
        ("0.0205", 20),  # float64 0.0205 * 1000 is 20.4999…: truncated toward zero, as int64() does
        ("0.0009", 0),
        ("NaN", 0),
        ("-1100", 0),
        ("-0.5", 0),
        ("+Inf", 0),
        ("-Inf", 0),
        ("1e300", int(1e300 * 1000.0)),
    ],
)
def test_milli_value_is_int64_of_value_times_1000(value: str, milli: int) -> None:
    assert milli_value(value) == milli


@pytest.mark.parametrize(
    ("value", "cpu", "memory"),
    [
        ("3100.5", "3100500m", "3100500m"),  # fractional bytes: the milli form prometheus-adapter emits
        ("1073741824", "1073741824", "1Gi"),
        ("1000", "1k", "1k"),  # BinarySI below 1024 prints as DecimalSI
        ("2000", "2k", "2000"),
        ("0.0205", "20m", "20m"),
        ("NaN", "0", "0"),
    ],
)
def test_quantity_formats(value: str, cpu: str, memory: str) -> None:
    assert str(cpu_quantity(value)) == cpu
    assert str(memory_quantity(value)) == memory


def test_node_usage_takes_the_first_samples_and_the_earlier_timestamp() -> None:
    node = CachedObject("", "node1", {})
    cpu = [Sample({"node": "node1"}, 10.0, "1100"), Sample({"node": "node1"}, 5.0, "9")]
    memory = [Sample({"node": "node1"}, 12.0, "2048")]
    usage = node_usage(node, cpu, memory)
    assert usage is not None
    assert (usage.timestamp, str(usage.cpu), str(usage.memory)) == (10.0, "1100", "2Ki")
    earlier_memory = node_usage(node, cpu[:1], [Sample({}, 3.0, "-3110")])
    assert earlier_memory is not None
    assert (earlier_memory.timestamp, str(earlier_memory.memory)) == (3.0, "0")
    assert node_usage(node, cpu, []) is None
    assert node_usage(node, [], memory) is None


def test_samples_are_grouped_by_the_object_label() -> None:
    samples = [
        container("pod1", "a", "1", 1.0),
        container("pod3", "a", "2", 1.0),
        container("pod1", "b", "3", 1.0),
        Sample({"container": "x"}, 1.0, "4"),
    ]
    grouped = samples_by_object(samples, "pod")
    assert {name: [s.value for s in group] for name, group in grouped.items()} == {
        "pod1": ["1", "3"],
        "pod3": ["2"],
        "": ["4"],
    }


def test_pods_are_grouped_by_namespace_in_order() -> None:
    pods = [CachedObject("a", "p1", {}), CachedObject("b", "p2", {}), CachedObject("a", "p3", {})]
    assert {ns: [p.name for p in group] for ns, group in by_namespace(pods).items()} == {
        "a": ["p1", "p3"],
        "b": ["p2"],
    }
