"""`python -m adapter explain --config FILE [--prometheus-url URL] [-o text|json] PATH`.

With `--prometheus-url` the rules' series are listed as the daemon lists them and the rendered query is
run; without it each rule is tried on the series it would need (adapter.explain.assumed), and nothing is
run. Resources are those of a common cluster (the built-in table): the CLI asks no API server, so a
label-selector read of a namespaced resource is shown with its namespace-wide query, and a metrics.k8s.io
list (whose queries name every pod or node it lists) shows no PromQL; a named pod or node does.

Exit status: 0 when explained (served or not), 1 when Prometheus could not be asked (a series call or
the query failed; the explanation says which), 2 for a bad flag, config file or path.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from typing import NoReturn

import uvloop
import yaml

from adapter.config import AdapterConfig, ConfigError, parse_config, read_config_text
from adapter.explain.explanation import Explanation, assumed_discovery, explain
from adapter.explain.live import discover, with_result, with_usage
from adapter.explain.paths import ExplainPathError, MetricRead, ResourceRead, parse_api_path
from adapter.explain.render import as_json, as_text
from adapter.explain.resource import ResourceExplanation, explain_resource
from adapter.flags import PROG as ADAPTER_PROG
from adapter.flags import add_regex_escape_flag, explicit_bools
from adapter.naming.resources import BUILTIN_RESOURCES, ResourceMapper, StaticResourceMapper
from adapter.objects import CachedObject
from adapter.prometheus import PrometheusClient, PrometheusSettings
from shared.cli import OneLineErrorParser, go_duration, http_url, usage_error
from shared.clock import LOOP_CLOCK
from shared.logging import configure_logging

PROG = f"{ADAPTER_PROG} explain"
# Where the adapter's ConfigMap keeps the rules file (the Deployment mounts it as config.yaml).
CONFIGMAP_KEY = "config.yaml"
# The daemon's default look-back: --metrics-max-age 0 means the relist interval, 10m by default.
DEFAULT_MAX_AGE = 600.0


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(
        prog=PROG,
        description="Why a metric is served or not: the rule that serves it (or why none does), the "
        "series found, the PromQL and, with --prometheus-url, its result.",
    )
    parser.add_argument(
        "path",
        help="the API path as the HPA (or kubectl top) asks it, e.g. "
        "'/apis/custom.metrics.k8s.io/v1beta1/namespaces/default/pods/*/http_requests?labelSelector=app%%3Dweb'"
        " or '/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/web-1'",
    )
    parser.add_argument(
        "--config",
        required=True,
        help="the adapter's rules file, or a ConfigMap holding it under data.config.yaml "
        "(manifests/adapter-config.yaml)",
    )
    parser.add_argument(
        "--prometheus-url", type=http_url, help="list series and run the query here (default: neither)"
    )
    parser.add_argument(
        "--metrics-max-age",
        type=go_duration(1.0),
        default=DEFAULT_MAX_AGE,
        help="look-back of series discovery, as the adapter's flag (default 10m)",
    )
    add_regex_escape_flag(parser)
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text", help="output format")
    return parser


async def _explain_live(
    args: argparse.Namespace, config: AdapterConfig, read: MetricRead, mapper: ResourceMapper
) -> tuple[Explanation, bool]:
    """The explanation with discovery and result from Prometheus, and whether Prometheus answered all."""
    prometheus = PrometheusClient(PrometheusSettings(url=args.prometheus_url))
    try:
        discovery = await discover(prometheus, config, args.metrics_max_age, LOOP_CLOCK)
        explanation = explain(
            config, mapper, args.path, read, discovery, regex_escape_values=args.regex_escape_values
        )
        explanation = await with_result(prometheus, explanation, read, mapper)
    finally:
        await prometheus.close()
    answered = explanation.result is None or explanation.result.answered
    return explanation, answered and not discovery.errors


async def _usage_live(args: argparse.Namespace, explanation: ResourceExplanation) -> ResourceExplanation:
    prometheus = PrometheusClient(PrometheusSettings(url=args.prometheus_url))
    try:
        return await with_usage(prometheus, explanation, time.time())
    finally:
        await prometheus.close()


def _explain_resource(
    args: argparse.Namespace, config: AdapterConfig, read: ResourceRead, mapper: ResourceMapper
) -> tuple[ResourceExplanation, bool]:
    """A metrics.k8s.io read: a named object is known; the objects of a list only the API server knows."""
    objects = [CachedObject(read.namespace, read.name, {})] if read.name else None
    explanation = explain_resource(config, mapper, args.path, read, objects, args.regex_escape_values)
    if not args.prometheus_url:
        return explanation, True
    explanation = uvloop.run(_usage_live(args, explanation))
    return explanation, explanation.result is None or explanation.result.answered


def load_rules(path: str) -> AdapterConfig:
    """The rules file the daemon reads, or the ConfigMap it is mounted from (what manifests/ ships): its
    `data` key CONFIGMAP_KEY, whose rules keep their line numbers in the file. Raises ConfigError."""
    text = read_config_text(path)
    try:
        document = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        document = None  # parse_config says where
    value = _configmap_rules(document) if isinstance(document, yaml.MappingNode) else None
    if value is None:
        return parse_config(text, path)
    if not isinstance(value, yaml.ScalarNode):
        raise ConfigError(f"{path}: a ConfigMap without data.{CONFIGMAP_KEY}")
    # A block scalar's text starts on the line after its `|`: blank lines before it keep the numbers.
    padding = "\n" * (value.start_mark.line + 1) if value.style in ("|", ">") else ""
    return parse_config(padding + value.value, f"{path} data.{CONFIGMAP_KEY}")


def _configmap_rules(document: yaml.MappingNode) -> yaml.Node | None:
    """The node of `data.<CONFIGMAP_KEY>` in a ConfigMap (a ScalarNode, or whatever is there; the
    document itself when that key is missing); None when the document is no ConfigMap."""
    fields = {key.value: value for key, value in document.value if isinstance(key, yaml.ScalarNode)}
    kind = fields.get("kind")
    if not (isinstance(kind, yaml.ScalarNode) and kind.value == "ConfigMap"):
        return None
    data = fields.get("data")
    if isinstance(data, yaml.MappingNode):
        for key, value in data.value:
            if isinstance(key, yaml.ScalarNode) and key.value == CONFIGMAP_KEY:
                return value
    return document


def main(argv: Sequence[str]) -> NoReturn:
    parser = build_parser()
    args = parser.parse_args(explicit_bools(parser, argv))  # `--regex-escape-values PATH`: PATH is the path
    configure_logging("warning")  # the explanation is the output, not the provider's debug lines
    explanation: Explanation | ResourceExplanation
    try:
        config = load_rules(args.config)
        read = parse_api_path(args.path)
        mapper = StaticResourceMapper(BUILTIN_RESOURCES)
        if isinstance(read, ResourceRead):
            explanation, ok = _explain_resource(args, config, read, mapper)
        elif args.prometheus_url:
            explanation, ok = uvloop.run(_explain_live(args, config, read, mapper))
        else:
            discovery = assumed_discovery(config, read, mapper)
            explanation = explain(
                config, mapper, args.path, read, discovery, regex_escape_values=args.regex_escape_values
            )
            ok = True
    except ConfigError as err:
        usage_error(PROG, f"--config: {err}")
    except ExplainPathError as err:
        usage_error(PROG, f"path: {err}")
    if args.output == "json":
        sys.stdout.write(json.dumps(as_json(explanation), indent=2) + "\n")
    else:
        sys.stdout.write(as_text(explanation))
    sys.exit(0 if ok else 1)
