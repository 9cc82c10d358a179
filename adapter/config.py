"""prometheus-adapter's `--config` YAML: strict loading, validation, and the default rule sets.

The file format is prometheus-adapter's, unchanged: `rules`, `externalRules`, `resourceRules`. Loading is
strict like Go's `yaml.UnmarshalStrict`: an unknown or duplicate key is an error naming its line.
Regexes are RE2 (google-re2); `metricsQuery`, `resources.template`, `containerQuery` and
`nodeQuery` are parsed as Go templates with `<<` `>>` delimiters at load time, so template errors
are start-up errors. Everything wrong raises `ConfigError`.

Reading and parsing grow with the file, so the daemon runs them in a worker thread (at start-up and for
every reload) and reads at most `--config-max-bytes`. YAML is composed by libyaml (`CSafeLoader`): on a
1 MiB file of 3,210 rules it composes in 0.39 s where PyYAML's pure-Python `SafeLoader` takes 1.8 s
(the whole parse, regexes and templates included: 0.9 s against 2.5 s).
"""

import gc
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import re2
import yaml

from adapter.gotemplate import Template, TemplateError, TemplateExecError
from adapter.naming.association import RESOURCE_TEMPLATE_FIELDS, ResourceAssociation
from adapter.naming.names import MetricNamer, SeriesFilter, compile_regex, default_as
from adapter.naming.query import QUERY_FIELDS
from adapter.naming.resources import GroupResource


class ConfigError(ValueError):
    """The configuration file is invalid; the message names the file and line."""


CONFIG_MAX_BYTES = 1 << 20
"""The default of `--config-max-bytes`: what a ConfigMap holds at most (the API server refuses more)."""

try:
    YAML_LOADER: type[yaml.SafeLoader | yaml.CSafeLoader] = yaml.CSafeLoader
except AttributeError:  # PyYAML built without libyaml (its wheels bundle it)
    YAML_LOADER = yaml.SafeLoader


@dataclass(frozen=True, slots=True)
class DiscoveryRule:
    """One entry of `rules` or `externalRules`."""

    series_query: str
    series_filters: tuple[SeriesFilter, ...]
    association: ResourceAssociation
    namer: MetricNamer
    metrics_query: Template
    namespaced: bool  # `resources.namespaced`; only external rules use it
    line: int


@dataclass(frozen=True, slots=True)
class ResourceRule:
    """`resourceRules.cpu` or `resourceRules.memory` (metrics.k8s.io)."""

    container_query: Template
    node_query: Template
    association: ResourceAssociation
    container_label: str


@dataclass(frozen=True, slots=True)
class ResourceRules:
    cpu: ResourceRule
    memory: ResourceRule
    window_seconds: float


@dataclass(frozen=True, slots=True)
class AdapterConfig:
    rules: tuple[DiscoveryRule, ...]
    external_rules: tuple[DiscoveryRule, ...]
    resource_rules: ResourceRules | None


# ---------------------------------------------------------------------------------------------
# Strict YAML → nodes
# ---------------------------------------------------------------------------------------------

_STR = "tag:yaml.org,2002:str"
_NULL = "tag:yaml.org,2002:null"
_BOOL = "tag:yaml.org,2002:bool"
_TRUE = frozenset({"yes", "true", "on", "y"})


def _allowed_alias_ratio(visits: int) -> float:
    """go-yaml v2's bound (prometheus-adapter's loader): 99 % of the nodes decoded may come from aliases
    up to 400,000 of them, 10 % from 4,000,000 on, in between a straight line."""
    low, high = 400_000, 4_000_000
    if visits <= low:
        return 0.99
    if visits >= high:
        return 0.10
    return 0.99 - 0.89 * (visits - low) / (high - low)


class _Reader:
    """Walks composed YAML nodes; every error carries the node's line.

    An alias is the very node its anchor names, so a node met again is one decoded through an alias.
    Those are counted as go-yaml v2 counts them and a file that decodes mostly through aliases is
    refused as it refuses it ("excessive aliasing"): 9 KB of nested aliases made 1,000 rules of 1,000
    filters each (a million regexes compiled, 5 s), and 1 MiB would have taken hours.
    """

    def __init__(self, source: str) -> None:
        self.source = source
        self._seen: set[int] = set()
        self._visits = 0
        self._alias_visits = 0

    def error(self, node: yaml.Node, message: str) -> ConfigError:
        return ConfigError(f"{self.source}:{node.start_mark.line + 1}: {message}")

    def _visit(self, node: yaml.Node) -> None:
        self._visits += 1
        if id(node) in self._seen:
            self._alias_visits += 1
            if (
                self._alias_visits > 100
                and self._visits > 1000
                and self._alias_visits / self._visits > _allowed_alias_ratio(self._visits)
            ):
                raise self.error(node, "document contains excessive aliasing")
        else:
            self._seen.add(id(node))

    def mapping(self, node: yaml.Node, where: str, allowed: frozenset[str]) -> dict[str, yaml.Node]:
        """A mapping's entries by key; unknown and duplicate keys are errors. Null → empty."""
        self._visit(node)
        if node.tag == _NULL:
            return {}
        if not isinstance(node, yaml.MappingNode):
            raise self.error(node, f"{where}: expected a mapping")
        entries: dict[str, yaml.Node] = {}
        for key_node, value_node in node.value:
            key = self.key(key_node, where)
            if key in entries:
                raise self.error(key_node, f'{where}: key "{key}" already set in map')
            if key not in allowed:
                raise self.error(
                    key_node, f'{where}: field "{key}" not found (allowed: {", ".join(sorted(allowed))})'
                )
            entries[key] = value_node
        return entries

    def key(self, node: yaml.Node, where: str) -> str:
        self._visit(node)
        if not isinstance(node, yaml.ScalarNode):
            raise self.error(node, f"{where}: map keys must be scalars")
        return str(node.value)

    def free_mapping(self, node: yaml.Node, where: str) -> list[tuple[str, yaml.Node, yaml.Node]]:
        """A mapping with user-chosen keys (e.g. `overrides`), still rejecting duplicates."""
        self._visit(node)
        if node.tag == _NULL:
            return []
        if not isinstance(node, yaml.MappingNode):
            raise self.error(node, f"{where}: expected a mapping")
        seen: set[str] = set()
        items = []
        for key_node, value_node in node.value:
            key = self.key(key_node, where)
            if key in seen:
                raise self.error(key_node, f'{where}: key "{key}" already set in map')
            seen.add(key)
            items.append((key, key_node, value_node))
        return items

    def sequence(self, node: yaml.Node, where: str) -> list[yaml.Node]:
        self._visit(node)
        if node.tag == _NULL:
            return []
        if not isinstance(node, yaml.SequenceNode):
            raise self.error(node, f"{where}: expected a list")
        return list(node.value)

    def string(self, node: yaml.Node | None, where: str) -> str:
        if node is None:
            return ""
        self._visit(node)
        if node.tag == _NULL:
            return ""
        if not isinstance(node, yaml.ScalarNode):
            raise self.error(node, f"{where}: expected a string")
        return str(node.value)

    def boolean(self, node: yaml.Node | None, where: str, default: bool) -> bool:
        if node is None:
            return default
        self._visit(node)
        if node.tag == _NULL:
            return default
        if not isinstance(node, yaml.ScalarNode) or node.tag != _BOOL:
            raise self.error(node, f"{where}: expected a boolean")
        return str(node.value).lower() in _TRUE

    def regex(self, node: yaml.Node, where: str, pattern: str) -> re2._Regexp:
        try:
            return compile_regex(pattern)
        except re2.error as exc:
            raise self.error(node, f"{where}: invalid RE2 regex {pattern!r}: {_text(exc)}") from None

    def template(self, node: yaml.Node | None, where: str, fields: frozenset[str]) -> Template:
        """Parse a template whose data offers `fields`; using any other field is an error now."""
        return self.parse_template(node, self.string(node, where), where, fields)

    def parse_template(
        self, node: yaml.Node | None, text: str, where: str, fields: frozenset[str]
    ) -> Template:
        """`template` of a node whose text was read already."""
        anchor = node if node is not None else yaml.ScalarNode(_STR, "")
        try:
            template = Template(text, where)
        except TemplateError as exc:
            raise self.error(anchor, str(exc)) from None
        unknown = sorted(template.root_fields - fields)
        if unknown:
            raise self.error(
                anchor, f"{where}: unknown field .{unknown[0]} (available: {', '.join(sorted(fields))})"
            )
        return template


def _text(exc: BaseException) -> str:
    message = exc.args[0] if exc.args else exc
    return message.decode(errors="replace") if isinstance(message, bytes) else str(message)


def _compose(text: str, source: str) -> yaml.Node | None:
    try:
        return yaml.compose(text, Loader=YAML_LOADER)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f":{mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{source}{line}: invalid YAML: {exc.problem or exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: invalid YAML: {exc}") from None


# ---------------------------------------------------------------------------------------------
# Schema
# ---------------------------------------------------------------------------------------------

_TOP_KEYS = frozenset({"rules", "externalRules", "resourceRules"})
_RULE_KEYS = frozenset({"seriesQuery", "seriesFilters", "resources", "name", "metricsQuery"})
_FILTER_KEYS = frozenset({"is", "isNot"})
_RESOURCES_KEYS = frozenset({"template", "overrides", "namespaced"})
_OVERRIDE_KEYS = frozenset({"group", "resource"})
_NAME_KEYS = frozenset({"matches", "as"})
_RESOURCE_RULES_KEYS = frozenset({"cpu", "memory", "window"})
_RESOURCE_RULE_KEYS = frozenset({"containerQuery", "nodeQuery", "resources", "containerLabel"})
# Prometheus durations (its model.ParseDuration), not Go's time.ParseDuration (shared/durations.py): whole
# numbers only, units up to years, largest first. Units are listed in the order of the regex's groups.
_DURATION_UNITS = {"y": 31536000, "w": 604800, "d": 86400, "h": 3600, "m": 60, "s": 1, "ms": 0.001}
_DURATION = re2.compile(
    r"^(?:([0-9]+)y)?(?:([0-9]+)w)?(?:([0-9]+)d)?(?:([0-9]+)h)?(?:([0-9]+)m)?"
    r"(?:([0-9]+)s)?(?:([0-9]+)ms)?$"
)


def _filters(reader: _Reader, node: yaml.Node | None, where: str) -> tuple[SeriesFilter, ...]:
    if node is None:
        return ()
    filters = []
    for i, item in enumerate(reader.sequence(node, where)):
        entries = reader.mapping(item, f"{where}[{i}]", _FILTER_KEYS)
        is_pattern = reader.string(entries.get("is"), f"{where}[{i}].is")
        is_not_pattern = reader.string(entries.get("isNot"), f"{where}[{i}].isNot")
        if bool(is_pattern) == bool(is_not_pattern):
            raise reader.error(item, f"{where}[{i}]: exactly one of is and isNot must be set")
        pattern = is_pattern or is_not_pattern
        filters.append(SeriesFilter(reader.regex(item, f"{where}[{i}]", pattern), bool(is_pattern)))
    return tuple(filters)


def _association(reader: _Reader, node: yaml.Node | None, where: str) -> tuple[ResourceAssociation, bool]:
    entries = reader.mapping(node, where, _RESOURCES_KEYS) if node is not None else {}
    overrides: dict[str, GroupResource] = {}
    if "overrides" in entries:
        for label, key_node, value in reader.free_mapping(entries["overrides"], f"{where}.overrides"):
            spec = reader.mapping(value, f"{where}.overrides.{label}", _OVERRIDE_KEYS)
            resource = reader.string(spec.get("resource"), f"{where}.overrides.{label}.resource")
            if not resource:
                raise reader.error(key_node, f"{where}.overrides.{label}: resource must be set")
            overrides[label] = GroupResource(reader.string(spec.get("group"), "group"), resource)
    template = None
    template_node = entries.get("template")
    template_text = reader.string(template_node, f"{where}.template")
    if template_text:
        template = reader.parse_template(
            template_node, template_text, f"{where}.template", RESOURCE_TEMPLATE_FIELDS
        )
    namespaced = reader.boolean(entries.get("namespaced"), f"{where}.namespaced", default=True)
    try:
        association = ResourceAssociation(overrides, template)
    except (TemplateExecError, re2.error) as exc:
        assert template_node is not None
        raise reader.error(
            template_node, f"{where}.template: unusable as a label pattern: {_text(exc)}"
        ) from None
    return association, namespaced


def _namer(reader: _Reader, node: yaml.Node | None, where: str) -> MetricNamer:
    entries = reader.mapping(node, where, _NAME_KEYS) if node is not None else {}
    matches_node = entries.get("matches")
    pattern = reader.string(matches_node, f"{where}.matches") or ".*"
    regex = reader.regex(
        matches_node if matches_node is not None else node or yaml.ScalarNode(_STR, ""),
        f"{where}.matches",
        pattern,
    )
    as_template = reader.string(entries.get("as"), f"{where}.as")
    if not as_template:
        try:
            as_template = default_as(regex)
        except ValueError as exc:
            raise reader.error(
                node if node is not None else yaml.ScalarNode(_STR, ""), f"{where}: {exc}"
            ) from None
    return MetricNamer(regex, as_template)


def _rule(reader: _Reader, node: yaml.Node, where: str) -> DiscoveryRule:
    entries = reader.mapping(node, where, _RULE_KEYS)
    association, namespaced = _association(reader, entries.get("resources"), f"{where}.resources")
    return DiscoveryRule(
        series_query=reader.string(entries.get("seriesQuery"), f"{where}.seriesQuery"),
        series_filters=_filters(reader, entries.get("seriesFilters"), f"{where}.seriesFilters"),
        association=association,
        namer=_namer(reader, entries.get("name"), f"{where}.name"),
        metrics_query=reader.template(entries.get("metricsQuery"), f"{where}.metricsQuery", QUERY_FIELDS),
        namespaced=namespaced,
        line=node.start_mark.line + 1,
    )


def _duration(reader: _Reader, node: yaml.Node | None, where: str) -> float:
    text = reader.string(node, where)
    if not text or text == "0":
        return 0.0
    match = _DURATION.search(text)
    if match is None:
        assert node is not None
        raise reader.error(node, f"{where}: not a valid duration string: {text!r}")
    groups = zip(_DURATION_UNITS.values(), match.groups(), strict=True)
    return float(sum(int(count) * unit_seconds for unit_seconds, count in groups if count))


def _resource_rule(reader: _Reader, node: yaml.Node | None, where: str) -> ResourceRule:
    entries = reader.mapping(node, where, _RESOURCE_RULE_KEYS) if node is not None else {}
    association, _ = _association(reader, entries.get("resources"), f"{where}.resources")
    return ResourceRule(
        container_query=reader.template(
            entries.get("containerQuery"), f"{where}.containerQuery", QUERY_FIELDS
        ),
        node_query=reader.template(entries.get("nodeQuery"), f"{where}.nodeQuery", QUERY_FIELDS),
        association=association,
        container_label=reader.string(entries.get("containerLabel"), f"{where}.containerLabel"),
    )


def _resource_rules(reader: _Reader, node: yaml.Node) -> ResourceRules:
    entries = reader.mapping(node, "resourceRules", _RESOURCE_RULES_KEYS)
    return ResourceRules(
        cpu=_resource_rule(reader, entries.get("cpu"), "resourceRules.cpu"),
        memory=_resource_rule(reader, entries.get("memory"), "resourceRules.memory"),
        window_seconds=_duration(reader, entries.get("window"), "resourceRules.window"),
    )


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Parsing a large file makes millions of objects, which trigger full garbage collections: each
    walks every object with the GIL held, 0.2-0.4 s at 1 MiB, and the event loop's thread waits for it
    (a worker thread does not help). The nodes form no cycles (reference counting frees them), so
    nothing is left for the collector meanwhile. Pausing took the event loop's worst lag during the
    parse of a 1 MiB file in a thread from 426 ms to 72 ms."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def parse_config(text: str, source: str = "<config>") -> AdapterConfig:
    """Parse and validate config text; `source` prefixes error messages."""
    with _collector_paused():
        return _parse(text, source)


def _parse(text: str, source: str) -> AdapterConfig:
    reader = _Reader(source)
    root = _compose(text, source)
    entries = reader.mapping(root, "config", _TOP_KEYS) if root is not None else {}

    def rule_list(key: str) -> tuple[DiscoveryRule, ...]:
        node = entries.get(key)
        if node is None:
            return ()
        return tuple(_rule(reader, item, f"{key}[{i}]") for i, item in enumerate(reader.sequence(node, key)))

    resource_node = entries.get("resourceRules")
    resource_rules: ResourceRules | None = None
    if resource_node is not None and resource_node.tag != _NULL:
        resource_rules = _resource_rules(reader, resource_node)
    return AdapterConfig(
        rules=rule_list("rules"),
        external_rules=rule_list("externalRules"),
        resource_rules=resource_rules,
    )


def read_config_text(path: str | Path, max_bytes: int = CONFIG_MAX_BYTES) -> str:
    """The `--config` file's text (what a reload hashes before it parses it); a file of more than
    `max_bytes` is refused unread."""
    try:
        with Path(path).open("rb") as file:
            data = file.read(max_bytes + 1)
            if len(data) > max_bytes:
                size = os.fstat(file.fileno()).st_size
                raise ConfigError(
                    f"metrics discovery config file {path} is too large: {size} bytes, more than"
                    f" --config-max-bytes={max_bytes}"
                )
        return data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"unable to load metrics discovery config file {path}: {exc}") from None


def load_config(path: str | Path, max_bytes: int = CONFIG_MAX_BYTES) -> AdapterConfig:
    """Read and parse the `--config` file."""
    return parse_config(read_config_text(path, max_bytes), str(path))


# ---------------------------------------------------------------------------------------------
# Default rule sets
# ---------------------------------------------------------------------------------------------


def default_config_yaml(rate_interval: str = "5m", label_prefix: str = "") -> str:
    """The legacy default rules (`cmd/config-gen`, Helm `rules.default: true`) as config YAML."""
    p = label_prefix
    cadvisor_query = '{__name__=~"^container_.*",container!="POD",namespace!="",pod!=""}'
    general_query = f'{{{p}namespace!="",__name__!~"^container_.*"}}'
    lm = "<<.Series>>{<<.LabelMatchers>>"
    rate_by = f"[{rate_interval}])) by (<<.GroupBy>>)"

    def quoted(text: str) -> str:
        return "'" + text.replace("'", "''") + "'"

    def rule(series: str, filters: list[tuple[str, str]], resources: str, matches: str, query: str) -> str:
        lines = [f"- seriesQuery: {quoted(series)}"]
        if filters:
            lines.append("  seriesFilters:")
            lines.extend(f"  - {kind}: {quoted(pattern)}" for kind, pattern in filters)
        lines.append(f"  resources: {resources}")
        if matches:
            lines.append(f"  name: {{matches: {quoted(matches)}}}")
        lines.append(f"  metricsQuery: {quoted(query)}")
        return "\n".join(lines)

    cadvisor = "{overrides: {namespace: {resource: namespace}, pod: {resource: pod}}}"
    template = f"{{template: {quoted(p + '<<.Resource>>')}}}"
    rules = [
        rule(
            cadvisor_query,
            [],
            cadvisor,
            "^container_(.*)_seconds_total$",
            f'sum(rate({lm},container!="POD"}}{rate_by}',
        ),
        rule(
            cadvisor_query,
            [("isNot", "^container_.*_seconds_total$")],
            cadvisor,
            "^container_(.*)_total$",
            f'sum(rate({lm},container!="POD"}}{rate_by}',
        ),
        rule(
            cadvisor_query,
            [("isNot", "^container_.*_total$")],
            cadvisor,
            "^container_(.*)$",
            f'sum({lm},container!="POD"}}) by (<<.GroupBy>>)',
        ),
        rule(general_query, [("isNot", ".*_total$")], template, "", f"sum({lm}}}) by (<<.GroupBy>>)"),
        rule(
            general_query,
            [("isNot", ".*_seconds_total")],
            template,
            "^(.*)_total$",
            f"sum(rate({lm}}}{rate_by}",
        ),
        rule(general_query, [], template, "^(.*)_seconds_total$", f"sum(rate({lm}}}{rate_by}"),
    ]
    return "rules:\n" + "\n".join(rules) + "\n"


DEFAULT_CONFIG_YAML = default_config_yaml()
"""The six default rules with `[5m]` windows, as the Helm chart ships them."""

RESOURCE_RULES_CONFIG_YAML = """\
resourceRules:
  cpu:
    containerQuery: >-
      sum by (<<.GroupBy>>)
      (irate(container_cpu_usage_seconds_total{<<.LabelMatchers>>,container!="",pod!=""}[4m]))
    nodeQuery: |-
      sum by (<<.GroupBy>>) (irate(node_cpu_usage_seconds_total{<<.LabelMatchers>>}[4m]))
    resources:
      overrides:
        namespace: {resource: namespace}
        node: {resource: node}
        pod: {resource: pod}
    containerLabel: container
  memory:
    containerQuery: |-
      sum by (<<.GroupBy>>) (container_memory_working_set_bytes{<<.LabelMatchers>>,container!="",pod!=""})
    nodeQuery: |-
      sum by (<<.GroupBy>>) (node_memory_working_set_bytes{<<.LabelMatchers>>})
    resources:
      overrides:
        namespace: {resource: namespace}
        node: {resource: node}
        pod: {resource: pod}
    containerLabel: container
  window: 5m
"""
"""The reference deployment's config (resourceRules only, as in deploy/manifests/config-map.yaml)."""


def default_config(rate_interval: str = "5m", label_prefix: str = "") -> AdapterConfig:
    """The parsed default rule set."""
    return parse_config(default_config_yaml(rate_interval, label_prefix), "<default rules>")
