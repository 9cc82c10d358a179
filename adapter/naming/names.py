"""Series name → API metric name (`name.matches` / `name.as`) and the `is`/`isNot` series filters.

`expand` reproduces Go's `regexp.Expand`: `$name` takes the longest run of letters, digits and
underscores (so `$1_x` is the group named `1_x`, usually empty), `${name}` is braced, `$$` is a
literal dollar, and an unknown or unmatched group expands to the empty string.
"""

from collections.abc import Sequence
from dataclasses import dataclass

import re2


def compile_regex(pattern: str) -> re2._Regexp:
    """Compile with RE2 (Go's regexp syntax), raising `re2.error` quietly instead of logging."""
    options = re2.Options()
    options.log_errors = False
    return re2.compile(pattern, options)


def _is_name_char(ch: str) -> bool:
    # Go's unicode.IsLetter / unicode.IsDigit / '_'.
    return ch.isalpha() or ch.isdecimal() or ch == "_"


def _group_number(name: str) -> int | None:
    """Go's rule: ASCII digits without a leading zero (and below 1e8) name a group by number."""
    if not name.isascii() or not name.isdigit() or (name[0] == "0" and len(name) > 1) or len(name) > 8:
        return None
    return int(name)


def _group_text(regex: re2._Regexp, match: re2._Match, name: str) -> str:
    index = _group_number(name)
    if index is None:
        index = regex.groupindex.get(name)
    if index is None or index > regex.groups:
        return ""
    return match.group(index) or ""


def _parse_reference(template: str, start: int) -> tuple[str, int] | None:
    """Parse the reference after a `$` at `start`; return (name, end) or None if it is malformed."""
    braced = start < len(template) and template[start] == "{"
    name_start = start + 1 if braced else start
    end = name_start
    while end < len(template) and _is_name_char(template[end]):
        end += 1
    if end == name_start:
        return None
    if braced:
        if end >= len(template) or template[end] != "}":
            return None
        return template[name_start:end], end + 1
    return template[name_start:end], end


def expand(template: str, regex: re2._Regexp, match: re2._Match) -> str:
    """Go `regexp.Expand` of `template` against `match` (a match of `regex`)."""
    out: list[str] = []
    pos = 0
    while True:
        dollar = template.find("$", pos)
        if dollar == -1:
            out.append(template[pos:])
            return "".join(out)
        out.append(template[pos:dollar])
        if template.startswith("$$", dollar):
            out.append("$")
            pos = dollar + 2
            continue
        reference = _parse_reference(template, dollar + 1)
        if reference is None:
            # Go copies a malformed `$` reference through literally.
            out.append("$")
            pos = dollar + 1
            continue
        name, pos = reference
        out.append(_group_text(regex, match, name))


@dataclass(frozen=True, slots=True)
class SeriesFilter:
    """One `seriesFilters` item: keep names the regex finds (`is`) or does not find (`isNot`)."""

    regex: re2._Regexp
    keep_on_match: bool

    def accepts(self, series_name: str) -> bool:
        return (self.regex.search(series_name) is not None) == self.keep_on_match


def accepts_all(filters: Sequence[SeriesFilter], series_name: str) -> bool:
    """All filters must pass (AND); matching is unanchored like Go's `MatchString`."""
    return all(f.accepts(series_name) for f in filters)


@dataclass(frozen=True, slots=True)
class MetricNamer:
    """`name.matches` + `name.as`: the API name is the expansion of `as` on the first match only."""

    matches: re2._Regexp
    as_template: str

    def metric_name(self, series_name: str) -> str | None:
        """The API metric name for `series_name`, or None when `matches` does not match it."""
        match = self.matches.search(series_name)
        if match is None:
            return None
        return expand(self.as_template, self.matches, match)


def default_as(regex: re2._Regexp) -> str:
    """`as` when the config leaves it empty: `$0` without groups, `$1` with exactly one."""
    if regex.groups == 0:
        return "$0"
    if regex.groups == 1:
        return "$1"
    raise ValueError(f"must specify an 'as' value for name matcher {regex.pattern!r} with multiple groups")
