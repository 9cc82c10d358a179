"""metav1.Status errors with the codes, reasons and messages kube-apiserver uses."""

from __future__ import annotations

from typing import Any, NamedTuple


def qualified(group: str, plural: str) -> str:
    """`deployments.apps`, or `pods` for the core group — how kube-apiserver names a resource in messages."""
    return f"{plural}.{group}" if group else plural


class ApiError(Exception):
    """An error the API answers with a `Status` body; raised by the store and the handlers alike."""

    def __init__(self, code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            body["details"] = self.details
        return body


def _details(group: str, plural: str, name: str) -> dict[str, Any]:
    details: dict[str, Any] = {"name": name}
    if group:
        details["group"] = group
    details["kind"] = plural
    return details


def not_found(group: str, plural: str, name: str) -> ApiError:
    return ApiError(
        404, "NotFound", f'{qualified(group, plural)} "{name}" not found', _details(group, plural, name)
    )


def already_exists(group: str, plural: str, name: str) -> ApiError:
    return ApiError(
        409,
        "AlreadyExists",
        f'{qualified(group, plural)} "{name}" already exists',
        _details(group, plural, name),
    )


def conflict(group: str, plural: str, name: str, why: str) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {qualified(group, plural)} "{name}": {why}',
        _details(group, plural, name),
    )


MODIFIED = "the object has been modified; please apply your changes to the latest version and try again"


class FieldError(NamedTuple):
    """One apimachinery `field.Error`: the field path, its type (a Status cause's `reason`) and its text."""

    field: str
    reason: str  # FieldValueInvalid, FieldValueRequired, FieldValueNotSupported, FieldValueTooMany, ...
    message: str  # the error body, e.g. `Invalid value: 0: must be greater than 0`


def invalid_fields(kind: str, group: str, name: str, errs: list[FieldError]) -> ApiError:
    """422 Invalid listing every cause; the message aggregates them like apimachinery's ErrorList
    (one error as is, several in brackets, repeated texts once)."""
    gk = f"{kind}.{group}" if group else kind
    texts = list(dict.fromkeys(f"{e.field}: {e.message}" for e in errs))
    summary = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    details = {
        "name": name,
        **({"group": group} if group else {}),
        "kind": kind,
        "causes": [{"reason": e.reason, "message": e.message, "field": e.field} for e in errs],
    }
    return ApiError(422, "Invalid", f'{gk} "{name}" is invalid: {summary}', details)


def invalid(
    kind: str, group: str, name: str, field: str, message: str, reason: str = "FieldValueInvalid"
) -> ApiError:
    """422 Invalid: `Deployment.apps "x" is invalid: spec.replicas: Invalid value: ...`."""
    return invalid_fields(kind, group, name, [FieldError(field, reason, message)])


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def route_not_found() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource", {})


def method_not_allowed(verb: str, group: str, plural: str) -> ApiError:
    """405 for `verb` on a resource that does not support it (the message is kube-apiserver's)."""
    return ApiError(
        405,
        "MethodNotAllowed",
        "the server does not allow this method on the requested resource",
        {
            "kind": plural,
            **({"group": group} if group else {}),
            "causes": [{"reason": "UnsupportedMethod", "message": verb}],
        },
    )


def unsupported_media_type(accepted: tuple[str, ...]) -> ApiError:
    return ApiError(
        415,
        "UnsupportedMediaType",
        "the body of the request was in an unknown format - "
        f"accepted media types include: {', '.join(accepted)}",
    )


def expired(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def request_entity_too_large(limit: int) -> ApiError:
    """413 for a request body over kube-apiserver's limit (its --max-request-bytes)."""
    return ApiError(413, "RequestEntityTooLarge", f"Request entity too large: limit is {limit}")
