"""prometheus-adapter's config file as `surge convert` finds it: the file itself, or the ConfigMap the chart
of prometheus-adapter renders (its `data.config.yaml`), read by the adapter's own parser.

The config is detected by its shape: a mapping of `rules`, `externalRules` or `resourceRules` without
`apiVersion` or `kind`. `adapter/config.py`'s `parse_config` reads and validates it, as strictly as
prometheus-adapter does (unknown and duplicate keys, RE2 regexes, Go templates), so that a config the
adapter refuses is refused here too, naming its line. Each rule is also kept as written, from the same
YAML: the objects copy it field for field, the templates unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from adapter.config import YAML_LOADER, ConfigError, DiscoveryRule, parse_config
from surge.convert.problems import ConvertError

CONFIG_KEYS = frozenset({"rules", "externalRules", "resourceRules"})
CONFIG_MAP_KEY = "config.yaml"  # the key the chart's ConfigMap holds the config in, mounted as that file
_TRUE = frozenset({"yes", "true", "on", "y"})  # YAML 1.1's, as go-yaml v2 (the adapter's) reads them


@dataclass(frozen=True)
class WrittenRule:
    """One entry of `rules` or `externalRules`: where it is, its fields as written, and as parsed."""

    where: str  # `rules[3]`, `externalRules[0]`
    external: bool
    fields: dict[str, Any]
    rule: DiscoveryRule


@dataclass(frozen=True)
class AdapterConfigFile:
    rules: list[WrittenRule]
    has_resource_rules: bool


def is_adapter_config(document: Any) -> bool:
    """Whether `document` has the shape of a prometheus-adapter config (not of a Kubernetes object)."""
    return (
        isinstance(document, dict)
        and not CONFIG_KEYS.isdisjoint(document)
        and "apiVersion" not in document
        and "kind" not in document
    )


def configmap_config(document: Any) -> str | None:
    """The config text of a ConfigMap holding one at `data.config.yaml`, else None."""
    if not isinstance(document, dict) or document.get("kind") != "ConfigMap":
        return None
    data = document.get("data")
    text = data.get(CONFIG_MAP_KEY) if isinstance(data, dict) else None
    return text if isinstance(text, str) else None


def read_config(text: str, source: str) -> AdapterConfigFile:
    """The config's rules, parsed and as written; ConvertError (the parser's message, naming `source`
    and the line) when prometheus-adapter would refuse the config."""
    try:
        parsed = parse_config(text, source)
    except ConfigError as err:
        raise ConvertError(str(err)) from None
    # The parser composed this text without error, and the nodes below have the shapes it checked.
    root = yaml.compose(text, Loader=YAML_LOADER)
    written = _plain(root) if root is not None else {}
    rules = [
        WrittenRule(f"{section}[{i}]", section == "externalRules", fields, rule)
        for section, parsed_rules in (("rules", parsed.rules), ("externalRules", parsed.external_rules))
        for i, (fields, rule) in enumerate(zip(written.get(section) or [], parsed_rules, strict=True))
    ]
    return AdapterConfigFile(rules, parsed.resource_rules is not None)


def _plain(node: yaml.Node, key: str = "") -> Any:
    """A node as the parser reads it: every scalar a string (`seriesQuery: 0o17` is the text `0o17`),
    but `namespaced`, a boolean; a null value is an absent key."""
    if isinstance(node, yaml.MappingNode):
        entries = ((str(k.value), v) for k, v in node.value)
        return {name: _plain(value, name) for name, value in entries if value.tag != "tag:yaml.org,2002:null"}
    if isinstance(node, yaml.SequenceNode):
        return [_plain(item) for item in node.value]
    if key == "namespaced":
        return str(node.value).lower() in _TRUE
    return str(node.value)
