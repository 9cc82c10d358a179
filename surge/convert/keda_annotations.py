"""A ScaledObject's scaling annotations as Surge's: KEDA reads `paused`, `paused-scale-in`,
`paused-scale-out` and `force-activation` with Go's strconv.ParseBool, and takes any other value for true
(KEDA's getBoolAnnotation), so "0" does not pause and "yes" does. Each is written as Surge's annotation,
"true" when it holds, left out when it does not: the autoscaler reads exactly that whatever its parser.
`paused-replicas` is copied as written (the autoscaler checks it as KEDA does)."""

from __future__ import annotations

from autoscaler.core.parsebool import parse_bool  # (the daemon's reading: convert agrees with it)
from autoscaler.core.types import PAUSED_REPLICAS_ANNOTATION

SURGE_PREFIX = "autoscaling.surge.dev/"
KEDA_PREFIX = "autoscaling.keda.sh/"
PAUSED_REPLICAS = "paused-replicas"
# KEDA's boolean annotations (the names after either prefix), as Surge takes them.
BOOLEAN_ANNOTATIONS = ("paused", "paused-scale-in", "paused-scale-out", "force-activation")

def scaling_annotations(annotations: dict[str, str], changes: list[str]) -> dict[str, str]:
    """Surge's annotations for KEDA's (or Surge's own, kept as the source for those KEDA lacks) and a
    change line for each value KEDA reads as true only because it is not a boolean."""
    out: dict[str, str] = {}
    for short_name in BOOLEAN_ANNOTATIONS:
        for prefix in (KEDA_PREFIX, SURGE_PREFIX):
            value = annotations.get(prefix + short_name)
            if value is None:
                continue
            holds = parse_bool(value)
            if holds is None:
                changes.append(
                    f"{short_name}: {prefix}{short_name} {value!r} is not a boolean (strconv.ParseBool), "
                    f'which KEDA reads as "true": written as {SURGE_PREFIX}{short_name}: "true"'
                )
            if holds is not False:
                out[SURGE_PREFIX + short_name] = "true"
            break  # KEDA's annotation wins over Surge's own
    for prefix in (KEDA_PREFIX, SURGE_PREFIX):
        replicas = annotations.get(prefix + PAUSED_REPLICAS)
        if replicas is not None:
            out[PAUSED_REPLICAS_ANNOTATION] = replicas
            break
    return out
