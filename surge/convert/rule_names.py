"""The names of the MetricRules and ClusterMetricRules a prometheus-adapter config becomes: after the metric a
rule exposes, made a DNS-1123 label (what every kind of object may be named), unique among the objects of
one kind in one namespace (`-2`, `-3`, ... in the order of the config).

The metric a rule exposes: `name.as` applied to the series name its seriesQuery names, when it names
one; else the words of `name.as`, then of `name.matches` (their references and regex syntax left out),
then the series name; else `<kind>-rule`.
"""

from __future__ import annotations

import re

from shared.promql.series_selector import series_name
from surge.convert.adapter_config import WrittenRule

MAX_NAME = 63  # a DNS-1123 label
# `$1`, `${1}`, `$name`, `${name}` in `as` (Go's regexp Expand); groups, classes and escapes in `matches`.
_REFERENCE = re.compile(r"\$(\{[^}]*\}|[A-Za-z0-9_]+)")
_GROUP = re.compile(r"\([^()]*\)")
_CLASS_OR_ESCAPE = re.compile(r"\[[^\]]*\]|\\.")


def dns_label(text: str) -> str:
    """`text` lowercased, each run of characters other than letters and digits one `-`, at most 63."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:MAX_NAME].rstrip("-")


def _matches_words(pattern: str) -> str:
    """A regex's literal words: groups (innermost first), classes and escapes left out."""
    while True:
        shorter = _GROUP.sub("", pattern)
        if shorter == pattern:
            return _CLASS_OR_ESCAPE.sub("", pattern)
        pattern = shorter


def exposed_name(written: WrittenRule) -> str | None:
    """The metric name the rule exposes, when its seriesQuery names one series (else it depends on the
    series discovered)."""
    series = series_name(written.rule.series_query)
    if series is not None:
        return written.rule.namer.metric_name(series)
    as_template = written.rule.namer.as_template
    return None if "$" in as_template else as_template


def base_name(written: WrittenRule) -> str:
    name = written.fields.get("name") or {}
    candidates = (
        exposed_name(written),
        _REFERENCE.sub("", name.get("as", "")),
        _matches_words(name.get("matches", "")),
        series_name(written.rule.series_query),
    )
    for candidate in candidates:
        label = dns_label(candidate or "")
        if label:
            return label
    return "external-rule" if written.external else "custom-rule"


class Names:
    """Names taken so far, by kind and namespace."""

    def __init__(self) -> None:
        self._taken: set[tuple[str, str, str]] = set()

    def take(self, kind: str, namespace: str, base: str) -> str:
        """`base`, or the first of `base-2`, `base-3`, ... free in that kind and namespace."""
        name, count = base, 1
        while (kind, namespace, name) in self._taken:
            count += 1
            suffix = f"-{count}"
            name = base[: MAX_NAME - len(suffix)].rstrip("-") + suffix
        self._taken.add((kind, namespace, name))
        return name
