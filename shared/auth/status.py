"""metav1.Status bodies for authentication and authorization failures, worded as k8s.io/apiserver does."""

from __future__ import annotations

from typing import Any

from shared.auth.attributes import RequestAttributes

_HTML_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})


def _status(code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
    }
    if details is not None:
        body["details"] = details
    body["code"] = code
    return body


def unauthorized() -> dict[str, Any]:
    return _status(401, "Unauthorized", "Unauthorized")


def _forbidden_reason(user: str, attributes: RequestAttributes) -> str:
    if not attributes.resource_request:
        return f"User {_quote(user)} cannot {attributes.verb} path {_quote(attributes.path)}"
    resource = attributes.resource
    if attributes.subresource:
        resource = f"{resource}/{attributes.subresource}"
    scope = (
        f"in the namespace {_quote(attributes.namespace)}" if attributes.namespace else "at the cluster scope"
    )
    return (
        f"User {_quote(user)} cannot {attributes.verb} resource {_quote(resource)} "
        f"in API group {_quote(attributes.api_group)} {scope}"
    )


def _quote(text: str) -> str:
    """Go's %q for the printable text these messages carry."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    escaped = "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in escaped)
    return f'"{escaped}"'


def forbidden(user: str, attributes: RequestAttributes, reason: str) -> dict[str, Any]:
    """403 body; `reason` is the SubjectAccessReview's status.reason (may be empty)."""
    message = _forbidden_reason(user, attributes).translate(_HTML_ESCAPES)
    if reason:
        message = f"{message}: {reason}"
    qualified = (
        f"{attributes.resource}.{attributes.api_group}" if attributes.api_group else attributes.resource
    )
    if not attributes.resource and not attributes.api_group:
        text = f"forbidden: {message}"
    elif attributes.name:
        text = f"{qualified} {_quote(attributes.name)} is forbidden: {message}"
    else:
        text = f"{qualified} is forbidden: {message}"
    details = _without_empty(
        {"name": attributes.name, "group": attributes.api_group, "kind": attributes.resource}
    )
    return _status(403, "Forbidden", text, details)


def internal_error(cause: str) -> dict[str, Any]:
    return _status(
        500, "InternalError", f"Internal error occurred: {cause}", {"causes": [{"message": cause}]}
    )


def _without_empty(fields: dict[str, str]) -> dict[str, str]:
    return {key: value for key, value in fields.items() if value}
