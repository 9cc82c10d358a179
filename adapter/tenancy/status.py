"""The status of rule and backend objects — pure: what a team reads with `kubectl get` and `describe`.

One condition, `Ready`, as metav1.Condition: `True` with reason `Served`; `False` with the reason that
stopped it (InvalidSpec, InvalidQuery, BackendRefused, BackendUnreachable, SecretMissing, Conflict,
LimitExceeded) or `Discovering` before its first listing. Its lastTransitionTime changes only when its
status does, as the API conventions ask, so a relist that changes nothing writes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from adapter.tenancy.plan import Refusal

MAX_LISTED_METRICS = 20  # status.metrics, as the CRD bounds it


@dataclass(frozen=True, slots=True)
class Discovery:
    """What the last listing of a rule found, or why it failed."""

    series: int = 0
    metrics: tuple[str, ...] = ()  # sorted
    error: str | None = None  # the backend could not be read (its previous entries are kept)


def _ready(
    status: bool, reason: str, message: str, generation: int, previous: Sequence[Mapping[str, Any]], now: str
) -> dict[str, Any]:
    value = "True" if status else "False"
    before = next((c for c in previous if c.get("type") == "Ready"), None)
    since = before.get("lastTransitionTime") if before is not None and before.get("status") == value else None
    return {
        "type": "Ready",
        "status": value,
        "reason": reason,
        "message": message,
        "observedGeneration": generation,
        "lastTransitionTime": since or now,
    }


def _metric_column(metrics: Sequence[str]) -> str:
    if len(metrics) <= 1:
        return metrics[0] if metrics else ""
    return f"{metrics[0]} (+{len(metrics) - 1})"


def rule_status(
    generation: int,
    refusal: Refusal | None,
    discovery: Discovery | None,
    shadowed: Mapping[str, str],
    backend: str,
    previous: Mapping[str, Any],
    now: str,
) -> dict[str, Any]:
    """The status of a rule object. `shadowed`: what it found that another rule serves → that rule;
    `backend`: where it reads ("--prometheus-url" or the backend object); `previous`: its status now."""
    conditions = previous.get("conditions") or []
    status: dict[str, Any] = {"observedGeneration": generation, "backend": backend}
    if refusal is not None:
        ready = _ready(False, refusal.reason, refusal.message, generation, conditions, now)
        status.update(series=0, metrics=[], metric="", lastError=refusal.message)
    elif discovery is None:
        message = "its series have not been listed yet"
        ready = _ready(False, "Discovering", message, generation, conditions, now)
        status.update(series=0, metrics=[], metric="", lastError="")
    else:
        status.update(
            series=discovery.series,
            metrics=list(discovery.metrics[:MAX_LISTED_METRICS]),
            metric=_metric_column(discovery.metrics),
            lastError=discovery.error or "",
        )
        if shadowed:
            what, winner = sorted(shadowed.items())[0]
            more = f" and {len(shadowed) - 1} more" if len(shadowed) > 1 else ""
            message = f"{what} is served by {winner}{more}; this rule serves the rest"
            ready = _ready(False, "Conflict", message, generation, conditions, now)
        elif discovery.error is not None:
            ready = _ready(False, "BackendUnreachable", discovery.error, generation, conditions, now)
        else:
            message = f"{len(discovery.metrics)} metrics from {discovery.series} series on {backend}"
            ready = _ready(True, "Served", message, generation, conditions, now)
    status["conditions"] = [ready]
    return status


def backend_status(
    generation: int, refusal: Refusal | None, error: str | None, previous: Mapping[str, Any], now: str
) -> dict[str, Any]:
    """The status of a backend object; `error`: its latest call failed that way."""
    conditions = previous.get("conditions") or []
    if refusal is not None:
        ready = _ready(False, refusal.reason, refusal.message, generation, conditions, now)
    elif error is not None:
        ready = _ready(False, "BackendUnreachable", error, generation, conditions, now)
    else:
        ready = _ready(True, "Accepted", "the adapter reads it", generation, conditions, now)
    return {"observedGeneration": generation, "conditions": [ready]}
