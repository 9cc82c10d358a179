"""Mapping Prometheus samples back to objects, as prometheus-adapter does, and parsing a vector result."""

from adapter.naming.results import Sample, parse_vector, samples_by_object


def test_parse_vector() -> None:
    samples = parse_vector(
        [
            {"metric": {"pod": "a"}, "value": [1700000000.5, "1.25"]},
            {"metric": {}, "value": [1700000001, "NaN"]},
        ]
    )
    assert samples == [
        Sample({"pod": "a"}, 1700000000.5, "1.25"),
        Sample({}, 1700000001.0, "NaN"),
    ]


def test_samples_by_object_ignores_unlabelled_and_last_wins() -> None:
    samples = [
        Sample({"pod": "a"}, 1.0, "1"),
        Sample({"service": "a"}, 2.0, "2"),
        Sample({"pod": "b"}, 3.0, "3"),
        Sample({"pod": "a", "container": "x"}, 4.0, "4"),
    ]
    by_object = samples_by_object(samples, "pod")
    assert set(by_object) == {"a", "b"}
    assert by_object["a"].value == "4"
    assert by_object["b"].timestamp == 3.0
