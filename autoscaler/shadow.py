"""Shadow mode (issue 35): Surge decides beside the incumbent autoscaler (the built-in HPA, or KEDA's HPA)
and never writes, so its decisions can be compared with the incumbent's before switching.

A daemon started with `--mode=shadow` shadows every object; otherwise an object shadows with the annotation
`autoscaling.surge.dev/mode: shadow` (sources.MODE_ANNOTATION). A shadowed object's reconcile reads the same
spec, scale, pods and metrics and decides with Surge's own settings; its decision is recorded (decision
records and log lines say `shadow: true`) and no write goes out: its writes are fenced by a `ShadowFence`,
which admits none, so a write path that forgets shadow mode still sends nothing.

What Surge keeps in an object's status for its next decisions is not written either: of it, only the
cooldown's last-active time (core/cooldown.py) is Surge's own state, so the controller keeps a shadowed
object's in memory and `with_own_state` puts it back before each decision (the other status fields, the
last scale time and the conditions, are the incumbent's for an HPA: what the target really went through).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

import structlog

from autoscaler.core.types import HPA
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
