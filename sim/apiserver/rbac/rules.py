"""Request attributes and PolicyRule matching, exactly as kube-apiserver's RBAC authorizer matches them.

Facts from k8s.io/kubernetes `plugin/pkg/auth/authorizer/rbac/rbac.go` (`RuleAllows`) and
`pkg/apis/rbac/v1/evaluation_helpers.go`: a resource request needs the verb, the API group, the resource
(`resource/subresource` when there is a subresource; `*` matches everything, `*/<subresource>` that
subresource of any resource) and, when the rule lists any, the name. A non-resource request needs the verb
and the path: `*`, the exact path, or a prefix ending in `*`. Rules are compiled into sets once, so
matching a request costs a few set lookups per rule whatever the request holds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

ALL = "*"


@dataclass(frozen=True)
class Attributes:
    """What a request asks, as k8s.io/apiserver's authorizer.Attributes: who, and the resource or path."""

    user: str
    groups: frozenset[str]
    verb: str
    resource_request: bool
    namespace: str = ""
    api_group: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""
    path: str = ""

    @classmethod
    def from_review_spec(cls, spec: Mapping[str, Any]) -> Attributes:
        """From a SubjectAccessReview `spec` (user, groups, resourceAttributes or nonResourceAttributes)."""
        user, groups = str(spec.get("user") or ""), frozenset(str(g) for g in spec.get("groups") or ())
        resource = spec.get("resourceAttributes")
        if isinstance(resource, Mapping):
            return cls(
                user, groups, str(resource.get("verb") or ""), True,
                namespace=str(resource.get("namespace") or ""), api_group=str(resource.get("group") or ""),
                resource=str(resource.get("resource") or ""),
                subresource=str(resource.get("subresource") or ""), name=str(resource.get("name") or ""),
            )
        path = spec.get("nonResourceAttributes")
        path = path if isinstance(path, Mapping) else {}
        return cls(user, groups, str(path.get("verb") or ""), False, path=str(path.get("path") or ""))


def _strings(value: Any) -> frozenset[str]:
    return frozenset(str(v) for v in value) if isinstance(value, Iterable) and not isinstance(value, str) \
        else frozenset()


@dataclass(frozen=True)
class Rule:
    """One PolicyRule, compiled for matching."""

    verbs: frozenset[str]
    api_groups: frozenset[str]
    resources: frozenset[str]
    resource_names: frozenset[str]
    urls: frozenset[str]
    url_prefixes: tuple[str, ...]

    @classmethod
    def compile(cls, rule: Mapping[str, Any]) -> Rule:
        urls = _strings(rule.get("nonResourceURLs"))
        # Go's strings.TrimRight(url, "*"): every trailing star goes.
        prefixes = tuple(sorted(url.rstrip(ALL) for url in urls if url.endswith(ALL)))
        return cls(_strings(rule.get("verbs")), _strings(rule.get("apiGroups")),
                   _strings(rule.get("resources")), _strings(rule.get("resourceNames")), urls, prefixes)

    def allows(self, attrs: Attributes) -> bool:
        if ALL not in self.verbs and attrs.verb not in self.verbs:
            return False
        if not attrs.resource_request:
            return ALL in self.urls or attrs.path in self.urls or attrs.path.startswith(self.url_prefixes)
        return (
            (ALL in self.api_groups or attrs.api_group in self.api_groups)
            and self._resource_matches(attrs)
            and (not self.resource_names or attrs.name in self.resource_names)
        )

    def _resource_matches(self, attrs: Attributes) -> bool:
        if ALL in self.resources:
            return True
        if not attrs.subresource:
            return attrs.resource in self.resources
        return (f"{attrs.resource}/{attrs.subresource}" in self.resources
                or f"{ALL}/{attrs.subresource}" in self.resources)


def compile_rules(rules: Any) -> tuple[Rule, ...]:
    """A role's `rules` (None or a list of PolicyRule objects); entries that are not objects match nothing."""
    if not isinstance(rules, list):
        return ()
    return tuple(Rule.compile(rule) for rule in rules if isinstance(rule, Mapping))
