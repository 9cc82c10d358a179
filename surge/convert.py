"""`surge convert -f FILE`: HPAs and KEDA ScaledObjects as HorizontalAutoscalers.

Prints the HorizontalAutoscalers (YAML) on stdout, ready for `kubectl apply -f -`. FILE is YAML or JSON,
one or more documents (empty ones skipped), a `List` of objects too. What carries over:

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
import json
import re
import reprlib
import sys
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import yaml

from autoscaler.core.schedules import check_cron, first_fire_after, time_zone
from autoscaler.core.types import (
    DIRECT_METRIC_PREFIX,
    FALLBACK_BEHAVIORS,
    PAUSED_ANNOTATION,
    PAUSED_REPLICAS_ANNOTATION,
    Schedule,
)
from autoscaler.sources import (
    ACTIVATION_ANNOTATION,
    BURST_ANNOTATION,
    CRD_SOURCE,
    FALLBACK_ANNOTATION,
    PREDICTIVE_ANNOTATION,
    QUERIES_ANNOTATION,
    SCHEDULES_ANNOTATION,
    SYNC_PERIOD_ANNOTATION,
)
from shared.promql.confine import QueryRefused, check, confine

NAME = "convert"
HELP = "an autoscaling/v2 HPA or a KEDA ScaledObject as a HorizontalAutoscaler"
API_VERSION = "autoscaling.surge.dev/v1alpha1"
HPA_VERSIONS = ("autoscaling/v2", "autoscaling/v2beta2", "autoscaling/v2beta1", "autoscaling/v1")
KEDA_PAUSED = "autoscaling.keda.sh/paused"
KEDA_PAUSED_REPLICAS = "autoscaling.keda.sh/paused-replicas"
KEDA_MAX_REPLICAS = 100  # KEDA's maxReplicaCount default
# autoscaling/v1 keeps the v2 fields it has none of in these annotations (k8s autoscaling/v1 conversion).
V1_METRICS_ANNOTATION = "autoscaling.alpha.kubernetes.io/metrics"
V1_BEHAVIOR_ANNOTATION = "autoscaling.alpha.kubernetes.io/behavior"
# Status that autoscaling/v1 keeps in annotations, and kubectl's own: not carried over.
DROPPED_ANNOTATIONS = re.compile(
    r"autoscaling\.alpha\.kubernetes\.io/.*|kubectl\.kubernetes\.io/last-applied-configuration"
)
MAX_INT32 = 2**31 - 1
# A file's objects hold fewer values than this; more come from YAML aliases nested to expand.
MAX_VALUES = 1_000_000
MAX_STABILIZATION_WINDOW_SECONDS = 3600  # autoscaling/v2's bound, the CRD's too
# The fields of a ScaledObject's spec and of its triggers (KEDA v2); anything else is misplaced.
SCALED_OBJECT_FIELDS = frozenset(
    {
        "scaleTargetRef",
        "pollingInterval",
        "cooldownPeriod",
        "initialCooldownPeriod",
        "idleReplicaCount",
        "minReplicaCount",
        "maxReplicaCount",
        "fallback",
        "advanced",
        "triggers",
    }
)
TRIGGER_FIELDS = frozenset(
    {"type", "name", "metadata", "metricType", "authenticationRef", "useCachedMetrics"}
)
ADVANCED_FIELDS = frozenset(
    {"horizontalPodAutoscalerConfig", "restoreToOriginalReplicaCount", "scalingModifiers"}
)
EXPRESSIBLE_TRIGGERS = ("prometheus", "cpu", "memory", "cron")
HPA_CONFIG_FIELDS = frozenset({"behavior", "name"})
SCALE_TARGET_FIELDS = frozenset({"apiVersion", "kind", "name", "envSourceContainerName"})
# Where users put these by mistake, and where they belong.
MISPLACED = {
    "behavior": "spec.advanced.horizontalPodAutoscalerConfig.behavior",
    "horizontalPodAutoscalerConfig": "spec.advanced.horizontalPodAutoscalerConfig",
    "minReplicas": "spec.minReplicaCount",
    "maxReplicas": "spec.maxReplicaCount",
    "threshold": "triggers[].metadata.threshold",
    "activationThreshold": "triggers[].metadata.activationThreshold",
    "query": "triggers[].metadata.query",
    "serverAddress": "triggers[].metadata.serverAddress",
    "value": "triggers[].metadata.value",
    "metricName": "triggers[].metadata.metricName",
    "containerName": "triggers[].metadata.containerName",
    "timezone": "triggers[].metadata.timezone",
    "start": "triggers[].metadata.start",
    "end": "triggers[].metadata.end",
    "desiredReplicas": "triggers[].metadata.desiredReplicas",
    "restoreToOriginalReplicaCount": "spec.advanced.restoreToOriginalReplicaCount",
    "scalingModifiers": "spec.advanced.scalingModifiers",
}
# How many firings of a cron trigger's start are checked for a constant duration to its end.
CRON_SAMPLES = 400
# A duration at most this far from the usual one is a daylight-saving shift, not another window.
DST_SLACK = timedelta(hours=1)

# A non-negative Kubernetes quantity, the form KEDA's thresholds and values take (KEDA parses them as
# floats, so an exponent is fine too), at most the CRD's 64 characters.
QUANTITY = re.compile(r"([0-9]+(\.[0-9]*)?|\.[0-9]+)([munkMGTPE]|[KMGTPE]i|[eE][+-]?[0-9]+)?")
MAX_QUANTITY_LENGTH = 64
# The CRD's pattern of a quantity, signed (its CEL rules then say which signs a field takes).
CRD_QUANTITY = re.compile(
    r"(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?"
)
# Object names (an RFC 1123 subdomain) and namespaces (a label), and label keys and values, as the API
# server takes them.
SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
LABEL_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
CRON_PATTERN = re.compile(r"\s*\S+(\s+\S+){4}\s*")
TIME_ZONE_PATTERN = re.compile(r"[A-Za-z0-9_+-]+(/[A-Za-z0-9_+-]+)*")


class ConvertError(Exception):
    """The input cannot be expressed as a HorizontalAutoscaler; the message is the one line to print."""


def register(subcommands: Any) -> None:
    p = subcommands.add_parser(NAME, help=HELP, description=__doc__.split("\n\n", 1)[0])
    p.add_argument(
        "-f", "--filename", required=True, metavar="FILE", help="the HPAs or ScaledObjects (YAML or JSON)"
    )
    p.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> int:
    try:
        with open(args.filename, encoding="utf-8") as file:
            documents = _objects([d for d in yaml.safe_load_all(file) if d is not None])
    except OSError as err:
        print(f"surge convert: -f: cannot read {args.filename}: {err.strerror}", file=sys.stderr)
        return 2
    except UnicodeDecodeError:
        print(f"surge convert: -f: {args.filename} is not UTF-8 text", file=sys.stderr)
        return 2
    except yaml.YAMLError as err:
        print(f"surge convert: -f: {args.filename} is not YAML: {_one_line(str(err))}", file=sys.stderr)
        return 2
    except (RecursionError, ConvertError) as err:
        # PyYAML recurses once per nesting level: a hostile file can nest deeper than the stack.
        problem = "nested too deeply" if isinstance(err, RecursionError) else str(err)
        print(f"surge convert: -f: {args.filename}: {problem}", file=sys.stderr)
        return 2
    if not documents:
        print(f"surge convert: -f: {args.filename} holds no object", file=sys.stderr)
        return 2
    if not _within(documents, MAX_VALUES):
        print(
            f"surge convert: -f: {args.filename}: more than {MAX_VALUES} values once its YAML aliases are "
            "expanded",
            file=sys.stderr,
        )
        return 2
    converted, problems = [], []
    for i, document in enumerate(documents):
        try:
            converted.append(convert(document))
        except ConvertError as err:
            problems.append(f"{_named(document, i)}: {err}" if len(documents) > 1 else str(err))
    if problems:
        print(f"surge convert: {_one_line('; '.join(problems))}", file=sys.stderr)
        return 2
    sys.stdout.write(to_yaml(converted))
    return 0


# Strings written plain (unquoted): no YAML reader takes them for a number, and none of the words below.
PLAIN_STRING = re.compile(r"[A-Za-z][A-Za-z0-9_./:-]*")
YAML_WORDS = frozenset({"y", "n", "yes", "no", "on", "off", "true", "false", "null"})


class _Dumper(yaml.SafeDumper):
    """YAML that kubectl reads back as it was written: a value shared through an anchor in the input is
    written in full at each place, and a string is plain only when no YAML reader takes it for another
    type. PyYAML quotes what its YAML 1.1 resolver would misread, but kubectl's reader (go-yaml) also
    reads `y`, `n` and `0o17` as a boolean and a number."""

    def ignore_aliases(self, data: Any) -> bool:
        return True

    def represent_str(self, data: str) -> yaml.ScalarNode:
        plain = PLAIN_STRING.fullmatch(data) is not None and data.lower() not in YAML_WORDS
        return self.represent_scalar("tag:yaml.org,2002:str", data, style=None if plain else "'")


_Dumper.add_representer(str, _Dumper.represent_str)


def to_yaml(objects: list[dict[str, Any]]) -> str:
    """The converted objects as `surge convert` prints them."""
    # Never folded: a query reads as written.
    return yaml.dump_all(objects, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=2**31 - 1)


def _within(value: Any, budget: int) -> bool:
    """Whether `value` holds at most `budget` values counted as the checks below walk them: aliases let
    a small file expand into far more, and the walk would take as long (stops once over)."""
    left = budget
    stack = [value]
    while stack:
        item = stack.pop()
        left -= 1
        if left < 0:
            return False
        if isinstance(item, dict):
            stack += item.values()
        elif isinstance(item, list):
            stack += item
    return True


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _objects(documents: list[Any]) -> list[Any]:
    """The documents, with the items of a List (`kubectl get -o yaml` prints one) in its place."""
    out = []
    for document in documents:
        if isinstance(document, dict) and str(document.get("kind", "")).endswith("List"):
            items = document.get("items")
            if not isinstance(items, list):
                raise ConvertError(f"{document.get('kind')}: items is not a list")
            out += [item for item in items if item is not None]
        else:
            out.append(document)
    return out


def _named(document: Any, index: int) -> str:
    meta = document.get("metadata") if isinstance(document, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    kind = document.get("kind") if isinstance(document, dict) else None
    return f"object {index + 1} ({kind or '?'} {name})" if isinstance(name, str) else f"object {index + 1}"


def convert(obj: Any) -> dict[str, Any]:
    """The HorizontalAutoscaler for one HPA or ScaledObject (keda.sh/v1alpha1), checked as the API server
    and the autoscaler check it; ConvertError names every problem."""
    if not isinstance(obj, dict):
        raise ConvertError("not an object: want an autoscaling/v2 HPA or a keda.sh ScaledObject")
    kind, api_version = obj.get("kind"), obj.get("apiVersion")
    problems: list[str] = []
    if kind == "HorizontalPodAutoscaler" and api_version in HPA_VERSIONS:
        out = _from_hpa(obj, str(api_version), problems)
    elif kind == "ScaledObject" and str(api_version).startswith("keda.sh/"):
        out = _from_scaled_object(obj, problems)
    else:
        raise ConvertError(
            f"{_short(api_version) if api_version else '<no apiVersion>'} "
            f"{_short(kind) if kind else '<no kind>'}: want an autoscaling/v2 (v2beta2, v2beta1, v1) "
            "HorizontalPodAutoscaler or a keda.sh/v1alpha1 ScaledObject"
        )
    if not problems:
        _wide_quantities_as_strings(out["spec"], SPEC_SHAPE)
        # Named as fields of the HorizontalAutoscaler, which a ScaledObject's author did not write.
        prefix = "" if kind == "HorizontalPodAutoscaler" else "HorizontalAutoscaler "
        problems += [prefix + problem for problem in _accepted_problems(out)]
    if problems:
        raise ConvertError(_one_line("; ".join(dict.fromkeys(problems))))
    return out


def _collect(problems: list[str], make: Callable[..., Any], *args: Any) -> Any:
    """`make(*args)`, or None with its ConvertError's message added to `problems`."""
    try:
        return make(*args)
    except ConvertError as err:
        problems.append(str(err))
        return None


def _metadata(obj: dict[str, Any], annotations: dict[str, str], problems: list[str]) -> dict[str, Any]:
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        problems.append("metadata: required, with a name")
        return {}
    out: dict[str, Any] = {}
    name, namespace = meta.get("name"), meta.get("namespace")
    if not isinstance(name, str) or len(name) > 253 or not SUBDOMAIN.fullmatch(name):
        problems.append(
            f"metadata.name: {name!r}: not a Kubernetes object name (lowercase RFC 1123 subdomain)"
        )
    out["name"] = name
    if namespace is not None:
        if not isinstance(namespace, str) or len(namespace) > 63 or not DNS_LABEL.fullmatch(namespace):
            problems.append(
                f"metadata.namespace: {namespace!r}: not a namespace name (lowercase RFC 1123 label)"
            )
        out["namespace"] = namespace
    labels = meta.get("labels")
    if labels:
        if not isinstance(labels, dict):
            problems.append("metadata.labels: not a map")
        else:
            problems += [
                f"metadata.labels[{key}]: {value!r}: not a label value (a string, 63 characters at most)"
                for key, value in labels.items()
                if not isinstance(value, str)
                or len(value) > 63
                or (value and not LABEL_NAME.fullmatch(value))
            ]
            problems += [
                f"metadata.labels: {key!r}: not a label name" for key in labels if not _qualified_name(key)
            ]
            out["labels"] = dict(labels)
    if annotations:
        out["annotations"] = annotations
    return out


def _qualified_name(key: Any) -> bool:
    """A label or annotation key: an optional DNS subdomain prefix and `/`, then a name of 63 at most."""
    if not isinstance(key, str):
        return False
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not SUBDOMAIN.fullmatch(prefix)):
        return False
    return len(name) <= 63 and bool(LABEL_NAME.fullmatch(name))


def _annotations(obj: dict[str, Any], problems: list[str]) -> dict[str, Any]:
    meta = obj.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    if annotations is None:
        return {}
    if not isinstance(annotations, dict):
        problems.append("metadata.annotations: not a map")
        return {}
    bad = [
        key for key, value in annotations.items() if not _qualified_name(key) or not isinstance(value, str)
    ]
    problems += [f"metadata.annotations[{key}]: not an annotation (a key and a string value)" for key in bad]
    return {key: value for key, value in annotations.items() if key not in bad}


def _autoscaler(
    obj: dict[str, Any], spec: dict[str, Any], annotations: dict[str, str], problems: list[str]
) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "HorizontalAutoscaler",
        "metadata": _metadata(obj, annotations, problems),
        "spec": spec,
    }


# --- What the API server and the autoscaler accept ----------------------------------------------

# The CRD's spec, field by field: a dict is an object of those fields, a one-item list a list of its
# item, and the names below the scalar types. Only what the conversion copies needs checking here, but a
# whole HPA spec is copied.
STRING, INT32, QUANTITY_FIELD, NUMBER = "string", "int32", "quantity", "number"
STRING_MAP = "map of strings"
REQUIRED = "!required"  # the key of the fields an object of a shape must have
_TARGET = {
    REQUIRED: ("type",),
    "type": STRING,
    "value": QUANTITY_FIELD,
    "averageValue": QUANTITY_FIELD,
    "averageUtilization": INT32,
}
_METRIC_ID = {
    REQUIRED: ("name",),
    "name": STRING,
    "selector": {
        "matchLabels": STRING_MAP,
        "matchExpressions": [
            {REQUIRED: ("key", "operator"), "key": STRING, "operator": STRING, "values": [STRING]}
        ],
    },
}
_REF = {REQUIRED: ("kind", "name"), "apiVersion": STRING, "kind": STRING, "name": STRING}
_RULES = {
    "stabilizationWindowSeconds": INT32,
    "selectPolicy": STRING,
    "tolerance": QUANTITY_FIELD,
    "policies": [
        {REQUIRED: ("type", "value", "periodSeconds"), "type": STRING, "value": INT32, "periodSeconds": INT32}
    ],
}
SPEC_SHAPE: dict[str, Any] = {
    REQUIRED: ("scaleTargetRef", "maxReplicas"),
    "scaleTargetRef": _REF,
    "minReplicas": INT32,
    "maxReplicas": INT32,
    "syncPeriodSeconds": INT32,
    "metrics": [
        {
            REQUIRED: ("type",),
            "type": STRING,
            "resource": {REQUIRED: ("name", "target"), "name": STRING, "target": _TARGET},
            "containerResource": {
                REQUIRED: ("name", "container", "target"),
                "name": STRING,
                "container": STRING,
                "target": _TARGET,
            },
            "pods": {REQUIRED: ("metric", "target"), "metric": _METRIC_ID, "target": _TARGET},
            "object": {
                REQUIRED: ("describedObject", "metric", "target"),
                "describedObject": _REF,
                "metric": _METRIC_ID,
                "target": _TARGET,
                "activationThreshold": QUANTITY_FIELD,
            },
            "external": {
                REQUIRED: ("metric", "target"),
                "metric": _METRIC_ID,
                "target": _TARGET,
                "activationThreshold": QUANTITY_FIELD,
                "query": STRING,
            },
        }
    ],
    "behavior": {"scaleUp": _RULES, "scaleDown": _RULES},
    "schedules": [
        {
            REQUIRED: ("cron", "durationSeconds", "minReplicas"),
            "cron": STRING,
            "timeZone": STRING,
            "durationSeconds": INT32,
            "minReplicas": INT32,
        }
    ],
    "predictive": {
        REQUIRED: ("lookbackSeconds", "horizonSeconds", "seasonsSeconds"),
        "lookbackSeconds": INT32,
        "horizonSeconds": INT32,
        "seasonsSeconds": [INT32],
        "historyQuery": STRING,
    },
    "fallback": {
        REQUIRED: ("failureThreshold", "replicas"),
        "failureThreshold": INT32,
        "replicas": INT32,
        "behavior": STRING,
    },
    "burst": {REQUIRED: ("windowSeconds", "threshold"), "windowSeconds": INT32, "threshold": NUMBER},
}
# The CRD's other bounds on strings that no autoscaler rule checks.
_STRING_BOUNDS: dict[str, tuple[int, re.Pattern[str] | None]] = {
    "query": (4096, None),
    "historyQuery": (4096, None),
    "cron": (100, CRON_PATTERN),
    "timeZone": (64, TIME_ZONE_PATTERN),
}
# The fields autoscaling/v2beta1 and v1 have where v2 has others: named as such when found in a v2 spec.
V2BETA1_FIELDS = frozenset(
    {
        "targetAverageUtilization",
        "targetAverageValue",
        "targetValue",
        "metricName",
        "metricSelector",
        "targetCPUUtilizationPercentage",
    }
)
MAX_ITEMS = {"metrics": 10, "schedules": 10, "seasonsSeconds": 5}


def _wide_quantities_as_strings(value: Any, shape: Any) -> None:
    """Quantities written as integers beyond 64 bits become their strings: kubectl's YAML reader turns
    such a number into a float, which the CRD's integer-or-string quantities refuse (a string they take,
    as the API server takes the same digits as a Quantity)."""
    if isinstance(shape, dict) and isinstance(value, dict):
        for field, item in value.items():
            if field == REQUIRED or field not in shape:
                continue
            if shape[field] == QUANTITY_FIELD and type(item) is int and not -(2**63) <= item < 2**63:
                value[field] = str(item)
            else:
                _wide_quantities_as_strings(item, shape[field])
    elif isinstance(shape, list) and isinstance(value, list):
        for item in value:
            _wide_quantities_as_strings(item, shape[0])


def _shape_problems(value: Any, shape: Any, where: str, key: str = "") -> list[str]:
    if value is None:
        return [f"{where}: null"]
    if isinstance(shape, dict):
        if not isinstance(value, dict):
            return [f"{where}: not an object: {_short(value)}"]
        out = [f"{where}.{field}: required" for field in shape.get(REQUIRED, ()) if field not in value]
        for field, item in value.items():
            if field not in shape or field == REQUIRED:
                older = (
                    " (autoscaling/v2beta1's: is the apiVersion right?)" if field in V2BETA1_FIELDS else ""
                )
                out.append(f"{where}.{field}: not a field here{older}")
            else:
                out += _shape_problems(item, shape[field], f"{where}.{field}", field)
        return out
    if isinstance(shape, list):
        if not isinstance(value, list):
            return [f"{where}: not a list: {_short(value)}"]
        out = (
            [f"{where}: at most {MAX_ITEMS[key]} items"]
            if len(value) > MAX_ITEMS.get(key, len(value))
            else []
        )
        for i, item in enumerate(value):
            out += _shape_problems(item, shape[0], f"{where}[{i}]", key)
        return out
    return _scalar_problems(value, shape, where, key)


def _scalar_problems(value: Any, shape: str, where: str, key: str) -> list[str]:
    if shape == STRING_MAP:
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            return [f"{where}: not a map of strings: {_short(value)}"]
        return []
    if shape == STRING:
        if not isinstance(value, str):
            return [f"{where}: not a string: {_short(value)}"]
        length, pattern = _STRING_BOUNDS.get(key, (None, None))
        if length is not None and len(value) > length:
            return [f"{where}: longer than {length} characters"]
        if pattern is not None and not pattern.fullmatch(value):
            return [f"{where}: {_short(value)}: not of the form {pattern.pattern}"]
        return []
    if isinstance(value, bool):
        return [f"{where}: not a {shape}: {value!r}"]
    if shape == INT32:
        if not isinstance(value, int):
            return [f"{where}: not an integer: {_short(value)}"]
        return (
            [] if -(2**31) <= value <= MAX_INT32 else [f"{where}: {value} is out of range (32-bit integer)"]
        )
    if shape == NUMBER:
        return [] if isinstance(value, int | float) else [f"{where}: not a number: {_short(value)}"]
    # A quantity: an integer or a string of the CRD's pattern.
    if isinstance(value, int):
        return []
    if not isinstance(value, str) or len(value) > MAX_QUANTITY_LENGTH or not CRD_QUANTITY.fullmatch(value):
        return [f"{where}: not a quantity: {_short(value)}"]
    return []


def _short(value: Any) -> str:
    """A value in a message: quoted if a string, so that spaces and line breaks show; a long or nested
    one cut short (reprlib stops early, so a value of aliases nested many levels costs little)."""
    text = _REPR.repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother = 3, 80, 80


def _accepted_problems(out: dict[str, Any]) -> list[str]:
    """What the API server (the CRD's schema and rules) or the autoscaler would refuse in `out`."""
    problems = _shape_problems(out["spec"], SPEC_SHAPE, "spec")
    if problems:
        return problems  # the rules below read a spec of the right shape
    try:
        hpa, violations = CRD_SOURCE.read(out)
    except ValueError as err:  # a required field missing
        return [str(err)]
    if violations or hpa is None:
        return [str(v) for v in violations]
    namespace = out["metadata"].get("namespace")
    for where, query in CRD_SOURCE.queries(hpa):
        try:
            if namespace:
                confine(query, namespace)
            else:
                check(query)
        except QueryRefused as err:
            problems.append(f"{where}: {_one_line(str(err))}")
    return problems


# --- HPAs ---------------------------------------------------------------------------------------


def _annotation_json(annotations: dict[str, str], name: str) -> Any:
    text = annotations.pop(name, None)
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        raise ConvertError(f"metadata.annotations[{name}]: not JSON") from None


def _from_hpa(obj: dict[str, Any], api_version: str, problems: list[str]) -> dict[str, Any]:
    annotations = _annotations(obj, problems)
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        problems.append("spec: required (an object)")
        spec = {}
    if api_version == "autoscaling/v1":
        spec = _collect(problems, _v1_spec, spec, annotations) or {}
    elif api_version == "autoscaling/v2beta1":
        spec = {**spec, **(_collect(problems, _v2beta1_metrics, spec.get("metrics"), "spec.metrics") or {})}
    else:
        spec = dict(spec)
    annotations = {k: v for k, v in annotations.items() if not DROPPED_ANNOTATIONS.fullmatch(k)}
    period = annotations.pop(SYNC_PERIOD_ANNOTATION, None)
    if period is not None:
        if re.fullmatch(r"[0-9]+", period.strip()):
            spec["syncPeriodSeconds"] = int(period)
        else:
            problems.append(f"metadata.annotations[{SYNC_PERIOD_ANNOTATION}]: not whole seconds: {period!r}")
    for name, field in (
        (SCHEDULES_ANNOTATION, "schedules"),
        (PREDICTIVE_ANNOTATION, "predictive"),
        (BURST_ANNOTATION, "burst"),
        (FALLBACK_ANNOTATION, "fallback"),
    ):
        value = _collect(problems, _annotation_json, annotations, name)
        if value is not None:
            spec[field] = value
    queries = _collect(problems, _annotation_json, annotations, QUERIES_ANNOTATION) or {}
    thresholds = _collect(problems, _annotation_json, annotations, ACTIVATION_ANNOTATION) or {}
    for where, named in ((QUERIES_ANNOTATION, queries), (ACTIVATION_ANNOTATION, thresholds)):
        if not isinstance(named, dict):
            problems.append(f"metadata.annotations[{where}]: not a JSON object of metric names")
            return _autoscaler(obj, spec, annotations, problems)
    metrics = spec.get("metrics")
    if isinstance(metrics, list):
        spec["metrics"] = [_with_settings(metric, queries, thresholds) for metric in metrics]
    for where, left in ((QUERIES_ANNOTATION, queries), (ACTIVATION_ANNOTATION, thresholds)):
        if left:
            problems.append(f"metadata.annotations[{where}]: no metric named {', '.join(sorted(left))}")
    return _autoscaler(obj, spec, annotations, problems)


def _with_settings(metric: Any, queries: dict[str, Any], thresholds: dict[str, Any]) -> Any:
    """An External or Object metric with the query and activation threshold its annotations give it."""
    if not isinstance(metric, dict) or metric.get("type") not in ("External", "Object"):
        return metric
    field = str(metric["type"]).lower()
    source = metric.get(field)
    identifier = source.get("metric") if isinstance(source, dict) else None
    name = identifier.get("name") if isinstance(identifier, dict) else None
    if not isinstance(name, str) or not isinstance(source, dict):
        return metric
    source = {**source}
    if field == "external" and name in queries:
        source["query"] = queries.pop(name)
    if name in thresholds:
        threshold = thresholds.pop(name)
        source["activationThreshold"] = threshold if isinstance(threshold, str | int) else str(threshold)
    return {**metric, field: source}


V1_FIELDS = frozenset({"scaleTargetRef", "minReplicas", "maxReplicas", "targetCPUUtilizationPercentage"})


def _v1_spec(spec: dict[str, Any], annotations: dict[str, str]) -> dict[str, Any]:
    """An autoscaling/v1 spec as v2, as the API server converts it."""
    unknown = sorted(str(key) for key in spec if key not in V1_FIELDS)
    if unknown:
        raise ConvertError(f"not autoscaling/v1 fields: {', '.join(f'spec.{key}' for key in unknown)}")
    out: dict[str, Any] = {k: spec[k] for k in ("scaleTargetRef", "minReplicas", "maxReplicas") if k in spec}
    metrics = []
    cpu = spec.get("targetCPUUtilizationPercentage")
    if cpu is not None:
        target = {"type": "Utilization", "averageUtilization": cpu}
        metrics.append({"type": "Resource", "resource": {"name": "cpu", "target": target}})
    more = _annotation_json(annotations, V1_METRICS_ANNOTATION)
    if more is not None:
        metrics += _v2beta1_metrics(more, f"metadata.annotations[{V1_METRICS_ANNOTATION}]")["metrics"]
    if metrics:
        out["metrics"] = metrics
    behavior = _annotation_json(annotations, V1_BEHAVIOR_ANNOTATION)
    if behavior is not None:
        out["behavior"] = behavior
    return out


# autoscaling/v2beta1's metric sources: their fields, and the v2 target each of its target fields becomes.
V2BETA1_SOURCES: dict[str, tuple[str, tuple[str, ...], tuple[tuple[str, str, str], ...]]] = {
    "Resource": (
        "resource",
        ("name",),
        (
            ("targetAverageUtilization", "Utilization", "averageUtilization"),
            ("targetAverageValue", "AverageValue", "averageValue"),
        ),
    ),
    "ContainerResource": (
        "containerResource",
        ("name", "container"),
        (
            ("targetAverageUtilization", "Utilization", "averageUtilization"),
            ("targetAverageValue", "AverageValue", "averageValue"),
        ),
    ),
    "Pods": ("pods", ("metricName", "selector"), (("targetAverageValue", "AverageValue", "averageValue"),)),
    # An Object metric's averageValue wins over its (required) targetValue, as the API server converts it.
    "Object": (
        "object",
        ("target", "metricName", "selector"),
        (("averageValue", "AverageValue", "averageValue"), ("targetValue", "Value", "value")),
    ),
    "External": (
        "external",
        ("metricName", "metricSelector"),
        (("targetValue", "Value", "value"), ("targetAverageValue", "AverageValue", "averageValue")),
    ),
}


def _v2beta1_metrics(metrics: Any, where: str) -> dict[str, Any]:
    """`{"metrics": ...}` of autoscaling/v2beta1's metrics, as the API server converts them to v2."""
    if metrics is None:
        return {}
    if not isinstance(metrics, list):
        raise ConvertError(f"{where}: not a list")
    problems: list[str] = []
    out = [_collect(problems, _v2beta1_metric, metric, f"{where}[{i}]") for i, metric in enumerate(metrics)]
    if problems:
        raise ConvertError("; ".join(problems))
    return {"metrics": out}


def _v2beta1_metric(metric: Any, where: str) -> dict[str, Any]:
    if (
        not isinstance(metric, dict)
        or not isinstance(metric.get("type"), str)
        or metric["type"] not in V2BETA1_SOURCES
    ):
        kind = metric.get("type") if isinstance(metric, dict) else metric
        raise ConvertError(f"{where}.type: {kind!r}: want one of {', '.join(V2BETA1_SOURCES)}")
    field, names, targets = V2BETA1_SOURCES[metric["type"]]
    source = metric.get(field)
    here = f"{where}.{field}"
    if not isinstance(source, dict):
        raise ConvertError(f"{here}: required by type {metric['type']}")
    unknown = [str(key) for key in source if key not in names and key not in {t[0] for t in targets}]
    if unknown:
        raise ConvertError(f"not autoscaling/v2beta1 fields: {', '.join(f'{here}.{key}' for key in unknown)}")
    given = [(old, kind, new) for old, kind, new in targets if source.get(old) is not None]
    if not given:
        raise ConvertError(f"{here}: needs {' or '.join(t[0] for t in targets)}")
    old, kind, new = given[0]
    out: dict[str, Any] = {"target": {"type": kind, new: source[old]}}
    if field in ("resource", "containerResource"):
        out.update((key, source[key]) for key in names if key in source)
    else:
        selector = source.get("metricSelector" if field == "external" else "selector")
        out["metric"] = {"name": source.get("metricName")}
        if selector is not None:
            out["metric"]["selector"] = selector
        if field == "object":
            out["describedObject"] = source.get("target")
    return {"type": metric["type"], field: {key: value for key, value in out.items() if value is not None}}


# --- KEDA ScaledObject --------------------------------------------------------------------------


def _count(value: Any, where: str, minimum: int = 0) -> int:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | str)
        or not re.fullmatch(r"\s*[0-9]+\s*", str(value))
    ):
        raise ConvertError(f"{where}: not a whole number: {_short(value)}")
    if not minimum <= int(value) <= MAX_INT32:
        raise ConvertError(f"{where}: must be from {minimum} to {MAX_INT32}: {_short(value)}")
    return int(value)


def _quantity(value: Any, where: str, *, positive: bool) -> str:
    """A threshold or value as the quantity string of the CRD: KEDA's are non-negative numbers."""
    text = str(value).strip() if isinstance(value, int | float | str) and not isinstance(value, bool) else ""
    match = QUANTITY.fullmatch(text)
    if match is None or len(text) > MAX_QUANTITY_LENGTH:
        raise ConvertError(f"{where}: not a number (0 or more, 64 characters at most): {_short(value)}")
    if positive and float(match.group(1)) == 0:
        raise ConvertError(f"{where}: must be more than 0: {_short(value)}")
    return text


def _metric_name(trigger: dict[str, Any], meta: dict[str, Any], index: int, taken: set[str]) -> str:
    named = trigger.get("name") or meta.get("metricName")
    raw = (
        str(named) if isinstance(named, str | int) and not isinstance(named, bool) else f"prometheus-{index}"
    )
    name = DIRECT_METRIC_PREFIX + re.sub(r"[^A-Za-z0-9_.-]", "-", raw)
    if name in taken:  # two triggers of one name: each metric keeps its own
        name = f"{name}-{index}"
    taken.add(name)
    return name


def _target(metric_type: Any, value: str, where: str) -> dict[str, Any]:
    if metric_type == "AverageValue":
        return {"type": "AverageValue", "averageValue": value}
    if metric_type == "Value":
        return {"type": "Value", "value": value}
    raise ConvertError(f"{where}.metricType: {_short(metric_type)}: want AverageValue or Value")


def _prometheus(
    trigger: dict[str, Any], meta: dict[str, Any], index: int, where: str, to_zero: bool, taken: set[str]
) -> dict[str, Any]:
    missing = [field for field in ("query", "threshold") if meta.get(field) in (None, "")]
    if missing:
        raise ConvertError(
            "; ".join(f"{where}.metadata.{field}: required by the prometheus trigger" for field in missing)
        )
    if not isinstance(meta["query"], str):
        raise ConvertError(f"{where}.metadata.query: not a string: {_short(meta['query'])}")
    external: dict[str, Any] = {
        "metric": {"name": _metric_name(trigger, meta, index, taken)},
        "query": meta["query"].strip(),
        "target": _target(
            trigger.get("metricType") or "AverageValue",
            _quantity(meta["threshold"], f"{where}.metadata.threshold", positive=True),
            where,
        ),
    }
    activation = meta.get("activationThreshold")
    if activation is not None:
        external["activationThreshold"] = _quantity(
            activation, f"{where}.metadata.activationThreshold", positive=False
        )
    elif to_zero:
        external["activationThreshold"] = "0"  # KEDA's default: active above zero
    return {"type": "External", "external": external}


def _resource(trigger: dict[str, Any], meta: dict[str, Any], where: str) -> dict[str, Any]:
    # `metadata.type` is KEDA's deprecated place for the metric type.
    metric_type = trigger.get("metricType") or meta.get("type")
    if metric_type not in ("Utilization", "AverageValue"):
        raise ConvertError(
            f"{where}.metricType: {_short(metric_type) if metric_type else '<unset>'}: "
            "want Utilization or AverageValue"
        )
    if meta.get("value") is None:
        raise ConvertError(f"{where}.metadata.value: required by the {trigger['type']} trigger")
    value = _quantity(meta["value"], f"{where}.metadata.value", positive=True)
    if metric_type == "Utilization":
        target: dict[str, Any] = {
            "type": "Utilization",
            "averageUtilization": _count(value, f"{where}.metadata.value", 1),
        }
    else:
        target = {"type": "AverageValue", "averageValue": value}
    source: dict[str, Any] = {"name": trigger["type"], "target": target}
    container = meta.get("containerName")
    if container:
        if not isinstance(container, str):
            raise ConvertError(f"{where}.metadata.containerName: not a string: {_short(container)}")
        return {"type": "ContainerResource", "containerResource": {**source, "container": container}}
    return {"type": "Resource", "resource": source}


def cron_schedule(meta: dict[str, Any], where: str) -> dict[str, Any]:
    """A cron trigger as a schedule: from each firing of `start`, until the next firing of `end`."""
    missing = [field for field in ("start", "end", "desiredReplicas") if meta.get(field) in (None, "")]
    if missing:
        raise ConvertError(
            "; ".join(f"{where}.metadata.{field}: required by the cron trigger" for field in missing)
        )
    start, end, zone = meta["start"], meta["end"], meta.get("timezone") or None
    for field, value in (("start", start), ("end", end), ("timezone", zone)):
        if value is not None and not isinstance(value, str):
            raise ConvertError(f"{where}.metadata.{field}: not a string: {_short(value)}")
    start, end = start.strip(), end.strip()
    try:
        check_cron(start)
        check_cron(end)
        time_zone(zone)
    except ValueError as err:
        raise ConvertError(f"{where}.metadata: {_one_line(str(err))}") from None
    if zone is not None and (len(zone) > 64 or not TIME_ZONE_PATTERN.fullmatch(zone)):
        raise ConvertError(f"{where}.metadata.timezone: {_short(zone)}: not an IANA time zone name")
    replicas = _count(meta["desiredReplicas"], f"{where}.metadata.desiredReplicas", 1)
    starts = Schedule(start, 1, replicas, zone)
    ends = Schedule(end, 1, replicas, zone)
    durations: list[timedelta] = []
    at = datetime(2026, 1, 1, tzinfo=UTC)
    for _ in range(CRON_SAMPLES):
        began = first_fire_after(starts, at)
        if began is None:
            break
        ended = first_fire_after(ends, began)
        if ended is None:
            break
        durations.append(ended - began)
        at = began
    if not durations:
        raise ConvertError(f"{where}.metadata: start {start!r} or end {end!r} never fires")
    usual, _ = Counter(durations).most_common(1)[0]
    if any(abs(duration - usual) > DST_SLACK for duration in durations):
        raise ConvertError(
            f"{where}.metadata: the window from start {start!r} to end {end!r} is not of one length "
            f"({min(durations)} to {max(durations)}); split it into triggers whose windows are"
        )
    schedule: dict[str, Any] = {
        "cron": start,
        "durationSeconds": int(usual.total_seconds()),
        "minReplicas": replicas,
    }
    if zone:
        schedule["timeZone"] = zone
    return schedule


def _field_problems(found: dict[str, Any], allowed: frozenset[str], where: str) -> list[str]:
    unknown = [key for key in found if key not in allowed]
    if not unknown:
        return []
    named = ", ".join(
        f"{where}.{key}" + (f" (belongs in {MISPLACED[key]})" if key in MISPLACED else "") for key in unknown
    )
    return [f"not ScaledObject fields: {named}"]


def _object(value: Any, where: str) -> dict[str, Any]:
    """`value` if it is an object (None: an empty one)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConvertError(f"{where}: not an object: {_short(value)}")
    return value


def _checked_triggers(
    spec: dict[str, Any], problems: list[str]
) -> list[tuple[int, dict[str, Any], dict[str, Any]]]:
    """The triggers Surge can express: (index, trigger, its metadata); problems for the others."""
    triggers = spec.get("triggers")
    if not isinstance(triggers, list) or not triggers:
        problems.append("spec.triggers: a ScaledObject needs a list of at least one trigger")
        return []
    unsupported = [
        f"{_type_name(t.get('type'))} (spec.triggers[{i}])"
        for i, t in enumerate(triggers)
        if isinstance(t, dict) and t.get("type") not in EXPRESSIBLE_TRIGGERS
    ]
    if unsupported:
        problems.append(
            f"cannot express these triggers: {', '.join(unsupported)}; keep them on KEDA behind the "
            "multiplexer (docs/deploy.md section 16)"
        )
    good = []
    for i, trigger in enumerate(triggers):
        where = f"spec.triggers[{i}]"
        if not isinstance(trigger, dict):
            problems.append(f"{where}: not a trigger object: {_short(trigger)}")
            continue
        misplaced = _field_problems(trigger, TRIGGER_FIELDS, where)
        problems += misplaced
        meta = _collect(problems, _object, trigger.get("metadata"), f"{where}.metadata")
        if not misplaced and meta is not None and trigger.get("type") in EXPRESSIBLE_TRIGGERS:
            good.append((i, trigger, meta))
    return good


def _type_name(kind: Any) -> str:
    return kind if isinstance(kind, str) and kind else _short(kind) if kind else "<no type>"


def _from_scaled_object(obj: dict[str, Any], problems: list[str]) -> dict[str, Any]:
    annotations = _annotations(obj, problems)
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        problems.append("spec: required (an object)")
        spec = {}
    problems += _field_problems(spec, SCALED_OBJECT_FIELDS, "spec")
    triggers = _checked_triggers(spec, problems)
    advanced = _collect(problems, _object, spec.get("advanced"), "spec.advanced") or {}
    problems += _field_problems(advanced, ADVANCED_FIELDS, "spec.advanced")
    if advanced.get("scalingModifiers"):
        problems.append(
            "spec.advanced.scalingModifiers: a formula over triggers cannot be expressed (Surge takes the "
            "highest replica count of its metrics, as the HPA does)"
        )
    hpa_config = (
        _collect(
            problems,
            _object,
            advanced.get("horizontalPodAutoscalerConfig"),
            "spec.advanced.horizontalPodAutoscalerConfig",
        )
        or {}
    )
    problems += _field_problems(hpa_config, HPA_CONFIG_FIELDS, "spec.advanced.horizontalPodAutoscalerConfig")
    behavior = _collect(
        problems, _object, hpa_config.get("behavior"), "spec.advanced.horizontalPodAutoscalerConfig.behavior"
    )
    min_count = _collect(problems, _count, spec.get("minReplicaCount", 0), "spec.minReplicaCount")
    idle = spec.get("idleReplicaCount")
    if idle is not None:
        idle = _collect(problems, _count, idle, "spec.idleReplicaCount")
        if idle is not None and (idle != 0 or (min_count or 0) > 1):
            problems.append(
                f"spec.idleReplicaCount {idle} with minReplicaCount {min_count}: Surge's activation keeps 1 "
                "replica (not minReplicaCount) while active; use idleReplicaCount 0 with minReplicaCount 1"
            )
        min_count = 0
    to_zero = min_count == 0
    metrics: list[dict[str, Any]] = []
    schedules: list[dict[str, Any]] = []
    taken: set[str] = set()
    for i, trigger, meta in triggers:
        where = f"spec.triggers[{i}]"
        if trigger["type"] == "prometheus":
            made = _collect(problems, _prometheus, trigger, meta, i, where, to_zero, taken)
        elif trigger["type"] == "cron":
            made = _collect(problems, cron_schedule, meta, where)
        else:
            made = _collect(problems, _resource, trigger, meta, where)
        if made is not None:
            (schedules if trigger["type"] == "cron" else metrics).append(made)
    has_external = any(t["type"] == "prometheus" for _, t, _ in triggers)
    if to_zero and not has_external and any(t["type"] in ("cpu", "memory") for _, t, _ in triggers):
        problems.append(
            "spec.minReplicaCount 0: cpu and memory triggers cannot scale to zero "
            "(KEDA's rule too); add a prometheus trigger or set minReplicaCount 1"
        )
    elif to_zero and not has_external and triggers:
        # Cron only: a constant metric, never active, lets the schedules alone take the target off zero.
        metrics.append(
            {
                "type": "External",
                "external": {
                    "metric": {"name": f"{DIRECT_METRIC_PREFIX}idle"},
                    "query": "vector(0)",
                    "target": {"type": "Value", "value": "1"},
                    "activationThreshold": "0",
                },
            }
        )
    out: dict[str, Any] = {}
    ref = _collect(problems, _object, spec.get("scaleTargetRef"), "spec.scaleTargetRef")
    if ref is not None:
        problems += _field_problems(ref, SCALE_TARGET_FIELDS, "spec.scaleTargetRef")
        if not ref.get("name"):
            problems.append("spec.scaleTargetRef.name: required")
        out["scaleTargetRef"] = {
            "apiVersion": ref.get("apiVersion") or "apps/v1",
            "kind": ref.get("kind") or "Deployment",
            "name": ref.get("name"),
        }
    out["minReplicas"] = min_count
    out["maxReplicas"] = _collect(
        problems, _count, spec.get("maxReplicaCount", KEDA_MAX_REPLICAS), "spec.maxReplicaCount", 1
    )
    if spec.get("pollingInterval") is not None:
        out["syncPeriodSeconds"] = _collect(
            problems, _count, spec["pollingInterval"], "spec.pollingInterval", 1
        )
    if metrics:
        out["metrics"] = metrics
    behavior = dict(behavior or {})
    cooldown = spec.get("cooldownPeriod")
    scale_down = behavior.get("scaleDown")
    if cooldown is not None:
        cooldown = _collect(problems, _count, cooldown, "spec.cooldownPeriod")
    # KEDA's cooldownPeriod paces only the step to zero: without zero it has nothing to pace.
    window_set = isinstance(scale_down, dict) and "stabilizationWindowSeconds" in scale_down
    free = scale_down is None or (isinstance(scale_down, dict) and not window_set)
    if to_zero and cooldown is not None and free:
        if cooldown > MAX_STABILIZATION_WINDOW_SECONDS:
            problems.append(
                f"spec.cooldownPeriod {cooldown}: Surge waits for the scale-down stabilization window, "
                f"at most {MAX_STABILIZATION_WINDOW_SECONDS} s, before scaling to zero"
            )
        behavior["scaleDown"] = {**(scale_down or {}), "stabilizationWindowSeconds": cooldown}
    if behavior:
        out["behavior"] = behavior
    if schedules:
        out["schedules"] = schedules
    if spec.get("fallback") is not None:
        out["fallback"] = _collect(problems, _fallback, spec["fallback"])
    surge_annotations = {
        ours: annotations[theirs]
        for theirs, ours in (
            (KEDA_PAUSED, PAUSED_ANNOTATION),
            (KEDA_PAUSED_REPLICAS, PAUSED_REPLICAS_ANNOTATION),
        )
        if theirs in annotations
    }
    return _autoscaler(obj, out, surge_annotations, problems)


def _fallback(fallback: Any) -> dict[str, Any]:
    fallback = _object(fallback, "spec.fallback")
    problems = _field_problems(
        fallback, frozenset({"failureThreshold", "replicas", "behavior"}), "spec.fallback"
    )
    out: dict[str, Any] = {
        "failureThreshold": _collect(
            problems, _count, fallback.get("failureThreshold"), "spec.fallback.failureThreshold", 1
        ),
        "replicas": _collect(problems, _count, fallback.get("replicas"), "spec.fallback.replicas"),
    }
    behavior = fallback.get("behavior")
    if behavior is not None:
        if behavior not in FALLBACK_BEHAVIORS:
            problems.append(
                f"spec.fallback.behavior: {_short(behavior)}: want one of {', '.join(FALLBACK_BEHAVIORS)}"
            )
        out["behavior"] = behavior
    if problems:
        raise ConvertError("; ".join(problems))
    return out
