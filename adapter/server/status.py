"""`metav1.Status` error bodies, with prometheus-adapter's codes and messages."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aiohttp import web

CUSTOM_GROUP = "custom.metrics.k8s.io"
EXTERNAL_GROUP = "external.metrics.k8s.io"


class StatusError(Exception):
    """An error answered as a `metav1.Status` body with the given HTTP code and reason."""

    def __init__(
        self, code: int, reason: str, message: str, details: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = dict(details) if details else None

    def body(self) -> dict[str, Any]:
        status: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
        }
        if self.reason:
            status["reason"] = self.reason
        if self.details:
            status["details"] = self.details
        status["code"] = self.code
        return status

    def response(self) -> web.Response:
        # Never a Retry-After header: client-go (rest/with_retry.go) would retry and stall the HPA worker.
        return web.json_response(self.body(), status=self.code)


def bad_request(message: str) -> StatusError:
    return StatusError(400, "BadRequest", message)


def not_found(message: str = "the server could not find the requested resource") -> StatusError:
    return StatusError(404, "NotFound", message)


def method_not_allowed(method: str) -> StatusError:
    return StatusError(
        405, "MethodNotAllowed", f"the server does not allow this method on the requested resource: {method}"
    )


def not_acceptable(supported: str = "application/json") -> StatusError:
    return StatusError(406, "NotAcceptable", f"only the following media types are accepted: {supported}")


def internal_error(cause: str) -> StatusError:
    # prometheus-adapter hides backend details behind a fixed cause; the message format is k8s.io/apiserver's.
    return StatusError(
        500, "InternalError", f"Internal error occurred: {cause}", {"causes": [{"message": cause}]}
    )


def metric_not_found(metric: str, group_resource: str) -> StatusError:
    return not_found(f"the server could not find the metric {metric} for {group_resource}")


def metric_not_found_for(metric: str, group_resource: str, name: str, selector: str = "") -> StatusError:
    message = f"the server could not find the metric {metric} for {group_resource} {name}"
    if selector:
        message += f" with selector {selector}"
    return StatusError(
        404, "NotFound", message, {"name": name, "group": CUSTOM_GROUP, "kind": group_resource}
    )


def object_not_found(resource: str, group: str, name: str) -> StatusError:
    """apimachinery's `NewNotFound`: `pods "p" not found`, `podmetrics.metrics.k8s.io "ns/p" not found`."""
    qualified = f"{resource}.{group}" if group else resource
    details = {"name": name, "group": group, "kind": resource} if group else {"name": name, "kind": resource}
    return StatusError(404, "NotFound", f'{qualified} "{name}" not found', details)
