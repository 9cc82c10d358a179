"""Shadow profiles (issue 35): a shadowed object decides with its own settings, or with the profile its
annotation `autoscaling.surge.dev/shadow-profile` names, so an owner sees what Surge's fast settings would
have done beside the incumbent before switching them on.

`apply_profile` is a pure transform of the raw object (the source's parsers then read the result as any
object): it writes the profile's settings where the object's source reads them, the spec fields of a
HorizontalAutoscaler (`spec.syncPeriodSeconds`, `spec.burst`, `spec.predictive`) and the annotations of
an autoscaling/v2 HPA (sources.py's `*_ANNOTATION`), and `spec.behavior.scaleUp` on both. Which source an
object is comes from its `apiVersion`: a custom resource always carries it, and kube-apiserver leaves it
out of the items of a built-in type's list, so an object without one is an HPA. A profile overrides only
what it names; the metrics, minReplicas, maxReplicas, scaleDown and every other setting stay the object's.

The profiles:
- `fast`: the sync period 1 s and a scale-up as fast as the metrics allow: stabilizationWindowSeconds 0,
  selectPolicy Max, one policy of Percent 1000 per 1 s (the other scaleUp fields, a tolerance, stay the
  object's). These are demo/autoscaling.py's "fast" profile, which the demo measures against the built-in
  HPA's 15 s period and default behavior.
- `burst`: `fast`, and burst mode on: the object's own `burst` when it has one, else
  {windowSeconds: 6, threshold: 2.0}, Knative KPA's panic window and threshold that docs/algorithm.md
  ("Burst mode") anchors burst mode on (the parser has no defaults: both fields are required).
- `predictive`: `fast`, and predictive scaling applied: the object's own `predictive` with mode Apply
  when it has one (a ForecastOnly spec then acts in the shadow), else docs/algorithm.md's example
  (lookbackSeconds 604800, horizonSeconds 300, seasonsSeconds [86400, 604800]: a week of history, daily
  and weekly seasons, five minutes ahead) with mode Apply and the parser's maxForecastError (0.2). Without
  a historyQuery only direct PromQL metrics have a history (autoscaler/history.py); the others' forecasts
  say "no history: set spec.predictive.historyQuery".

A profile that would make a valid object invalid (burst on an object without a Pods, Object or External
metric read over a short window, burst or predictive beside a formula) is not applied: `apply_profile`
returns the object as it is and says why, so the shadow keeps deciding with the object's own settings
instead of refusing the spec.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from autoscaler.core.types import PREDICTIVE_APPLY
from autoscaler.sources import (
    BURST_ANNOTATION,
    CRD_SOURCE,
    HPA_SOURCE,
    PREDICTIVE_ANNOTATION,
    SYNC_PERIOD_ANNOTATION,
    Source,
)

if TYPE_CHECKING:  # only a type here, as in sources.py
    from shared.kube import Obj

PROFILE_ANNOTATION = "autoscaling.surge.dev/shadow-profile"

FAST_SYNC_PERIOD_SECONDS = 1
FAST_SCALE_UP: dict[str, Any] = {
    "stabilizationWindowSeconds": 0,
    "selectPolicy": "Max",
    "policies": [{"type": "Percent", "value": 1000, "periodSeconds": 1}],
}
DEFAULT_BURST: dict[str, Any] = {"windowSeconds": 6, "threshold": 2.0}
DEFAULT_PREDICTIVE: dict[str, Any] = {
    "lookbackSeconds": 604800,
    "horizonSeconds": 300,
    "seasonsSeconds": [86400, 604800],
}


@dataclass(frozen=True)
class ShadowProfile:
    """`fast`'s settings (every profile's), and whether burst mode and predictive scaling are turned on."""

    burst: bool = False
    predictive: bool = False


PROFILES = {
    "fast": ShadowProfile(),
    "burst": ShadowProfile(burst=True),
    "predictive": ShadowProfile(predictive=True),
}


def apply_profile(obj: Obj) -> tuple[Obj, str | None]:
    """The object with the profile its annotation names applied (a new object; `obj` is not changed), and
    None. `obj` itself and None without the annotation; `obj` itself and a one-line error when the name is
    no profile's or the profile does not apply to the object."""
    name = ((obj.get("metadata") or {}).get("annotations") or {}).get(PROFILE_ANNOTATION)
    if name is None:
        return obj, None
    profile = PROFILES.get(name.strip())
    if profile is None:
        known = ", ".join(sorted(PROFILES))
        return obj, f"{PROFILE_ANNOTATION}: unknown profile {name!r} (known: {known})"
    source = source_of(obj)
    profiled = _with_profile(obj, profile, source)
    added = _introduced_violations(obj, profiled, source)
    if added:
        return obj, f"{PROFILE_ANNOTATION}: profile {name!r} does not apply: {added}"
    return profiled, None


def source_of(obj: Obj) -> Source:
    """The source an object is read by: see the module docstring."""
    api_version = obj.get("apiVersion")
    return CRD_SOURCE if api_version == CRD_SOURCE.api_version else HPA_SOURCE


def _with_profile(obj: Obj, profile: ShadowProfile, source: Source) -> Obj:
    profiled = copy.deepcopy(obj)
    spec = profiled["spec"] = profiled.get("spec") or {}
    behavior = spec.get("behavior") or {}
    scale_up = {**(behavior.get("scaleUp") or {}), **copy.deepcopy(FAST_SCALE_UP)}
    spec["behavior"] = {**behavior, "scaleUp": scale_up}
    settings = _Settings(profiled, source)
    settings.set_sync_period(FAST_SYNC_PERIOD_SECONDS)
    if profile.burst and settings.get(BURST_ANNOTATION, "burst") is None:
        settings.set(BURST_ANNOTATION, "burst", DEFAULT_BURST)
    if profile.predictive:
        own = settings.get(PREDICTIVE_ANNOTATION, "predictive")
        # A setting that is no JSON object is left for the source to refuse, as without a profile.
        if own is None or isinstance(own, dict):
            predictive = DEFAULT_PREDICTIVE if own is None else own
            settings.set(PREDICTIVE_ANNOTATION, "predictive", {**predictive, "mode": PREDICTIVE_APPLY})
    return profiled


class _Settings:
    """Surge's own settings of a (copied) object where its source keeps them: spec fields of the CRD, JSON
    annotations of an HPA."""

    def __init__(self, obj: Obj, source: Source) -> None:
        self._obj = obj
        self._in_annotations = source.settings_in_annotations

    def _annotations(self) -> dict[str, str]:
        metadata = self._obj.setdefault("metadata", {})
        if metadata.get("annotations") is None:
            metadata["annotations"] = {}
        annotations: dict[str, str] = metadata["annotations"]
        return annotations

    def set_sync_period(self, seconds: int) -> None:
        if self._in_annotations:
            self._annotations()[SYNC_PERIOD_ANNOTATION] = str(seconds)
        else:
            self._obj["spec"]["syncPeriodSeconds"] = seconds

    def get(self, annotation: str, field: str) -> Any:
        """The setting's JSON (None: absent); an annotation that is no JSON is returned as its text."""
        if not self._in_annotations:
            return self._obj["spec"].get(field)
        text = self._annotations().get(annotation)
        try:
            return None if text is None else json.loads(text)
        except ValueError:
            return text

    def set(self, annotation: str, field: str, value: dict[str, Any]) -> None:
        if self._in_annotations:
            self._annotations()[annotation] = json.dumps(value)
        else:
            self._obj["spec"][field] = copy.deepcopy(value)


def _introduced_violations(obj: Obj, profiled: Obj, source: Source) -> str:
    """The rules the profiled object breaks that the object itself does not, joined ("" when none). An
    object the source cannot read at all is the object's own problem, which the controller reports."""
    try:
        before = set(source.read(obj)[1])
        after = source.read(profiled)[1]
    except ValueError:
        return ""
    return "; ".join(str(violation) for violation in after if violation not in before)
