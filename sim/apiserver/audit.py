"""kube-apiserver's audit log, as `--audit-log-path` writes it with a policy of one level (`Metadata` or
`Request`) for every request and only the `ResponseComplete` stage: one `audit.k8s.io/v1` `Event` per
request, a JSON line
written when the answer is complete (a watch's when it ends). Who (`user`, `userAgent`, `sourceIPs`) did
what (`verb`, `objectRef`, `requestURI`) with what result (`responseStatus.code`) and when
(`requestReceivedTimestamp`, `stageTimestamp`), so tests and benchmarks can prove who wrote what, when.
At level `Request` an Event also carries the request's JSON body as `requestObject` (what was written:
the replicas of a scale update, the holder of a Lease), as kube-apiserver's does.

Every request is logged, the refused ones too (401, 403, injected faults), except those a partition
black-holed (faults.py), which never reached the server. Lines are written (and
flushed) on the server's loop as requests complete, as kube-apiserver's blocking log mode does.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from aiohttp import web

from sim.apiserver import authz
from sim.apiserver.faults import BLACKHOLED
from sim.apiserver.resources import Obj
from sim.apiserver.reviews import UserInfo

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
AuditLevel = Literal["Metadata", "Request"]


def _micro_time(value: datetime) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def object_ref(attrs: Obj) -> Obj | None:
    """The audit objectRef of a resource request's attributes (None for a non-resource path)."""
    ra = attrs.get("resourceAttributes")
    if ra is None:
        return None
    ref = {
        "resource": ra.get("resource", ""),
        "namespace": ra.get("namespace", ""),
        "name": ra.get("name", ""),
        "apiGroup": ra.get("group", ""),
        "apiVersion": ra.get("version", ""),
        "subresource": ra.get("subresource", ""),
    }
    return {k: v for k, v in ref.items() if v}


class AuditLog:
    """Appends one Event per request to `path`; `identify` names the caller of a request (None when it
    could not be authenticated)."""

    def __init__(
        self, path: Path, identify: Callable[[web.Request], UserInfo | None], level: AuditLevel = "Metadata"
    ) -> None:
        self.path = path
        self._identify = identify
        self._level = level
        self._file = path.open("a", encoding="utf-8")

    def close(self) -> None:
        self._file.close()

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        received = datetime.now(UTC)
        code = 500
        try:
            response = await handler(request)
            code = response.status
            return response
        except web.HTTPException as exc:
            code = exc.status
            raise
        finally:
            if not request.get(BLACKHOLED, False):
                self._write(request, received, code, await _json_body(request))

    def _write(self, request: web.Request, received: datetime, code: int, body: object) -> None:
        attrs = authz.attributes(request.method, request.path, request.query)
        verb = (attrs.get("resourceAttributes") or attrs["nonResourceAttributes"])["verb"]
        user = self._identify(request)
        event: Obj = {
            "kind": "Event",
            "apiVersion": "audit.k8s.io/v1",
            "level": "Metadata",
            "auditID": str(uuid.uuid4()),
            "stage": "ResponseComplete",
            "requestURI": request.raw_path,
            "verb": verb,
            "user": user.as_review_user() if user is not None else {},
            "sourceIPs": [request.remote] if request.remote else [],
            "userAgent": request.headers.get("User-Agent", ""),
        }
        ref = object_ref(attrs)
        created = _created_name(request, body)
        if ref is not None and created and "name" not in ref:
            # As kube-apiserver's LogRequestObject completes the objectRef of a create from the object,
            # at every level from Metadata on.
            ref["name"] = created
        if ref is not None:
            event["objectRef"] = ref
        if body is not None and self._level == "Request":
            event["requestObject"] = body
        event["responseStatus"] = {"metadata": {}, "code": code}
        event["requestReceivedTimestamp"] = _micro_time(received)
        event["stageTimestamp"] = _micro_time(datetime.now(UTC))
        self._file.write(json.dumps(event, separators=(",", ":")) + "\n")
        self._file.flush()


async def _json_body(request: web.Request) -> object:
    """The request's body parsed as JSON (None: no body, or not JSON, e.g. protobuf)."""
    if not request.body_exists:
        return None
    try:
        return json.loads(await request.read())
    except (ValueError, web.HTTPException, ConnectionError):
        return None


def _created_name(request: web.Request, body: object) -> str:
    """metadata.name of a POSTed JSON object (a create), "" for anything else."""
    if request.method != "POST" or not isinstance(body, dict):
        return ""
    meta = body.get("metadata") or {}
    name = meta.get("name") if isinstance(meta, dict) else None
    return name if isinstance(name, str) else ""
