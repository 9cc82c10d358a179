"""Short-window reads (adapter/window.py): the `surge.dev/window` requirement is taken out of the selector,
every range of the rendered PromQL becomes the window, nothing else changes, and bad windows get 400."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta

import promql_parser as pp
import pytest

from adapter.config import default_config_yaml, parse_config
from adapter.naming.resources import BUILTIN_RESOURCES, StaticResourceMapper
from adapter.server.provider import PrometheusMetricsProvider
from adapter.server.routes import CustomRequest
from adapter.server.status import StatusError
from adapter.window import promql_duration, split_window, windowed, with_window
from shared.metricwindow import WINDOW_LABEL
from shared.selectors import parse_selector
from tests.adapter.provider_fakes import RecordingPrometheus, fed_registry


def test_the_window_requirement_is_taken_out_of_the_selector() -> None:
    window, rest = split_window(parse_selector(f"app=web,{WINDOW_LABEL}=6s"))
    assert (window, str(rest)) == ("6s", "app=web")
    window, rest = split_window(parse_selector("app=web"))
    assert (window, str(rest)) == (None, "app=web")


@pytest.mark.parametrize(
    ("go", "promql"),
    [
        ("6s", "6s"),
        ("1m30s", "90s"),
        ("500ms", "500ms"),
        ("1.5s", "1500ms"),
        ("1h", "3600s"),
        ("59m60s", "3600s"),
    ],
)
def test_a_go_duration_becomes_a_promql_duration(go: str, promql: str) -> None:
    assert promql_duration(go) == promql


@pytest.mark.parametrize(
    "selector",
    [
        f"{WINDOW_LABEL}=6",  # no unit
        f"{WINDOW_LABEL}=0s",
        f"{WINDOW_LABEL}=6d",  # Go has no days
        f"{WINDOW_LABEL}=1s1",
        f"{WINDOW_LABEL}!=6s",
        f"{WINDOW_LABEL} in (6s,7s)",
        f"{WINDOW_LABEL}=100us",  # under a millisecond
        f"{WINDOW_LABEL}=1h1ms",  # over the longest window, 1h
        f"{WINDOW_LABEL}=100000000000h",
    ],
)
def test_a_bad_window_is_a_400(selector: str) -> None:
    with pytest.raises(StatusError) as refused:
        split_window(parse_selector(selector))
    assert refused.value.code == 400
    assert WINDOW_LABEL in refused.value.message


def _ranges(promql: str) -> list[tuple[str, object]]:
    """The ranges of a parsed query, and its shape without them (node types and everything but ranges)."""
    found: list[tuple[str, object]] = []

    def walk(expr: object) -> None:
        if isinstance(expr, pp.MatrixSelector):
            found.append(("range", expr.range))
            walk(expr.vector_selector)
        elif isinstance(expr, pp.SubqueryExpr):
            found.append(("subquery", (expr.range, expr.step)))
            walk(expr.expr)
        elif isinstance(expr, pp.Call):
            for arg in expr.args:
                walk(arg)
        elif isinstance(expr, pp.AggregateExpr):
            walk(expr.expr)
        elif isinstance(expr, pp.BinaryExpr):
            walk(expr.lhs)
            walk(expr.rhs)
        elif isinstance(expr, pp.ParenExpr | pp.UnaryExpr):
            walk(expr.expr)
        elif isinstance(expr, pp.VectorSelector):
            found.append(("selector", (expr.name, str(expr.matchers))))

    walk(pp.parse(promql))
    return found


def test_every_range_and_subquery_range_becomes_the_window_and_nothing_else_changes() -> None:
    rule = (
        'sum(rate(http_requests_total{namespace="ns",path="/a[2m]",q=\'x]y\'}[2m])) by (pod) '
        "/ max_over_time(avg(rate(up[5m]))[1m:30s])"
    )
    rendered = with_window(rule, "6s")
    assert rendered == (
        'sum(rate(http_requests_total{namespace="ns",path="/a[2m]",q=\'x]y\'}[6s])) by (pod) '
        "/ max_over_time(avg(rate(up[6s]))[6s:6s])"
    )
    before, after = _ranges(rule), _ranges(rendered)
    assert [k for k, _ in before] == [k for k, _ in after]  # the same tree
    assert [v for k, v in before if k == "selector"] == [v for k, v in after if k == "selector"]
    six = timedelta(seconds=6)
    # A step longer than the window would find no evaluation point in it: the step becomes the window.
    assert [v for k, v in after if k != "selector"] == [six, (six, six), six]


@pytest.mark.parametrize(
    ("subquery", "window", "sent"),
    [
        ("[10m:30s]", "6s", "[6s:6s]"),  # longer step: the window
        ("[10m:1m30s]", "120s", "[120s:1m30s]"),  # a shorter step in two terms: kept
        ("[10m:2s]", "6s", "[6s:2s]"),  # shorter step: kept
        ("[10m:]", "6s", "[6s:6s]"),  # the evaluation interval (unknown here, often 1m): the window
        ("[10m:6000ms]", "6s", "[6s:6000ms]"),  # equal: kept
        ("[1h:1.5]", "1500ms", "[1500ms:1.5]"),  # a bare number is seconds
    ],
)
def test_a_subquery_step_is_at_most_the_window(subquery: str, window: str, sent: str) -> None:
    assert with_window(f"max_over_time(up{subquery})", window) == f"max_over_time(up{sent})"


def test_a_query_without_ranges_is_left_as_it_is() -> None:
    assert with_window('sum(queue_depth{queue="a[1m]"})', "6s") == 'sum(queue_depth{queue="a[1m]"})'
    assert windowed("sum(x[2m])", None) == "sum(x[2m])"


def test_a_bracket_that_holds_no_range_is_refused() -> None:
    with pytest.raises(ValueError, match="not a range"):
        with_window("sum(x[$interval])", "6s")
    with pytest.raises(StatusError) as refused:
        windowed("sum(x[$interval])", "6s")
    assert refused.value.code == 400


# --- through the provider: what it sends to Prometheus ------------------------------------------------

CONFIG = parse_config(
    default_config_yaml()
    + """externalRules:
- seriesQuery: '{__name__="queue_depth_total"}'
  resources: {overrides: {namespace: {resource: namespace}}}
  metricsQuery: 'sum(rate(<<.Series>>{<<.LabelMatchers>>}[2m])) by (queue)'
"""
)
MAPPER = StaticResourceMapper(BUILTIN_RESOURCES)
SERIES = [
    {"__name__": "http_requests_total", "namespace": "shop", "pod": "web-1"},
    {"__name__": "queue_depth_total", "namespace": "shop", "queue": "orders"},
]


def _sent(read: Callable[[PrometheusMetricsProvider], Awaitable[object]]) -> str:
    registry = fed_registry(CONFIG, MAPPER, SERIES)
    prometheus = RecordingPrometheus()
    provider = PrometheusMetricsProvider(registry, prometheus, MAPPER, objects=None)  # type: ignore[arg-type]

    async def ask() -> None:
        try:
            await read(provider)
        except StatusError as err:
            if err.code != 404:  # no samples: 404, after the query was sent
                raise

    asyncio.run(ask())
    (promql,) = prometheus.queries
    return promql


def _pod(metric_selector: str) -> CustomRequest:
    return CustomRequest("pods", "shop", "web-1", "http_requests", "", metric_selector)


def test_the_provider_sends_the_rule_over_the_window_and_no_window_matcher() -> None:
    normal = _sent(lambda p: p.custom_values(_pod("")))
    short = _sent(lambda p: p.custom_values(_pod(f"{WINDOW_LABEL}=6s")))
    assert "[6s]" not in normal and short == with_window(normal, "6s") and short != normal
    external = _sent(
        lambda p: p.external_values("shop", "queue_depth_total", f"queue=orders,{WINDOW_LABEL}=1m")
    )
    assert external == 'sum(rate(queue_depth_total{queue="orders",namespace="shop"}[60s])) by (queue)'


def test_the_provider_answers_a_bad_window_with_400_before_querying() -> None:
    with pytest.raises(StatusError) as refused:
        _sent(lambda p: p.external_values("shop", "queue_depth_total", f"{WINDOW_LABEL}=soon"))
    assert refused.value.code == 400 and WINDOW_LABEL in refused.value.message
