"""Resource ↔ Prometheus label association of one rule (`resources.overrides` / `resources.template`).

Forward (discovery): a series label is an override key, or matches the template turned into an
anchored regex (`.Group` → `(?P<group>.+?)`, `.Resource` → `(?P<resource>.+?)`); the captured
names are resolved through the resource mapper, and labels that resolve to nothing are skipped.
Reverse (requests): an override naming the resource, else the template rendered with the singular
resource and the group with `.`/`-` replaced by `_`.
"""

from collections.abc import Mapping

import re2

from adapter.gotemplate import GoStruct, Template, TemplateExecError
from adapter.naming.names import compile_regex
from adapter.naming.resources import GroupResource, ResourceInfo, ResourceMapper

_TEMPLATE_TYPE = "naming.resourceTemplateArgs"
RESOURCE_TEMPLATE_FIELDS = frozenset({"Group", "Resource"})


class ResourceAssociation:
    """How one rule maps labels to resources and back."""

    def __init__(self, overrides: Mapping[str, GroupResource], template: Template | None) -> None:
        self.overrides = dict(overrides)
        self.template = template
        self._label_regex: re2._Regexp | None = None
        if template is not None:
            pattern = template.render(
                GoStruct(_TEMPLATE_TYPE, {"Group": "(?P<group>.+?)", "Resource": "(?P<resource>.+?)"})
            )
            # Raises re2.error for a template that does not form a regex; config loading reports it.
            self._label_regex = compile_regex(f"^{pattern}$")

    def resource_for_label(self, label: str, mapper: ResourceMapper) -> ResourceInfo | None:
        """The resource a series label refers to, or None."""
        override = self.overrides.get(label)
        if override is not None:
            return mapper.resolve(override.group, override.resource)
        if self._label_regex is None:
            return None
        match = self._label_regex.search(label)
        if match is None or "resource" not in self._label_regex.groupindex:
            return None
        group = match.group("group") if "group" in self._label_regex.groupindex else ""
        return mapper.resolve(group or "", match.group("resource"))

    def label_for_resource(self, info: ResourceInfo, mapper: ResourceMapper) -> str | None:
        """The label holding names of `info` objects, or None if the rule cannot name it."""
        for label, override in self.overrides.items():
            resolved = mapper.resolve(override.group, override.resource)
            if resolved is not None and resolved.group_resource == info.group_resource:
                return label
        if self.template is None:
            return None
        group = info.group.replace(".", "_").replace("-", "_")
        try:
            return self.template.render(GoStruct(_TEMPLATE_TYPE, {"Group": group, "Resource": info.singular}))
        except TemplateExecError:
            return None

    def unresolved_overrides(self, mapper: ResourceMapper) -> list[str]:
        """Override entries whose resource discovery does not know (prometheus-adapter refuses to start)."""
        return [
            f"{label}: {gr}"
            for label, gr in self.overrides.items()
            if mapper.resolve(gr.group, gr.resource) is None
        ]
