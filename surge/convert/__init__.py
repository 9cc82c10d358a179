"""`surge convert -f FILE`: HPAs and KEDA ScaledObjects as HorizontalAutoscalers, and the rules of a
prometheus-adapter config as MetricRules and ClusterMetricRules.

Prints the objects (YAML) on stdout, ready for `kubectl apply -f -`. FILE is YAML or JSON, one or more
documents (empty ones skipped), a `List` of objects too; or a prometheus-adapter config file (its only
document), or the ConfigMap holding one in `data.config.yaml`, as the prometheus-adapter chart renders
it: its rules become MetricRules and ClusterMetricRules (surge/convert/adapter_rules.py; what serves
differently is one line each on stderr, docs/tenant-rules.md, "Moving rules out of the config file").
What carries over of HPAs and ScaledObjects:

- an HPA of autoscaling/v2 or v2beta2: its spec, with the settings of its `autoscaling.surge.dev/*`
  annotations as spec fields; of autoscaling/v2beta1 and v1: the same spec, as the API server converts
  them to v2 (v1's `targetCPUUtilizationPercentage`, and the v2 metrics and behavior that v1 keeps in its
  `autoscaling.alpha.kubernetes.io/metrics` and `/behavior` annotations);
- `prometheus` triggers: direct PromQL External metrics `surge-promql:<name>` (`query`; `threshold` as the
  target, AverageValue unless `metricType` says Value, as in KEDA; `activationThreshold`);
- `cpu` and `memory`: Resource metrics (ContainerResource with `containerName`), of the `metricType` or the
  deprecated `metadata.type`;
- `cron`: schedules (`start` as the cron, the time to `end` as their duration, `desiredReplicas`);
- `minReplicaCount` and `maxReplicaCount` (`idleReplicaCount: 0` means minReplicas 0), `pollingInterval` as
  syncPeriodSeconds, `fallback`, `advanced.horizontalPodAutoscalerConfig.behavior`, the scaling
  annotations (`autoscaling.keda.sh/paused`, `paused-scale-in`, `paused-scale-out`, `force-activation`
  read with Go's ParseBool, `paused-replicas`) as Surge's, and at zero `cooldownPeriod` (default 300) and
  `initialCooldownPeriod` as `cooldownPeriodSeconds` and `initialCooldownPeriodSeconds`;
- `ignoreNullValues` (KEDA's default true) as the direct metric's `absentValue: "0"`;
- `advanced.scalingModifiers` as `spec.formula` over the named triggers' metrics
  (surge/convert/keda_formula.py).

Whatever the HorizontalAutoscaler does differently from its source is one stderr line, starting with the
source's kind, namespace and name (docs/convert.md has the table): the prometheus trigger's connection
(`serverAddress`, `customHeaders`, `authenticationRef`, the Thanos `namespace`: the query runs on the
autoscaler's `--prometheus-url`, and the line gives the MetricBackend and MetricRule that keep that server),
selectors that the namespace confinement narrows, a pacing that differs. `--strict` makes any such line
an error. An HPA gets a reminder to delete it, with its `kubectl delete hpa` command. With
`minReplicaCount: 0` each Prometheus trigger gets KEDA's default activation threshold (0) unless it has
one; a cron-only object at 0 gets a constant `vector(0)` metric, so that the schedules alone decide. No
input value is pasted into PromQL: a trigger's query is kept as written (and checked as the autoscaler
will, confined to the namespace), the constant is the only query the conversion writes.

`-f DIR` (its *.yaml, *.yml and *.json files) and `-f -` (stdin) convert each object on its own: the
converted are printed, a table on stderr says what became of each, exit 2 if any was refused. One file is
all or nothing.

Every converted object is checked as the API server and the autoscaler check it (the CRD's fields and
types, then the autoscaler's own rules, `autoscaler/core/validation.py`), so what is printed is accepted.
Anything that cannot be expressed is refused: one line on stderr naming every problem of every object,
and exit status 2 (docs/deploy.md section 16: keep those on KEDA behind the multiplexer).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from typing import Any

import yaml

from surge.convert.adapter_config import configmap_config, is_adapter_config
from surge.convert.adapter_rules import convert_config
from surge.convert.horizontal_autoscaler import convert, converted, source_name
from surge.convert.inputs import Source, is_bulk, sources
from surge.convert.problems import ConvertError, one_line
from surge.convert.rule_names import Names
from surge.convert.yamlio import MAX_VALUES, expand_lists, to_yaml, within

NAME = "convert"
HELP = "HPAs and KEDA ScaledObjects as HorizontalAutoscalers, prometheus-adapter rules as MetricRules"


def register(subcommands: Any) -> None:
    p = subcommands.add_parser(NAME, help=HELP, description=__doc__.split("\n\n", 1)[0])
    p.add_argument(
        "-f",
        "--filename",
        required=True,
        metavar="FILE",
        help="the HPAs, ScaledObjects or prometheus-adapter config (YAML or JSON): a file, a directory (its "
        "*.yaml, *.yml and *.json files) or - (standard input)",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="refuse to print anything when any object would behave differently from its source",
    )
    p.add_argument(
        "--prometheus-url",
        metavar="URL",
        help="the autoscaler's --prometheus-url: a prometheus trigger whose serverAddress is this one (and "
        "sends no headers) runs where it did, without a line",
    )
    p.set_defaults(run=_run)


@dataclass
class Outcome:
    """What became of one input object (or one unreadable file)."""

    name: str
    objects: list[dict[str, Any]] = field(default_factory=list)
    changes: list[str] = field(default_factory=list)  # lines, each whole
    reminders: list[str] = field(default_factory=list)
    refusal: str | None = None


def _documents(source: Source) -> list[Any]:
    """The documents of a source; ConvertError says why there are none to convert."""
    if source.text is None:
        raise ConvertError(source.problem)
    try:
        documents = expand_lists([d for d in yaml.safe_load_all(source.text) if d is not None])
    except yaml.YAMLError as err:
        raise ConvertError(f"{source.name} is not YAML: {one_line(str(err))}") from None
    except RecursionError:
        # PyYAML recurses once per nesting level: a hostile file can nest deeper than the stack.
        raise ConvertError(f"{source.name}: nested too deeply") from None
    except ConvertError as err:
        raise ConvertError(f"{source.name}: {err}") from None
    if not documents:
        raise ConvertError(f"{source.name} holds no object")
    if not within(documents, MAX_VALUES):
        raise ConvertError(f"{source.name}: more than {MAX_VALUES} values once its YAML aliases are expanded")
    return documents


def _outcomes(source: Source, names: Names, prometheus_url: str | None) -> list[Outcome]:
    try:
        documents = _documents(source)
    except ConvertError as err:
        return [Outcome(f"file {source.name}", refusal=f"-f: {err}")]
    outcomes = []
    for i, document in enumerate(documents):
        name = source_name(document) if isinstance(document, dict) else f"object {i + 1} of {source.name}"
        try:
            outcome = _converted(document, source, len(documents) == 1, names, prometheus_url)
        except ConvertError as err:
            reason = f"{_named(document, i)}: {err}" if len(documents) > 1 else str(err)
            outcome = Outcome(name, refusal=reason)
        outcome.name = outcome.name or name
        outcomes.append(outcome)
    return outcomes


def _run(args: argparse.Namespace) -> int:
    names = Names()
    outcomes = [o for s in sources(args.filename) for o in _outcomes(s, names, args.prometheus_url)]
    bulk = is_bulk(args.filename)
    if not outcomes:
        print(f"surge convert: -f: {args.filename} holds no *.yaml, *.yml or *.json file", file=sys.stderr)
        return 2
    refused = [o for o in outcomes if o.refusal is not None]
    if refused and not bulk:
        # One file: all or nothing, in one line.
        print(f"surge convert: {one_line('; '.join(str(o.refusal) for o in refused))}", file=sys.stderr)
        return 2
    kept = [o for o in outcomes if o.refusal is None]
    for outcome in kept:
        for line in outcome.changes + outcome.reminders:
            print(line, file=sys.stderr)
    changed = sum(len(o.changes) for o in kept)
    if bulk:
        _table(outcomes)
    if args.strict and changed:
        print(
            f"surge convert: --strict: {changed} change(s) of behaviour (above); nothing printed",
            file=sys.stderr,
        )
        return 2
    sys.stdout.write(to_yaml([obj for o in kept for obj in o.objects]))
    return 2 if refused else 0


def _table(outcomes: list[Outcome]) -> None:
    """One row per object: converted, converted with N changes, or refused and why."""
    width = max(len(o.name) for o in outcomes)
    print(f"{'OBJECT':<{width}}  RESULT", file=sys.stderr)
    for o in outcomes:
        if o.refusal is not None:
            result = f"refused ({one_line(o.refusal)})"
        elif o.changes:
            result = f"converted, {len(o.changes)} warning{'s' if len(o.changes) > 1 else ''}"
        else:
            result = "converted"
        print(f"{o.name:<{width}}  {result}", file=sys.stderr)


def _converted(
    document: Any, source: Source, alone: bool, names: Names, prometheus_url: str | None
) -> Outcome:
    """The objects for one document, and what they serve differently."""
    text = str(source.text)
    if is_adapter_config(document):
        if not alone:
            raise ConvertError("a prometheus-adapter config must be the only document of its file")
        config = convert_config(text, source.name, names)
        notes = [f"surge convert: {one_line(n)}" for n in config.notes]
        return Outcome(f"prometheus-adapter config {source.name}", config.objects, notes)
    config_text = configmap_config(document)
    if config_text is not None:
        where = source_name(document).removeprefix("ConfigMap ")
        config = convert_config(config_text, f"{source.name}: ConfigMap {where} data.config.yaml", names)
        return Outcome("", config.objects, [f"surge convert: {one_line(n)}" for n in config.notes])
    conversion = converted(document, prometheus_url)
    return Outcome("", [conversion.object], conversion.changes, conversion.reminders)


def _named(document: Any, index: int) -> str:
    meta = document.get("metadata") if isinstance(document, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    kind = document.get("kind") if isinstance(document, dict) else None
    return f"object {index + 1} ({kind or '?'} {name})" if isinstance(name, str) else f"object {index + 1}"


__all__ = ["ConvertError", "convert", "converted", "to_yaml"]
