"""Fuzzing what callers control on the way to PromQL: metric names, object names, namespaces, selectors,
identity headers; and the whole queries a tenant writes for the autoscaler (the last section). The
route handlers, the provider, the registry and the auth layer run for real (in-process: Go-escaped URL
→ aiohttp request → route → provider → registry → PromQL); only Prometheus and the object cache are
replaced by recorders.

The property: an input is either refused with a Status error, or yields a query whose shape (everything
outside string literals) is exactly the shape the same request produces with harmless placeholder
values, and whose literals stand for exactly the requested values. `make fuzz` runs 100,000 examples
per campaign (SURGE_FUZZ=1); the default suite runs a small sample.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import promql_parser as pp
import pytest
import re2
import structlog
import yaml
from aiohttp import web
from aiohttp.test_utils import make_mocked_request
from hypothesis import event, given, settings
from hypothesis import strategies as st
from multidict import CIMultiDict

from adapter.config import load_config
from adapter.naming.errors import InvalidSelectorError, MetricNotFoundError, QueryBuildError
from adapter.naming.resources import BUILTIN_RESOURCES, GroupResource, StaticResourceMapper
from adapter.registry import SeriesRegistry
from adapter.server.app import render_errors
from adapter.server.provider import PrometheusMetricsProvider
from adapter.server.routes import MetricRoutes
from shared.auth.attributes import access_review_spec, request_attributes
from shared.auth.certs import CertificateAuthority
from shared.auth.identity import UserInfo
from shared.auth.requestheader import RequestHeaderConfig, user_from_headers
from shared.auth.status import forbidden
from shared.promql.confine import MAX_DURATION, MAX_QUERY_LENGTH, QueryRefused, confine
from shared.selectors import Requirement, parse_selector
from sim.prometheus import PrometheusProcess
from tests.adapter.provider_fakes import ListedObjects, RecordingPrometheus, fed_registry
from tests.security.pki import TestCA
from tests.shared.test_confine import assert_confined

REPO = Path(__file__).resolve().parents[2]
SMALL_SAMPLE = settings(max_examples=300)  # the default suite's share; `make fuzz` runs the marked ones
EXTERNAL_RULES = """
externalRules:
- seriesQuery: '{__name__="queue_depth",topic!=""}'
  resources:
    overrides:
      namespace: {resource: namespace}
  metricsQuery: sum(<<.Series>>{<<.LabelMatchers>>}) by (topic)
"""
SERIES = [
    {"__name__": "http_requests_total", "namespace": "shop", "pod": "web-1", "service": "web"},
    {
        "__name__": "container_cpu_usage_seconds_total",
        "namespace": "shop",
        "pod": "web-1",
        "container": "app",
    },
    {"__name__": "queue_depth", "namespace": "shop", "topic": "orders"},
    {"__name__": "node_load1", "namespace": "shop", "node": "n1"},
]


# -- the adapter, in process ------------------------------------------------------------------


@dataclass
class Adapter:
    app: web.Application
    registry: SeriesRegistry
    mapper: StaticResourceMapper
    prometheus: RecordingPrometheus
    objects: ListedObjects
    loop: asyncio.AbstractEventLoop

    def get(self, raw_url: str, accept: str | None = None) -> tuple[web.Request, str | None]:
        """Serve a raw (escaped) URL through the adapter's error rendering; the PromQL it ran, or None
        when it was refused before querying. Nothing may escape as an exception, and with a healthy
        backend nothing a caller sends may cause a 5xx."""
        headers = CIMultiDict([("Accept", accept)] if accept is not None else [])
        request = make_mocked_request("GET", raw_url, headers=headers, app=self.app)

        async def serve() -> int:
            match = await self.app.router.resolve(request)
            request._match_info = match  # what aiohttp's request handling does after resolving
            try:
                response = await render_errors(request, match.handler)
            except web.HTTPException as refused:
                return refused.status
            return response.status

        self.prometheus.queries.clear()
        status = self.loop.run_until_complete(serve())
        assert status < 500, f"{raw_url} (Accept {accept!r}) answered {status}"
        assert len(self.prometheus.queries) <= 1
        return request, (self.prometheus.queries[0] if self.prometheus.queries else None)


@pytest.fixture(scope="module")
def adapters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[bool, Adapter]]:
    """The adapter by `--regex-escape-values`: off (prometheus-adapter's rendering) and on."""
    # Every refused request logs at info level; at 100,000 examples that is most of the run time.
    previous = structlog.get_config()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))
    rules = yaml.safe_load((REPO / "manifests" / "adapter-config.yaml").read_text())["data"]["config.yaml"]
    path = tmp_path_factory.mktemp("fuzz") / "config.yaml"
    path.write_text(rules + EXTERNAL_RULES)
    config = load_config(path)
    mapper = StaticResourceMapper(BUILTIN_RESOURCES)
    loop = asyncio.new_event_loop()
    adapters = {}
    for regex_escape_values in (False, True):
        registry = fed_registry(config, mapper, SERIES, regex_escape_values=regex_escape_values)
        prometheus, objects = RecordingPrometheus(), ListedObjects()
        provider = PrometheusMetricsProvider(registry, prometheus, mapper, objects)  # type: ignore[arg-type]
        app = web.Application()
        MetricRoutes(lambda provider=provider: provider).add_routes(app)  # (bound now: the loop rebinds)
        adapters[regex_escape_values] = Adapter(app, registry, mapper, prometheus, objects, loop)
    yield adapters
    loop.close()
    structlog.configure(**previous)


# -- PromQL shape ---------------------------------------------------------------------------------

_SIMPLE = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    '"': '"',
    "'": "'",
}


def split_literals(promql: str) -> tuple[str, list[tuple[str, str]]]:
    """(query with every "…" literal replaced by `"$"`, [(operator before it, decoded literal)]).

    Decoding follows PromQL's (Go's) string-literal rules and fails on anything PromQL would reject.
    """
    skeleton: list[str] = []
    literals: list[tuple[str, str]] = []
    i = 0
    while i < len(promql):
        char = promql[i]
        if char != '"':
            skeleton.append(char)
            i += 1
            continue
        operator = "".join(skeleton)[-2:]
        value: list[str] = []
        i += 1
        while promql[i] != '"':
            char = promql[i]
            assert char not in "\n\r" and ord(char) >= 0x20, f"raw control character in {promql!r}"
            if char != "\\":
                value.append(char)
                i += 1
                continue
            code = promql[i + 1]
            if code in _SIMPLE:
                value.append(_SIMPLE[code])
                i += 2
            elif code in "xuU":
                width = {"x": 2, "u": 4, "U": 8}[code]
                value.append(chr(int(promql[i + 2 : i + 2 + width], 16)))
                i += 2 + width
            else:
                raise AssertionError(f"invalid escape \\{code} in {promql!r}")
        i += 1
        skeleton.append('"$"')
        literals.append((operator, "".join(value)))
    return "".join(skeleton), literals


def placeholders(values: Sequence[str], prefix: str) -> dict[str, str]:
    """A harmless stand-in per distinct value (empty stays empty: it selects a different matcher form)."""
    table: dict[str, str] = {}
    for value in values:
        if value not in table:
            table[value] = "" if value == "" else f"{prefix}{len(table)}"
    return table


def check_same_shape(
    fuzzed: str, reference: str, originals: dict[str, str], regex_escape_values: bool
) -> None:
    """`reference` ran with placeholders; `originals` maps each placeholder back to the requested value.

    Regex literals match exactly the requested values with `regex_escape_values`; without it they are
    the requested values joined by `|` as they are (in any order: selector values are sorted), as
    prometheus-adapter renders them.
    """
    skeleton, literals = split_literals(fuzzed)
    expected_skeleton, expected_literals = split_literals(reference)
    assert skeleton == expected_skeleton, f"shape changed:\n{fuzzed}\n{reference}"
    for (operator, literal), (_, stand_in) in zip(literals, expected_literals, strict=True):
        if operator in ("=~", "!~") and not regex_escape_values:
            joined = "|".join(originals.get(part, part) for part in stand_in.split("|"))
            assert sorted(literal.split("|")) == sorted(joined.split("|")), (
                f"{literal!r} stands for {stand_in!r}"
            )
        elif operator in ("=~", "!~"):
            wanted = [originals[part] for part in stand_in.split("|")] if stand_in else [""]
            pattern = re2.compile(f"^(?:{literal})$")
            for value in wanted:
                assert pattern.fullmatch(value), f"{literal!r} does not match {value!r}"
                for probe in near_misses(value):
                    if probe not in wanted:
                        assert not pattern.fullmatch(probe), (
                            f"{literal!r} matches more than {value!r}: {probe!r}"
                        )
        else:
            assert literal == originals.get(stand_in, stand_in), f"{literal!r} stands for {stand_in!r}"


def near_misses(value: str) -> Iterator[str]:
    """Strings one edit away from `value`: an unescaped metacharacter would let one of them match."""
    for i, char in enumerate(value):
        yield value[:i] + ("Y" if char == "X" else "X") + value[i + 1 :]
        yield value[:i] + value[i + 1 :]
        yield value[:i] + char + value[i:]
    yield value + "X"


def mapped_requirements(text: str, table: dict[str, str]) -> list[Requirement]:
    return [Requirement(r.key, r.operator, tuple(table[v] for v in r.values)) for r in parse_selector(text)]


def selector_values(*texts: str) -> list[str]:
    values: list[str] = []
    for text in texts:
        values.extend(value for requirement in parse_selector(text) for value in requirement.values)
    return values


# -- strategies -----------------------------------------------------------------------------------

weird_text = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cs",)) | st.sampled_from('"\\|(){}[],=!~*.^$+?\n '),
    max_size=12,
)
header_values = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=20)
# Mostly well-formed selectors (so requests get as far as PromQL), sometimes anything at all.
valid_keys = st.sampled_from(["app", "verb", "pod", "a_b", "app.kubernetes.io/name", "x/y"])
label_keys = valid_keys | valid_keys | weird_text
valid_values = st.from_regex(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,8}[A-Za-z0-9])?)?", fullmatch=True)
label_values = valid_values | valid_values | weird_text
operators = st.sampled_from(["=", "==", "!=", " in ", " notin ", "!", "", ">", "<"])


@st.composite
def selectors(draw: st.DrawFn) -> str:
    terms = []
    for _ in range(draw(st.integers(0, 3))):
        key, operator = draw(label_keys), draw(operators)
        if operator.strip() in ("in", "notin"):
            values = draw(st.lists(label_values, min_size=1, max_size=3))
            terms.append(f"{key}{operator}({','.join(values)})")
        elif operator in ("!", ""):
            terms.append(f"{operator}{key}")
        else:
            terms.append(f"{key}{operator}{draw(label_values)}")
    return ",".join(terms) if draw(st.integers(0, 4)) else draw(weird_text)


accept_headers = (
    st.sampled_from([None, "application/json, */*", "application/vnd.kubernetes.protobuf, */*"])
    | header_values
)
object_names = st.sampled_from(["web-1", "web-2", "n1"]) | weird_text.filter(bool)
namespaces = st.sampled_from(["shop", "default"]) | weird_text
# What SERIES register per resource; Namespace objects are asked for in the
# `namespaces/<ns>/metrics/<metric>` form (namespace_form).
SERVED = {
    "pods": ["http_requests", "cpu_usage", "container_cpu_usage"],
    "pod": ["http_requests", "cpu_usage"],
    "services": ["http_requests"],
    "nodes": ["node_load1"],
}


@st.composite
def custom_requests(draw: st.DrawFn) -> dict[str, Any]:
    resource = draw(st.sampled_from(sorted(SERVED)))
    namespace_form = draw(st.integers(0, 4)) == 0
    served = st.sampled_from(SERVED[resource] if not namespace_form else ["http_requests", "node_load1"])
    return {
        "namespace": draw(namespaces),
        "resource": resource,
        "names": draw(st.lists(object_names, min_size=1, max_size=4)),
        "wildcard": draw(st.booleans()),
        "metric": draw(served | served | weird_text),
        "label_selector": draw(selectors()),
        "metric_selector": draw(selectors()),
        "namespace_form": namespace_form,
        "accept": draw(accept_headers),
    }


def go_segment(text: str) -> str:
    """How client-go and the aggregator escape a path segment (`*` travels as %2A)."""
    return quote(text, safe="")


def go_query(params: dict[str, str]) -> str:
    return urlencode(sorted((k, v) for k, v in params.items() if v))


# -- campaigns ------------------------------------------------------------------------------------


@pytest.mark.fuzz
@given(request=custom_requests(), regex_escape_values=st.booleans())
def test_fuzz_custom_metrics_requests(
    adapters: dict[bool, Adapter], request: dict[str, Any], regex_escape_values: bool
) -> None:
    check_custom_request(adapters[regex_escape_values], **request)


@SMALL_SAMPLE
@given(request=custom_requests(), regex_escape_values=st.booleans())
def test_custom_metrics_requests_sample(
    adapters: dict[bool, Adapter], request: dict[str, Any], regex_escape_values: bool
) -> None:
    check_custom_request(adapters[regex_escape_values], **request)


def check_custom_request(
    adapter: Adapter,
    namespace: str,
    resource: str,
    names: list[str],
    wildcard: bool,
    metric: str,
    label_selector: str,
    metric_selector: str,
    namespace_form: bool,
    accept: str | None,
) -> None:
    adapter.objects.listed = names if wildcard else []
    name = "*" if wildcard else names[0]
    info = adapter.mapper.resolve(GroupResource.parse(resource).group, GroupResource.parse(resource).resource)
    assert info is not None
    if namespace_form:
        segments = ["namespaces", namespace, "metrics", metric]
    elif info.namespaced:
        segments = ["namespaces", namespace, resource, name, metric]
    else:
        segments = [resource, name, metric]
    query = go_query({"labelSelector": label_selector, "metricLabelSelector": metric_selector})
    url = (
        "/apis/custom.metrics.k8s.io/v1beta2/"
        + "/".join(map(go_segment, segments))
        + (f"?{query}" if query else "")
    )
    request, promql = adapter.get(url, accept)
    check_authorization_attributes(request, segments)
    event("custom: refused" if promql is None else "custom: queried")
    if promql is None:
        return

    # Accepted: rebuild the same request with placeholders and compare.
    object_names = [namespace] if namespace_form else (names if wildcard else [name])
    name_table = placeholders(object_names, "n")
    namespace_table = placeholders([namespace], "ns")
    value_table = placeholders(selector_values(metric_selector), "v")
    target = adapter.mapper.resolve("", "namespaces") if namespace_form else info
    assert target is not None
    reference = adapter.registry.custom_query(
        metric,
        target,
        None if namespace_form or not info.namespaced else namespace_table[namespace],
        [name_table[n] for n in object_names],
        mapped_requirements(metric_selector, value_table),
    ).promql
    originals = {v: k for table in (name_table, namespace_table, value_table) for k, v in table.items()}
    check_same_shape(promql, reference, originals, adapter.registry.regex_escape_values)


def check_authorization_attributes(request: web.Request, segments: list[str]) -> None:
    """The SubjectAccessReview for the same request names exactly what was asked for."""
    query = {key: request.query.getall(key) for key in request.query}
    attributes = request_attributes(request.method, request.path, query)
    json.dumps(access_review_spec(UserInfo("u"), attributes))
    if any("/" in s for s in segments) or any(s in {"", ".", ".."} for s in segments):
        return  # such segments are refused by client-go; the decoded path has another shape
    assert attributes.api_group == "custom.metrics.k8s.io" and attributes.verb == "get"
    if segments[0] == "namespaces":
        assert attributes.namespace == segments[1]
        if segments[2:3] == ["metrics"]:
            assert (attributes.resource, attributes.name, attributes.subresource) == (
                "metrics",
                segments[3],
                "",
            )
            return
        segments = segments[2:]
    assert (attributes.resource, attributes.name, attributes.subresource) == tuple(segments)


@pytest.mark.fuzz
@given(
    namespace=namespaces,
    metric=st.just("queue_depth") | st.just("queue_depth") | weird_text,
    label_selector=selectors(),
    regex_escape_values=st.booleans(),
)
def test_fuzz_external_metrics_requests(
    adapters: dict[bool, Adapter], namespace: str, metric: str, label_selector: str, regex_escape_values: bool
) -> None:
    check_external_request(adapters[regex_escape_values], namespace, metric, label_selector)


@SMALL_SAMPLE
@given(
    namespace=namespaces,
    metric=st.just("queue_depth") | st.just("queue_depth") | weird_text,
    label_selector=selectors(),
    regex_escape_values=st.booleans(),
)
def test_external_metrics_requests_sample(
    adapters: dict[bool, Adapter], namespace: str, metric: str, label_selector: str, regex_escape_values: bool
) -> None:
    check_external_request(adapters[regex_escape_values], namespace, metric, label_selector)


def check_external_request(adapter: Adapter, namespace: str, metric: str, label_selector: str) -> None:
    query = go_query({"labelSelector": label_selector})
    url = f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{go_segment(namespace)}/{go_segment(metric)}"
    request, promql = adapter.get(url + (f"?{query}" if query else ""))
    attributes = request_attributes("GET", request.path, {k: request.query.getall(k) for k in request.query})
    # `namespaces/<ns>/status|finalize` is the Namespace's subresource to the apiserver's RequestInfo.
    odd_metric = metric in {"", ".", "..", "status", "finalize"}
    if "/" not in namespace + metric and namespace not in {"", ".", ".."} and not odd_metric:
        assert (attributes.verb, attributes.namespace, attributes.resource) == ("list", namespace, metric)
    event("external: refused" if promql is None else "external: queried")
    if promql is None:
        return
    namespace_table = placeholders([namespace], "ns")
    value_table = placeholders(selector_values(label_selector), "v")
    try:
        reference = adapter.registry.external_query(
            metric, namespace_table[namespace], mapped_requirements(label_selector, value_table)
        )
    except (InvalidSelectorError, MetricNotFoundError, QueryBuildError) as err:
        raise AssertionError(f"accepted {url!r} but its placeholder twin fails: {err}") from err
    originals = {v: k for table in (namespace_table, value_table) for k, v in table.items()}
    check_same_shape(promql, reference, originals, adapter.registry.regex_escape_values)


HEADERS = RequestHeaderConfig(
    ca=CertificateAuthority.from_pem(TestCA("fuzz-ca").pem),
    allowed_names=(),
    username_headers=("X-Remote-User",),
    uid_headers=("X-Remote-Uid",),
    group_headers=("X-Remote-Group",),
    extra_prefixes=("X-Remote-Extra-",),
)
header_names = st.sampled_from(
    ["X-Remote-User", "x-remote-group", "X-REMOTE-GROUP", "X-Remote-Uid"]
) | st.builds(
    "X-Remote-Extra-{}".format, st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=12)
)


def check_identity_headers(headers: list[tuple[str, str]], path: str) -> None:
    user = user_from_headers(CIMultiDict(headers), HEADERS)
    sent = [value for name, value in headers if name.lower() == "x-remote-user"]
    if user is None:
        assert not sent or sent[0] == ""  # like Go's Header.Get, only the first line counts
        return
    assert user.name == sent[0]
    assert all(group for group in user.groups)
    attributes = request_attributes("GET", path, {})
    body = json.loads(json.dumps(access_review_spec(user.with_authenticated_group(), attributes)))
    assert body["user"] == user.name and body["groups"][-1] == "system:authenticated"
    message = forbidden(user.name, attributes, "")["message"]
    assert "<" not in message and ">" not in message


@pytest.mark.fuzz
@given(headers=st.lists(st.tuples(header_names, header_values), max_size=8), path=weird_text.map("/".__add__))
def test_fuzz_identity_headers(headers: list[tuple[str, str]], path: str) -> None:
    check_identity_headers(headers, path)


@SMALL_SAMPLE
@given(headers=st.lists(st.tuples(header_names, header_values), max_size=8), path=weird_text.map("/".__add__))
def test_identity_headers_sample(headers: list[tuple[str, str]], path: str) -> None:
    check_identity_headers(headers, path)


def test_numeric_metric_selector_is_a_bad_request(adapters: dict[bool, Adapter]) -> None:
    """Found by this campaign: `k>0` parses as a selector but has no LabelSelector form (was a 500)."""
    url = "/apis/custom.metrics.k8s.io/v1beta2/nodes/n1/node_load1?metricLabelSelector=app%3E0"
    _, promql = adapters[False].get(url)
    assert promql is None


def test_the_checker_notices_a_shape_change() -> None:
    """The property is not vacuous: an unescaped value would be caught."""
    safe = 'sum(rate(x{namespace="ns0",pod="n0"}[5m])) by (pod)'
    injected = 'sum(rate(x{namespace="a",pod!=""} or vector(1) or x{pod="n0"}[5m])) by (pod)'
    for regex_escape_values in (False, True):
        with pytest.raises(AssertionError, match="shape changed"):
            check_same_shape(injected, safe, {"ns0": 'a",pod!="'}, regex_escape_values)
    names = {"n0": "a.b", "n1": "c"}
    with pytest.raises(AssertionError, match="matches more"):
        check_same_shape('x{pod=~"a.b|c"}', 'x{pod=~"n0|n1"}', names, regex_escape_values=True)
    check_same_shape('x{pod=~"a\\\\.b|c"}', 'x{pod=~"n0|n1"}', names, regex_escape_values=True)
    # prometheus-adapter's rendering: the names as they are, and nothing else.
    check_same_shape('x{pod=~"a.b|c"}', 'x{pod=~"n0|n1"}', names, regex_escape_values=False)
    with pytest.raises(AssertionError, match="stands for"):
        check_same_shape('x{pod=~"a.b|c|.*"}', 'x{pod=~"n0|n1"}', names, regex_escape_values=False)


# -- direct PromQL: the autoscaler's confinement at the limits ------------------------------------
#
# A tenant writes the whole query. The property: `confine` either refuses it (QueryRefused, nothing else:
# no Rust panic, no ValueError or OverflowError of the parser's binding, no crash of the process), or
# prints a query that is confined (every selector reads exactly its namespace), a fixed point of
# `confine`, within the limits (`@` and durations), and one the real Prometheus parses.

# `@` times at and around every limit: the binding's (0, 9999-12-31), Prometheus' int64 milliseconds
# (±9223372036854775.807 s) and int64 seconds (±2^63), numbers the float type cannot hold.
AT_TIMES = st.sampled_from(
    [
        "0", "-0", "0.0004", "-0.0004", "-0.0005", "-1", "1", "1e3", "0x10", "1700000000.123",
        "253402300799.999", "253402300799.9995", "253402300800", "9223372036854775.807",
        "9223372036854775.808", "-9223372036854775.808", "9223372036854775807", "-9223372036854775808",
        "9.3e18", "1e30", "-1e30", "99999999999999", "-99999999999999", "NaN", "Inf", "-Inf", "1e308",
        "1e309", "4.9e-324",
    ]
) | st.floats().map(repr) | st.integers(-(2**65), 2**65).map(str)  # fmt: skip
UNITS = st.sampled_from(["ms", "s", "m", "h", "d", "w", "y"])
# Durations at and around Go's time.Duration (2^63-1 ns) and beyond what the binding's timedelta holds.
DURATIONS = st.sampled_from(
    [
        "1ms", "1s", "5m", "1h", "1d", "1w", "1y", "292y", "293y", "106751d", "106752d", "15250w",
        "15251w", "2562047h", "2562048h", "9223372036854ms", "9223372036855ms", "9223372036s",
        "9223372037s", "0s", "1y1d", "292y24w", "2739726y", "2739727y", "99999999999y",
        "18446744073709551615ms", "5", "1.5m",
    ]
) | st.builds("{}{}".format, st.integers(0, 2**66), UNITS)  # fmt: skip
NUMBERS = st.sampled_from(
    ["0", "-0", "1e308", "1e309", "-1e309", "0x7fffffffffffffff", "NaN", "Inf", "-Inf", "4.9e-324", "1e-400"]
) | st.floats().map(repr)
TENANT = "team-a"
tenant_selectors = st.sampled_from(
    [
        "x",
        "http_requests_total",
        'x{job="a"}',
        f'x{{namespace="{TENANT}"}}',
        'x{namespace="team-b"}',
        "{a=~'.+'}",
    ]
)


@st.composite
def modifiers(draw: st.DrawFn) -> str:
    """An `@`, an offset, both (in either order), or neither."""
    at = f" @ {draw(AT_TIMES)}"
    offset = f" offset {draw(st.sampled_from(['', '-']))}{draw(DURATIONS)}"
    return draw(st.sampled_from(["", at, offset, at + offset, offset + at]))


def limit_leaves() -> st.SearchStrategy[str]:
    selector = st.builds("{}{}".format, tenant_selectors, modifiers())
    ranged = st.builds("rate({}[{}]{})".format, tenant_selectors, DURATIONS, modifiers())
    return st.one_of(selector, ranged, NUMBERS.map("vector({})".format))


def limit_extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    subquery = st.builds(
        "max_over_time(({})[{}:{}]{})".format, inner, DURATIONS, st.just("") | DURATIONS, modifiers()
    )
    return st.one_of(
        subquery,
        st.builds("{} {} {}".format, inner, st.sampled_from(["+", "/", "or", "and"]), inner),
        st.builds("({}) * {}".format, inner, NUMBERS),
        st.builds("sum by (pod) ({})".format, inner),
        st.builds("-({})".format, inner),
    )


@st.composite
def limit_queries(draw: st.DrawFn) -> str:
    query = draw(st.recursive(limit_leaves(), limit_extend, max_leaves=5))
    # Nesting around the limits of depth and length (module confine.py: the parser recurses on the stack).
    depth = draw(st.sampled_from([0] * 20 + [1, 30, 62, 63, 64, 65, 2000, 4090, 8200]))
    wrap = draw(st.sampled_from(["-", "(", "abs("]))
    if depth and wrap == "-":
        return "-" * depth + f"({query})"
    return wrap * depth + query + ")" * depth


def prometheus_parse_error(url: str, promql: str) -> str | None:
    """What the real Prometheus says is wrong with the query's syntax or limits, None when it parses it
    (its /api/v1/format_query parses and prints, never evaluates)."""
    params = urlencode({"query": promql})
    try:
        with urllib.request.urlopen(f"{url}/api/v1/format_query", params.encode(), timeout=10) as response:
            body = json.load(response)
    except urllib.error.HTTPError as refused:
        body = json.load(refused)
    error = str(body.get("error", ""))
    return error if body.get("errorType") == "bad_data" and "parse error" in error else None


@pytest.fixture(scope="module")
def empty_prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real Prometheus that scrapes nothing: the judge of what it parses."""
    sd = tmp_path_factory.mktemp("prometheus") / "sd.json"
    sd.write_text("[]")
    with PrometheusProcess(sd) as process:
        yield process.url


def check_confinement(query: str, prometheus_url: str) -> None:
    try:
        confined = confine(query, TENANT)
    except QueryRefused as refused:
        event("refused: " + re.sub(r"\d+", "N", str(refused).split(":")[0])[:48])
        return
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as err:  # a panic of the parser (a BaseException) is the bug this looks for
        raise AssertionError(f"confine({query!r}) raised {type(err).__name__}: {err}") from None
    event("confined")
    assert len(query) <= MAX_QUERY_LENGTH
    assert_confined(query, confined, TENANT)
    assert confine(confined, TENANT) == confined  # a fixed point: nothing left to confine or clamp

    def within_limits(expr: pp.Expr) -> None:
        at = getattr(expr, "at", None)
        if isinstance(at, pp.AtModifier) and at.type == pp.AtModifierType.At:
            assert at.at is not None and 0 <= at.at.timestamp() < 253402300800
        for duration in (getattr(expr, name, None) for name in ("offset", "range", "step")):
            assert duration is None or abs(duration) <= MAX_DURATION

    pp.walk(pp.parse(confined), pre_visit=within_limits)
    assert prometheus_parse_error(prometheus_url, confined) is None, confined


@pytest.mark.fuzz
@given(query=limit_queries())
def test_fuzz_direct_query_confinement(empty_prometheus: str, query: str) -> None:
    check_confinement(query, empty_prometheus)


@settings(max_examples=50)
@given(query=limit_queries())
def test_direct_query_confinement_sample(empty_prometheus: str, query: str) -> None:
    check_confinement(query, empty_prometheus)
