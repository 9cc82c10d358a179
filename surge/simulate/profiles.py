"""Profiles from autoscaler YAML files: a HorizontalAutoscaler or an autoscaling/v2 HPA with one metric, or
with a formula over named metrics (each fed by its own series, surge.simulate.replay).

The spec is parsed and checked as the daemon does (`Source.read`: kube_json, the API's rules in validation),
and its sync period, schedules and predictive settings are read where the daemon's source reads them
(`spec.syncPeriodSeconds`, `spec.schedules` and `spec.predictive` of a HorizontalAutoscaler, the
annotations of an HPA). The status in the file is
dropped: a replay starts afresh.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from autoscaler.core import effective_metrics
from autoscaler.core.types import HPAStatus
from autoscaler.sources import SOURCES
from autoscaler.workqueue import sync_period
from surge.simulate.replay import SUPPORTED_TYPES, Profile

DEFAULT_PROFILE = "default"


class SpecError(ValueError):
    """The file is no usable autoscaler: the message says why, `position` (`:line:column`) where."""

    def __init__(self, message: str, position: str = "") -> None:
        super().__init__(message)
        self.position = position


def _yaml_error(err: yaml.MarkedYAMLError) -> SpecError:
    """One line: where the parser stopped, what it found, and where what it was parsing began."""
    mark = err.problem_mark or err.context_mark
    position = "" if mark is None else f":{mark.line + 1}:{mark.column + 1}"
    message = f"invalid YAML: {err.problem or err.context}"
    if err.problem and err.context and err.context_mark is not None and err.context_mark is not mark:
        started = err.context_mark
        message += f" ({err.context} at {started.line + 1}:{started.column + 1})"
    return SpecError(message, position)


def _one_object(path: Path) -> dict[str, Any]:
    try:
        documents = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    except yaml.MarkedYAMLError as err:
        raise _yaml_error(err) from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
        raise SpecError(f"cannot read: {err}") from None
    if len(documents) != 1:
        raise SpecError(f"expected one autoscaler object, found {len(documents)} YAML documents")
    if not isinstance(documents[0], dict):
        raise SpecError("not an autoscaler object (a YAML mapping)")
    return documents[0]


def load_profile(path: Path) -> Profile:
    """The profile of one file, named after the file's stem."""
    obj = _one_object(path)
    kind = (obj.get("apiVersion"), obj.get("kind"))
    source = next((s for s in SOURCES.values() if (s.api_version, s.kind) == kind), None)
    if source is None:
        raise SpecError(
            f"apiVersion {kind[0]!r} kind {kind[1]!r} is neither a HorizontalAutoscaler "
            "(autoscaling.surge.dev/v1alpha1) nor a HorizontalPodAutoscaler (autoscaling/v2)"
        )
    try:
        hpa, violations = source.read(obj)
    except (ValueError, TypeError, AttributeError, KeyError) as err:
        raise SpecError(f"not an autoscaler spec: {err}") from None
    if violations:
        raise SpecError("the API would refuse this spec: " + "; ".join(str(v) for v in violations))
    assert hpa is not None
    metrics = effective_metrics(hpa.spec)
    if hpa.spec.formula is None and len(metrics) != 1:
        raise SpecError(f"the spec has {len(metrics)} metrics; a replay feeds one series, so give it one")
    if hpa.spec.formula is not None and not all(m.input_name for m in metrics):
        raise SpecError("with a formula every metric must be named: a replay feeds the formula's inputs only")
    for metric in metrics:
        if metric.type not in SUPPORTED_TYPES:
            raise SpecError(f"metric type {metric.type!r} cannot be replayed")
    return Profile(path.stem, replace(hpa, status=HPAStatus()), sync_period(source.sync_period_of(obj)))


def default_profile(profile: Profile) -> Profile:
    """The built-in HPA's settings for the same spec: no behavior (so no tolerance of its own either),
    no forecasts (spec.predictive), no burst mode (spec.burst), no cooldown (spec.cooldownPeriodSeconds) and
    the controller's own 15 s period."""
    spec = replace(profile.hpa.spec, behavior=None, predictive=None, burst=None, cooldown=None)
    return Profile(DEFAULT_PROFILE, replace(profile.hpa, spec=spec), sync_period(None))
