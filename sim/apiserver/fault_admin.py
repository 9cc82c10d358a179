"""`/debug/sim/faults`: the fault injection of faults.py over HTTP, for system:masters only, so that a
`python -m sim` cluster can be put through faults by a process that does not share its loop (a chaos
campaign, a person with curl):

* `GET /debug/sim/faults`: the faults in force, each with its id and hit count.
* `POST /debug/sim/faults` with a JSON object of `Faults.add`'s arguments (`path` required; `method`,
  `latency`, `error`, `rate`, `times`, `watch`, `user`, `blackhole`): 201 with the fault and its id.
* `DELETE /debug/sim/faults/<id>` lifts one; `DELETE /debug/sim/faults` lifts them all.
* `POST /debug/sim/faults/drop-watches`, `POST /debug/sim/faults/expire-watches` (`{"count": N}`),
  `POST /debug/sim/faults/restart` (`{"seconds": S}`: answered first, then the listener goes down).

Bad input is a 400 `Status` naming the field; anyone but system:masters gets 403, whatever the
authorization mode (under AlwaysAllow every user may do everything else).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
from typing import Any

from aiohttp import web

from sim.apiserver import errors
from sim.apiserver.errors import ApiError
from sim.apiserver.faults import Fault, Faults
from sim.apiserver.handlers import json_response
from sim.apiserver.reviews import UserInfo

PREFIX = "/debug/sim/faults"
_MASTERS = "system:masters"
# Each argument of Faults.add with the types its JSON value may have.
_FIELDS: dict[str, tuple[type, ...]] = {
    "path": (str,),
    "method": (str, type(None)),
    "latency": (int, float),
    "error": (int, type(None)),
    "rate": (int, float),
    "times": (int, type(None)),
    "watch": (bool, type(None)),
    "user": (str, type(None)),
    "blackhole": (bool,),
}


class FaultAdmin:
    def __init__(self, faults: Faults) -> None:
        self._faults = faults
        self._ids = itertools.count(1)
        self._by_id: dict[int, Fault] = {}
        self._restarts: set[asyncio.Task[None]] = set()

    async def handle(self, request: web.Request, user: UserInfo, rest: list[str]) -> web.StreamResponse:
        if _MASTERS not in user.groups:
            message = f'User "{user.name}" cannot use {PREFIX}: system:masters only'
            raise ApiError(403, "Forbidden", message, {})
        self._forget_lifted()
        match request.method, rest:
            case "GET", []:
                return json_response({"faults": [self._shown(i, f) for i, f in self._by_id.items()]})
            case "POST", []:
                return self._add(await _json_object(request))
            case "DELETE", []:
                self._faults.clear()
                self._by_id.clear()
                return json_response({"faults": []})
            case "DELETE", [fault_id]:
                fault = self._by_id.pop(_id(fault_id), None)
                if fault is None:
                    raise errors.route_not_found()
                self._faults.remove(fault)
                return json_response(self._shown(int(fault_id), fault))
            case "POST", ["drop-watches"]:
                self._faults.drop_watches()
                return json_response({})
            case "POST", ["expire-watches"]:
                count = (await _json_object(request)).get("count", 1)
                if not isinstance(count, int) or isinstance(count, bool) or count < 1:
                    raise errors.bad_request("count: a positive integer")
                self._faults.expire_watches(count)
                return json_response({})
            case "POST", ["restart"]:
                seconds = (await _json_object(request)).get("seconds", 1.0)
                if not _number(seconds) or not 0 <= seconds <= 600:
                    raise errors.bad_request("seconds: a number from 0 to 600")
                # Answered before the listener goes down (the restart drops this connection too).
                task = asyncio.get_running_loop().create_task(self._faults.restart(float(seconds)))
                self._restarts.add(task)
                task.add_done_callback(self._restarts.discard)
                return json_response({"seconds": seconds})
        raise errors.route_not_found()

    def _add(self, body: dict[str, Any]) -> web.Response:
        unknown = sorted(set(body) - set(_FIELDS))
        if unknown:
            raise errors.bad_request(f"unknown field {unknown[0]!r}; known: {', '.join(_FIELDS)}")
        if "path" not in body:
            raise errors.bad_request("path: required (a regular expression searched in the request path)")
        for name, value in body.items():
            allowed = _FIELDS[name]
            if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
                raise errors.bad_request(f"{name}: wrong type {type(value).__name__}")
        try:
            fault = self._faults.add(**body)
        except (ValueError, TypeError, re.error) as err:
            raise errors.bad_request(f"{err}") from err
        fault_id = next(self._ids)
        self._by_id[fault_id] = fault
        return json_response(self._shown(fault_id, fault), status=201)

    def _forget_lifted(self) -> None:
        """Faults used up (`times`) or lifted in process are no longer listed."""
        active = {id(f) for f in self._faults.active}
        for fault_id in [i for i, f in self._by_id.items() if id(f) not in active]:
            del self._by_id[fault_id]

    @staticmethod
    def _shown(fault_id: int, fault: Fault) -> dict[str, Any]:
        return {"id": str(fault_id), **fault.describe()}


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _id(text: str) -> int:
    return int(text) if text.isdigit() else -1


async def _json_object(request: web.Request) -> dict[str, Any]:
    raw = await request.read()
    if not raw:
        return {}
    try:
        body = json.loads(raw)
    except ValueError as err:
        raise errors.bad_request(f"the body is not JSON: {err}") from err
    if not isinstance(body, dict):
        raise errors.bad_request("the body must be a JSON object")
    return body
