"""Authorization attributes of a request, computed as k8s.io/apiserver's RequestInfoFactory does.

The SubjectAccessReview carries these attributes for the original user, so RBAC rules written for
prometheus-adapter (custom metrics: verb `get`, the metric as subresource; external: verb `list`, the
metric as resource) keep meaning the same thing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from shared.auth.identity import UserInfo

_API_PREFIXES = frozenset({"api", "apis"})
_GROUPLESS_PREFIXES = frozenset({"api"})
_SPECIAL_VERBS = frozenset({"proxy", "watch"})
_SPECIAL_VERBS_NO_SUBRESOURCES = frozenset({"proxy"})
_NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})
_METHOD_VERBS = {
    "POST": "create",
    "GET": "get",
    "HEAD": "get",
    "PUT": "update",
    "PATCH": "patch",
    "DELETE": "delete",
}
# List-option query parameters that must parse as integers, or the whole decode fails upstream.
_INTEGER_LIST_OPTIONS = ("limit", "timeoutSeconds")


@dataclass(frozen=True)
class RequestAttributes:
    verb: str
    path: str
    resource_request: bool
    namespace: str = ""
    api_group: str = ""
    api_version: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""


class InvalidRequestPath(ValueError):
    """Upstream answers 500 "failed to create RequestInfo" for these."""


class _BadListOptions(ValueError):
    pass


def _field_selector_name(raw: str) -> str:
    """The value of a `metadata.name=`/`==` term of a field selector, or "" (upstream RequiresExactMatch)."""
    terms: list[str] = []
    current: list[str] = []
    escaped = False
    for char in raw:
        if escaped:
            current.append("\\" + char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == ",":
            terms.append("".join(current))
            current = []
        else:
            current.append(char)
    if escaped:
        raise _BadListOptions("trailing backslash in field selector")
    terms.append("".join(current))
    found = ""
    for term in terms:
        if not term:
            continue
        for operator in ("!=", "==", "="):
            index = term.find(operator)
            if index >= 0:
                break
        else:
            raise _BadListOptions(f"invalid field selector term {term!r}")
        key, value = term[:index], _unescape_field_value(term[index + len(operator) :])
        if key == "metadata.name" and operator != "!=" and not found:
            found = value
    return found


def _unescape_field_value(value: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(value):
        if value[i] == "\\":
            if i + 1 >= len(value) or value[i + 1] not in "\\,=!":
                raise _BadListOptions("invalid escape in field selector value")
            out.append(value[i + 1])
            i += 2
        else:
            out.append(value[i])
            i += 1
    return "".join(out)


def _watch_requested(query: Mapping[str, Sequence[str]]) -> bool:
    values = query.get("watch", ())
    return bool(values) and values[0] != "0" and values[0].lower() != "false"


def _is_valid_path_segment(name: str) -> bool:
    return name not in {".", ".."} and "/" not in name and "%" not in name


def _list_name(query: Mapping[str, Sequence[str]]) -> str:
    for key in _INTEGER_LIST_OPTIONS:
        for value in query.get(key, ())[:1]:
            try:
                int(value)
            except ValueError:
                return ""
    try:
        name = _field_selector_name(query.get("fieldSelector", ("",))[0])
    except _BadListOptions:
        return ""
    return name if name and _is_valid_path_segment(name) else ""


def request_attributes(method: str, path: str, query: Mapping[str, Sequence[str]]) -> RequestAttributes:
    """Attributes for a decoded path and its decoded query (every value of each key, in order)."""
    non_resource = RequestAttributes(verb=method.lower(), path=path, resource_request=False)
    parts = path.strip("/").split("/")
    if len(parts) < 3 or parts[0] not in _API_PREFIXES:
        return non_resource
    prefix, parts = parts[0], parts[1:]
    group = ""
    if prefix not in _GROUPLESS_PREFIXES:
        if len(parts) < 3:
            return non_resource
        group, parts = parts[0], parts[1:]
    version, parts = parts[0], parts[1:]

    if parts[0] in _SPECIAL_VERBS:
        if len(parts) < 2:
            raise InvalidRequestPath(f"unable to determine kind and namespace from url {path}")
        verb, parts = parts[0], parts[1:]
    else:
        verb = _METHOD_VERBS.get(method.upper(), "")

    namespace = ""
    if parts[0] == "namespaces" and len(parts) > 1:
        namespace = parts[1]
        if len(parts) > 2 and parts[2] not in _NAMESPACE_SUBRESOURCES:
            parts = parts[2:]

    resource = parts[0]
    name = parts[1] if len(parts) >= 2 else ""
    subresource = parts[2] if len(parts) >= 3 and verb not in _SPECIAL_VERBS_NO_SUBRESOURCES else ""

    if not name and verb == "get":
        verb = "watch" if _watch_requested(query) else "list"
        name = _list_name(query)
    if not name and verb == "delete":
        verb = "deletecollection"
    return RequestAttributes(
        verb=verb,
        path=path,
        resource_request=True,
        namespace=namespace,
        api_group=group,
        api_version=version,
        resource=resource,
        subresource=subresource,
        name=name,
    )


def _without_empty(fields: dict[str, str]) -> dict[str, str]:
    return {key: value for key, value in fields.items() if value}


def access_review_spec(user: UserInfo, attributes: RequestAttributes) -> dict[str, Any]:
    """The SubjectAccessReview `spec` for this user and request (empty strings omitted)."""
    spec: dict[str, Any] = {}
    if attributes.resource_request:
        spec["resourceAttributes"] = _without_empty(
            {
                "namespace": attributes.namespace,
                "verb": attributes.verb,
                "group": attributes.api_group,
                "version": attributes.api_version,
                "resource": attributes.resource,
                "subresource": attributes.subresource,
                "name": attributes.name,
            }
        )
    else:
        spec["nonResourceAttributes"] = _without_empty({"path": attributes.path, "verb": attributes.verb})
    spec["user"] = user.name
    if user.uid:
        spec["uid"] = user.uid
    if user.groups:
        spec["groups"] = list(user.groups)
    if user.extra:
        spec["extra"] = {key: list(values) for key, values in user.extra.items()}
    return spec
