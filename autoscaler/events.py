"""Kubernetes Events (core/v1) about autoscalers, aggregated like client-go's recorder.

A repeat of the same (object, type, reason, message) bumps `count` and `lastTimestamp` of the event
already written instead of creating another, so `kubectl describe` shows "(x5 over 10s)".
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import UTC, datetime

import structlog

from shared.kube import ApiError, KubeClient, Obj, WriteDropped, WriteFence

log = structlog.get_logger(__name__)

COMPONENT = "surge-autoscaler"


@dataclass
class _Written:
    name: str
    count: int
    first: datetime


def _event_time(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class EventRecorder:
    def __init__(self, client: KubeClient, component: str = COMPONENT) -> None:
        self._client = client
        self._component = component
        self._written: dict[tuple[str, str, str, str, str, str], _Written] = {}

    async def record(
        self, involved: Obj, type_: str, reason: str, message: str, fence: WriteFence | None = None
    ) -> None:
        """Write (or bump) the event; `fence` is asked right before it is sent (a dropped write is
        counted by the fence, and not retried)."""
        meta = involved.get("metadata") or {}
        namespace, name, uid = meta.get("namespace", ""), meta.get("name", ""), meta.get("uid", "")
        key = (namespace, name, uid, type_, reason, message)
        now = datetime.now(UTC)
        previous = self._written.get(key)
        try:
            if previous is not None:
                previous.count += 1
                await self._client.request(
                    "PATCH",
                    f"/api/v1/namespaces/{namespace}/events/{previous.name}",
                    body={"count": previous.count, "lastTimestamp": _event_time(now)},
                    content_type="application/merge-patch+json",
                    fence=fence,
                )
                return
            event_name = f"{name}.{secrets.token_hex(8)}"
            body = {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": event_name, "namespace": namespace},
                "involvedObject": {
                    "apiVersion": involved.get("apiVersion", ""),
                    "kind": involved.get("kind", ""),
                    "namespace": namespace,
                    "name": name,
                    "uid": uid,
                    "resourceVersion": meta.get("resourceVersion", ""),
                },
                "type": type_,
                "reason": reason,
                "message": message,
                "source": {"component": self._component},
                "reportingComponent": self._component,
                "firstTimestamp": _event_time(now),
                "lastTimestamp": _event_time(now),
                "count": 1,
            }
            await self._client.request(
                "POST", f"/api/v1/namespaces/{namespace}/events", body=body, fence=fence
            )
            self._written[key] = _Written(event_name, 1, now)
        except WriteDropped:
            if previous is not None:
                previous.count -= 1  # the bump never reached the server
        except ApiError as err:
            if previous is not None and err.code == 404:
                # The aggregated event expired or was deleted: start a new one next time.
                del self._written[key]
            log.warning("event not recorded", object=f"{namespace}/{name}", reason=reason, error=err.message)

    def forget(self, namespace: str, name: str) -> None:
        for key in [k for k in self._written if k[0] == namespace and k[1] == name]:
            del self._written[key]
