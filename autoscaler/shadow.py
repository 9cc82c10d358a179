"""Shadow mode (issue 35): Surge decides beside the incumbent autoscaler (the built-in HPA, or KEDA's HPA)
and never writes, so its decisions can be compared with the incumbent's before switching.

A daemon started with `--mode=shadow` shadows every object; otherwise an object shadows with the annotation
`autoscaling.surge.dev/mode: shadow` (sources.MODE_ANNOTATION). A shadowed object's reconcile reads the same
spec, scale, pods and metrics and decides with Surge's own settings; its decision is recorded (decision
records and log lines say `shadow: true`) and no write goes out: its writes are fenced by a `ShadowFence`,
which admits none, so a write path that forgets shadow mode still sends nothing.

What Surge would have written is kept in memory instead (`OwnState`), so that each decision follows from
Surge's own earlier ones as it would once acting, not from the incumbent's:
* the replicas it would have scaled to: the next decision takes them as the target's current replicas
  (`as_if_acted`). Its stabilization windows and rate limits count the scale events it would have made;
  with the incumbent's replicas as current instead, a policy's period start (current minus what was added
  in the period) goes wrong, and the shadow fell back to the incumbent's count one second after each
  scale-up it decided, then rose again. The metrics are still the target's own: a per-pod average times
  the pods that report it is the workload's load, whoever scaled it.
* the cooldown's last-active time (core/cooldown.py), which `with_own_state` puts back into the status.
The other status fields (the last scale time, the conditions) are the incumbent's for an HPA: what the
target really went through. A restarted shadow daemon starts again from the target's replicas.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

import structlog

from autoscaler.core.decision import Decision
from autoscaler.core.types import HPA, Scale
from autoscaler.decisions import Incumbent
from autoscaler.leader import Fence
from shared.kube import Obj

log = structlog.get_logger(__name__)

ACT = "act"
SHADOW = "shadow"
MODES = (ACT, SHADOW)


def object_mode(daemon_mode: str, annotation: str | None) -> str:
    """The mode of one object: shadow whenever the daemon is (an annotation cannot make a shadow daemon
    write: it runs beside an incumbent, without leader election); else the annotation's, `act` when absent.
    A value other than `act` or `shadow` (a typo) reads as shadow: writing for an object whose owner meant
    to keep its incumbent in charge would fight that incumbent, while shadowing writes nothing."""
    if daemon_mode == SHADOW:
        return SHADOW
    if annotation is None or annotation.strip() == ACT:
        return ACT
    return SHADOW


@dataclass(frozen=True, slots=True)
class OwnState:
    """What Surge would have written for a shadowed object, kept in memory: the replicas it would have
    scaled the target to, and its cooldown's last-active time (None: not decided yet)."""

    replicas: int | None = None
    last_active: datetime | None = None

    def after(self, decision: Decision) -> OwnState:
        """The state once `decision` would have been acted on."""
        return OwnState(
            replicas=decision.desired_replicas if decision.rescale else self.replicas,
            last_active=decision.status.last_active_time or self.last_active,
        )


def as_if_acted(scale: Scale, replicas: int | None) -> Scale:
    """The target's scale as Surge would have left it: `replicas` (its last decided count) as the spec's
    replicas; the scale as read when Surge has decided nothing yet."""
    return scale if replicas is None else replace(scale, spec_replicas=replicas)


def with_own_state(hpa: HPA, last_active: datetime | None) -> HPA:
    """The autoscaler a shadow decision is made on: its status's lastActiveTime is the later of the one read
    (an annotation or status field written while Surge acted) and `last_active`, the one Surge's own last
    shadow decision set and could not write. Without it, a scale-to-zero autoscaler's shadow would read
    "never active" at every decision and propose zero as soon as its metrics go idle, not a cooldown later."""
    read = hpa.status.last_active_time
    if last_active is None or (read is not None and read >= last_active):
        return hpa
    return replace(hpa, status=replace(hpa.status, last_active_time=last_active))


def incumbent_of(status: Obj | None) -> Incumbent:
    """What the incumbent's status says (an autoscaling/v2 HPA's status.currentReplicas and
    status.desiredReplicas, written by the built-in HPA controller); None for a field absent or not an
    integer (an HPA it has not reconciled yet)."""

    def replicas(name: str) -> int | None:
        value = (status or {}).get(name)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    return Incumbent(current=replicas("currentReplicas"), desired=replicas("desiredReplicas"))


class ShadowFence:
    """The fence of a shadowed object's writes: it admits none. `holds` is the lease's (None: a single
    replica), so a shadowed object is still reconciled only where its lease is held."""

    def __init__(self, lease: Fence | None) -> None:
        self._lease = lease

    def holds(self) -> bool:
        return self._lease is None or self._lease.holds()

    def admit(self, method: str, path: str) -> bool:
        # The controller writes nothing for a shadowed object: reaching here is a write path that does not
        # know shadow mode, which the fence stops.
        log.warning("write refused: shadow mode", method=method, path=path)
        return False
