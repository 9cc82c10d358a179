"""What the API server (the HorizontalAutoscaler CRD's schema and rules) and the autoscaler accept: every
converted object is checked here before it is printed."""

from __future__ import annotations

import re
from typing import Any

from autoscaler.sources import CRD_SOURCE
from shared.promql.confine import QueryRefused, check, confine
from surge.convert.problems import one_line, short

MAX_INT32 = 2**31 - 1
MAX_QUANTITY_LENGTH = 64
# The CRD's pattern of a quantity, signed (its CEL rules then say which signs a field takes).
CRD_QUANTITY = re.compile(
    r"(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?"
)
CRON_PATTERN = re.compile(r"\s*\S+(\s+\S+){4}\s*")
TIME_ZONE_PATTERN = re.compile(r"[A-Za-z0-9_+-]+(/[A-Za-z0-9_+-]+)*")

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
    "cooldownPeriodSeconds": INT32,
    "initialCooldownPeriodSeconds": INT32,
    "metrics": [
        {
            REQUIRED: ("type",),
            "type": STRING,
            "name": STRING,
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
                "absentValue": QUANTITY_FIELD,
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
    "formula": {
        REQUIRED: ("expression", "target"),
        "expression": STRING,
        "target": _TARGET,
        "activationTarget": QUANTITY_FIELD,
    },
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


def wide_quantities_as_strings(value: Any, shape: Any) -> None:
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
                wide_quantities_as_strings(item, shape[field])
    elif isinstance(shape, list) and isinstance(value, list):
        for item in value:
            wide_quantities_as_strings(item, shape[0])


def _shape_problems(value: Any, shape: Any, where: str, key: str = "") -> list[str]:
    if value is None:
        return [f"{where}: null"]
    if isinstance(shape, dict):
        if not isinstance(value, dict):
            return [f"{where}: not an object: {short(value)}"]
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
            return [f"{where}: not a list: {short(value)}"]
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
            return [f"{where}: not a map of strings: {short(value)}"]
        return []
    if shape == STRING:
        if not isinstance(value, str):
            return [f"{where}: not a string: {short(value)}"]
        length, pattern = _STRING_BOUNDS.get(key, (None, None))
        if length is not None and len(value) > length:
            return [f"{where}: longer than {length} characters"]
        if pattern is not None and not pattern.fullmatch(value):
            return [f"{where}: {short(value)}: not of the form {pattern.pattern}"]
        return []
    if isinstance(value, bool):
        return [f"{where}: not a {shape}: {value!r}"]
    if shape == INT32:
        if not isinstance(value, int):
            return [f"{where}: not an integer: {short(value)}"]
        return (
            [] if -(2**31) <= value <= MAX_INT32 else [f"{where}: {value} is out of range (32-bit integer)"]
        )
    if shape == NUMBER:
        return [] if isinstance(value, int | float) else [f"{where}: not a number: {short(value)}"]
    # A quantity: an integer or a string of the CRD's pattern.
    if isinstance(value, int):
        return []
    if not isinstance(value, str) or len(value) > MAX_QUANTITY_LENGTH or not CRD_QUANTITY.fullmatch(value):
        return [f"{where}: not a quantity: {short(value)}"]
    return []


def accepted_problems(out: dict[str, Any]) -> list[str]:
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
            problems.append(f"{where}: {one_line(str(err))}")
    return problems
