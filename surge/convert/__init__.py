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
  syncPeriodSeconds, `fallback`, `advanced.horizontalPodAutoscalerConfig.behavior`, and the pause
  annotations (`autoscaling.keda.sh/paused(-replicas)` as `autoscaling.surge.dev/paused(-replicas)`);
- `cooldownPeriod`, which KEDA applies only to the last step to zero, as the scale-down stabilization
  window when the object scales to zero (unless the behavior sets one; Surge goes to zero after that
  window, like any scale-down, so it also paces the steps above). Without scale to zero KEDA ignores it,
  and so does the conversion.

Dropped, because Surge does the same on its own terms: the prometheus trigger's connection settings
(`serverAddress`, `namespace`, `customHeaders`, `authModes`, `unsafeSsl`, `authenticationRef`: the autoscaler
queries its own `--prometheus-url`, confined to the object's namespace), `ignoreNullValues`, `metricName`
(deprecated; it names the metric when the trigger has no `name`), `useCachedMetrics`,
`initialCooldownPeriod`, `advanced.restoreToOriginalReplicaCount` and KEDA's ownership annotations.
With `minReplicaCount: 0` each Prometheus trigger gets KEDA's default activation threshold (0) unless it
has one, so the target is at zero exactly when KEDA would put it there; a cron-only object at 0 gets a
constant `vector(0)` metric, so that the schedules alone decide. No input value is pasted into PromQL:
a trigger's query is kept as written (and checked as the autoscaler will, confined to the namespace), the
constant is the only query the conversion writes.

Every converted object is checked as the API server and the autoscaler check it (the CRD's fields and
types, then the autoscaler's own rules, `autoscaler/core/validation.py`), so what is printed is accepted.
Anything that cannot be expressed is refused: one line on stderr naming every problem of every object,
and exit status 2 (docs/deploy.md section 16: keep those on KEDA behind the multiplexer).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import yaml

from surge.convert.adapter_config import configmap_config, is_adapter_config
from surge.convert.adapter_rules import convert_config
from surge.convert.horizontal_autoscaler import convert
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
        help="the HPAs, ScaledObjects or prometheus-adapter config (YAML or JSON)",
    )
    p.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> int:
    try:
        with open(args.filename, encoding="utf-8") as file:
            text = file.read()
        documents = expand_lists([d for d in yaml.safe_load_all(text) if d is not None])
    except OSError as err:
        print(f"surge convert: -f: cannot read {args.filename}: {err.strerror}", file=sys.stderr)
        return 2
    except UnicodeDecodeError:
        print(f"surge convert: -f: {args.filename} is not UTF-8 text", file=sys.stderr)
        return 2
    except yaml.YAMLError as err:
        print(f"surge convert: -f: {args.filename} is not YAML: {one_line(str(err))}", file=sys.stderr)
        return 2
    except (RecursionError, ConvertError) as err:
        # PyYAML recurses once per nesting level: a hostile file can nest deeper than the stack.
        problem = "nested too deeply" if isinstance(err, RecursionError) else str(err)
        print(f"surge convert: -f: {args.filename}: {problem}", file=sys.stderr)
        return 2
    if not documents:
        print(f"surge convert: -f: {args.filename} holds no object", file=sys.stderr)
        return 2
    if not within(documents, MAX_VALUES):
        print(
            f"surge convert: -f: {args.filename}: more than {MAX_VALUES} values once its YAML aliases are "
            "expanded",
            file=sys.stderr,
        )
        return 2
    converted: list[dict[str, Any]] = []
    notes: list[str] = []
    problems: list[str] = []
    names = Names()
    for i, document in enumerate(documents):
        try:
            objects, said = _converted(document, args.filename, text, len(documents) == 1, names)
        except ConvertError as err:
            problems.append(f"{_named(document, i)}: {err}" if len(documents) > 1 else str(err))
        else:
            converted += objects
            notes += said
    if problems:
        print(f"surge convert: {one_line('; '.join(problems))}", file=sys.stderr)
        return 2
    for note in notes:
        print(f"surge convert: {one_line(note)}", file=sys.stderr)
    sys.stdout.write(to_yaml(converted))
    return 0


def _converted(
    document: Any, filename: str, text: str, alone: bool, names: Names
) -> tuple[list[dict[str, Any]], list[str]]:
    """The objects for one document, and what they serve differently (a config's rules only)."""
    if is_adapter_config(document):
        if not alone:
            raise ConvertError("a prometheus-adapter config must be the only document of its file")
        config = convert_config(text, filename, names)
        return config.objects, config.notes
    config_text = configmap_config(document)
    if config_text is not None:
        meta = document.get("metadata")
        meta = meta if isinstance(meta, dict) else {}
        where = "/".join(str(meta[key]) for key in ("namespace", "name") if meta.get(key)) or "(no name)"
        config = convert_config(config_text, f"{filename}: ConfigMap {where} data.config.yaml", names)
        return config.objects, config.notes
    return [convert(document)], []


def _named(document: Any, index: int) -> str:
    meta = document.get("metadata") if isinstance(document, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    kind = document.get("kind") if isinstance(document, dict) else None
    return f"object {index + 1} ({kind or '?'} {name})" if isinstance(name, str) else f"object {index + 1}"
