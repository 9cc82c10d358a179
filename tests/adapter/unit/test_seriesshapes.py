"""Series answers reduced to their shapes: the streaming decoder against a whole-body parse, for any layout,
label value and split of the body, and the registry fed shapes against prometheus-adapter's
series-by-series semantics (the last series wins a collision)."""

import json
from itertools import pairwise
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapter.config import parse_config
from adapter.naming.resources import BUILTIN_RESOURCES, StaticResourceMapper, resolve_resource
from adapter.registry import RuleId, SeriesRegistry
from adapter.seriesshapes import MalformedSeries, SeriesShapes, SeriesShapesDecoder

Series = list[dict[str, str]]

# Label values that look like the separator between two series, quotes, escapes and non-ASCII text.
VALUES = st.one_of(
    st.text(st.sampled_from(list('},{"\\aé\n\u2028')), max_size=8),
    st.sampled_from(['"},{"', '},{"__name__":"x"', "\\", '\\"},{']),
)
LABEL_SETS = st.lists(
    st.dictionaries(st.sampled_from(["__name__", "pod", "namespace", 'a"},{b', "zone"]), VALUES, max_size=4)
    | st.fixed_dictionaries({"__name__": st.sampled_from(["x_a", "x_b", "y"]), "pod": VALUES}),
    max_size=30,
)


def reference_shapes(series: Series) -> SeriesShapes:
    """Distinct (name, label names) of named series, ordered by the position of each one's last series."""
    last = {(labels["__name__"], tuple(labels)): i for i, labels in enumerate(series) if "__name__" in labels}
    return SeriesShapes(len(series), tuple(sorted(last, key=last.__getitem__)))


def encode(envelope: dict[str, Any], layout: str) -> bytes:
    if layout == "orjson":  # compact, non-ASCII as is
        return orjson.dumps(envelope)
    if layout == "compact":  # compact, non-ASCII escaped
        return json.dumps(envelope, separators=(",", ":")).encode()
    return json.dumps(envelope, indent=1).encode()  # another server's layout: parsed whole


def decode(body: bytes, cuts: list[int], batch_bytes: int) -> tuple[Any, int]:
    """The decoder's envelope for `body` fed in pieces cut at `cuts`, and how many batches it parsed early."""
    decoder = SeriesShapesDecoder(batch_bytes)
    edges = [0, *sorted(c % (len(body) + 1) for c in cuts), len(body)]
    batches = sum(decoder.feed(body[a:b]) for a, b in pairwise(edges))
    return decoder.finish(), batches


@given(
    series=LABEL_SETS,
    layout=st.sampled_from(["orjson", "compact", "indented"]),
    warnings=st.booleans(),
    cuts=st.lists(st.integers(min_value=0), max_size=6),
    batch_bytes=st.integers(min_value=1, max_value=400),
)
def test_decoder_equals_whole_body_parse(
    series: Series, layout: str, warnings: bool, cuts: list[int], batch_bytes: int
) -> None:
    envelope: dict[str, Any] = {"status": "success", "data": series}
    if warnings:
        envelope["warnings"] = ["a warning"]
    decoded, _ = decode(encode(envelope, layout), cuts, batch_bytes)
    assert decoded == {**envelope, "data": reference_shapes(series)}
    assert SeriesShapes.of(series) == reference_shapes(series)


def test_a_compact_answer_is_parsed_batch_by_batch() -> None:
    series = [{"__name__": f"m{i % 3}", "pod": f"p{i}", "namespace": "n"} for i in range(2000)]
    body = orjson.dumps({"status": "success", "data": series})
    decoded, batches = decode(body, list(range(0, len(body), 4096)), 8192)
    assert decoded["data"] == reference_shapes(series)
    assert len(decoded["data"].shapes) == 3
    assert batches >= len(body) // 8192 - 1  # never more than a batch and a piece held


def test_a_separator_inside_a_value_at_the_batch_edge() -> None:
    series = [{"__name__": "a", "v": "},{" * 50}, {"__name__": "b", "w": "x"}]
    decoded, _ = decode(orjson.dumps({"status": "success", "data": series}), list(range(0, 400, 7)), 16)
    assert decoded["data"] == SeriesShapes(2, (("a", ("__name__", "v")), ("b", ("__name__", "w"))))


def test_unnamed_series_are_counted_not_shaped() -> None:
    assert SeriesShapes.of([{"pod": "p"}, {"__name__": "m", "pod": "p"}, {}]) == SeriesShapes(
        3, (("m", ("__name__", "pod")),)
    )


@pytest.mark.parametrize(
    "body",
    [
        b'{"status":"success","data":[{"__name__":"a"},1]}',
        b'{"status":"success","data":[{"__name__":"a"},["x"]]}',
        b'{"status":"success","data":[{"__name__":1},{"__name__":"a"}]}',
        b'{"status": "success", "data": [{"__name__": ["x"]}]}',
    ],
)
def test_data_that_is_not_label_sets_is_malformed(body: bytes) -> None:
    decoder = SeriesShapesDecoder(1)
    with pytest.raises(MalformedSeries):
        for byte in range(len(body)):
            decoder.feed(body[byte : byte + 1])
        decoder.finish()


@pytest.mark.parametrize(
    "body",
    [b"", b"not json", b'{"status":"success","data":[{"a":"b"},{"a":', b'{"status":"success","data":[]}]'],
)
def test_a_body_that_is_not_json_is_a_value_error(body: bytes) -> None:
    decoder = SeriesShapesDecoder(1)
    decoder.feed(body)
    with pytest.raises(ValueError):
        decoder.finish()


def test_other_envelopes_pass_through() -> None:
    error = {"status": "error", "errorType": "bad_data", "error": "x"}
    not_a_list = {"status": "success", "data": {"resultType": "vector"}}
    for envelope in (error, not_a_list):
        decoder = SeriesShapesDecoder(1)
        decoder.feed(orjson.dumps(envelope))
        assert decoder.finish() == envelope


# --- the registry fed shapes ------------------------------------------------------------------------

COLLIDING = parse_config("""
rules:
- seriesQuery: q
  resources: {template: <<.Resource>>}
  name: {matches: "^(.*)_(a|b)$", as: "${1}"}
  metricsQuery: <<.Series>>
""")
RESOURCE_OF_LABEL = {"pod": "pods", "service": "services", "namespace": "namespaces"}


def per_series_entries(series: Series) -> dict[tuple[str, str], str]:
    """(metric, resource) → the series name serving it, series by series as prometheus-adapter does."""
    entries: dict[tuple[str, str], str] = {}
    for labels in series:
        name = labels.get("__name__", "")
        if name.endswith(("_a", "_b")):
            for label in labels.keys() & RESOURCE_OF_LABEL.keys():
                entries[(name[:-2], RESOURCE_OF_LABEL[label])] = name
    return entries


@given(
    st.lists(
        st.fixed_dictionaries(
            {"__name__": st.sampled_from(["x_a", "x_b", "y_a", "z"])},
            optional=dict.fromkeys(["pod", "service", "namespace", "other"], st.just("v")),
        ),
        max_size=12,
    )
)
def test_registry_serves_the_last_series_of_each_metric_and_resource(series: Series) -> None:
    mapper = StaticResourceMapper(BUILTIN_RESOURCES)
    registry = SeriesRegistry(COLLIDING, mapper)
    stats = registry.update(RuleId(False, 0), SeriesShapes.of(series))
    expected = per_series_entries(series)
    assert {(m.metric, m.group_resource.resource) for m in registry.custom_metrics()} == expected.keys()
    for (metric, resource), name in expected.items():
        info = resolve_resource(mapper, resource)
        assert info is not None
        namespace = None if resource == "namespaces" else "n"
        assert registry.custom_query(metric, info, namespace, ["o"]).promql == name
    assert (stats.series, stats.metrics) == (len(series), len(expected))
