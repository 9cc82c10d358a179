"""Confine a PromQL query to one namespace: every series selector gets exactly `namespace="<ns>"`.

What prom-label-proxy does for a tenant, on the parsed query: the text is parsed with promql-parser
(GreptimeTeam's Rust parser, Python bindings), every vector selector (alone, in a range, in a subquery)
gets the matcher `namespace="<ns>"`, and the tree is printed back by `render` below.

Why a printer of our own: promql-parser's `str()` of a tree does not escape string values (a label value
`a"b` prints as `"a"b"`, which no longer parses, and a crafted value could change the printed query's
shape), prints `x[5m:]` as `x[5m]` and `{a="1" or b="2"}` as `{ or a="1" ...}`; its `transform` drops
replacements of selectors. So the library parses and `render` prints: every node type of its tree, strings
and label values quoted as Go's strconv.Quote does (JSON's escapes are a subset PromQL reads), label names
checked to be plain names. An unknown node type is refused, never printed approximately.

Decided rules, beyond adding the matcher:
* A selector's own `namespace` matcher is kept only when it is exactly `namespace="<ns>"`; any other
  (`namespace="other"`, `!=`, `=~`, `!~`) refuses the query: overwriting it would silently answer a
  different question than the one written.
* `confine_tenant` (a tenant's rules in the adapter, docs/tenant-rules.md) also keeps a selector's own
  `namespace` matcher that the namespace satisfies (`namespace!=""`, `=~"shop|web"`, `!~"kube-.*"`),
  next to the added `namespace="<ns>"`: rules written for prometheus-adapter carry such matchers, and
  with the equality beside them they read nothing more. Regexes are judged as Prometheus judges them:
  RE2, matching the whole value; one RE2 cannot compile refuses. A matcher the namespace does not
  satisfy refuses, as above.
* Alternatives inside a selector (`{a="1" or b="2"}`, not Prometheus syntax) and `info()` (it reads
  `target_info` series the query does not name) are refused.
* Limits, checked here so that a query is refused once, when its autoscaler is read, rather than by
  Prometheus on every reconcile. Prometheus (v2.42, the tests' version) refuses a duration (range,
  offset, subquery range and step) longer than Go's time.Duration, 2^63-1 ns (about 292 years), and an
  `@` timestamp of ±2^63 seconds or more; it keeps `@` in int64 milliseconds, so from 2^63 ms on the
  time it reads is another than the one written. promql-parser's binding is narrower: it hands `@` to
  Python as a datetime, which panics (a Rust panic, a BaseException) before 1970 and overflows after
  9999. So `@` takes 0 to 253402300799.999 (Unix seconds, to the millisecond as Prometheus reads it),
  the part of Prometheus' range the binding can hand over; durations take all of Prometheus' range.
* At most MAX_QUERY_LENGTH characters (the CRD's own maxLength; an HPA's annotation has no such bound)
  and a tree at most MAX_NESTING deep, both checked on the text before parsing (`_nesting` bounds the
  depth: brackets plus operators). The parser recurses on the thread's stack, where an overflow kills
  the process (SIGSEGV, nothing to catch): on the default 8 MiB main-thread stack the cheapest deep forms
  crash it from 8,179 characters on (`-` x 8,178 then `x`; `x+x+...` at 8,377; `((...))` at 16,365).
  And its work, on the event loop, grows with the depth times the size of the tree: 4,094 nested `-`
  took 4 s to parse, a chain of 2,000 `+` 1 to 3 s. At 64 levels the worst forms measured take under
  20 ms (median; `-` x 62 around a 4,000-character call), a real query needs a handful.
* Nothing the library raises escapes as anything but QueryRefused, panics included: a tenant's query
  must never take down the worker that reads it. Only the exceptions that mean "stop"
  (shared/stopping.py) pass. A panic has unwound through the library's getter by the time Python sees
  it, leaving its objects as they were, so carrying on is safe. Rust's panic hook still prints the panic
  on stderr, once per query: outcomes, refusals included, are cached.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache

import promql_parser as pp
import re2

from shared.stopping import STOPPING

NAMESPACE_LABEL = "namespace"
_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
# By the name of pp.MatchOp's member (its members are not hashable).
_OPS = dict(
    zip(
        map(str, (pp.MatchOp.Equal, pp.MatchOp.NotEqual, pp.MatchOp.Re, pp.MatchOp.NotRe)),
        ("=", "!=", "=~", "!~"),
        strict=True,
    )
)
# Functions that read series the query does not name.
_REFUSED_FUNCTIONS = frozenset({"info"})
# Go's time.Duration, to the microsecond (timedelta's precision; PromQL's is the millisecond).
MAX_DURATION = timedelta(microseconds=(2**63 - 1) // 1000)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
AT_OUT_OF_RANGE = (
    "an @ timestamp must be from 0 (1970-01-01T00:00:00Z) to 253402300799.999 (9999-12-31T23:59:59.999Z), "
    "in Unix seconds"
)
MAX_QUERY_LENGTH = 4096
MAX_NESTING = 64
_OPERATOR_CHARS = frozenset("+-*/%^=!<>")
_KEYWORD_OPERATORS = re.compile(r"\b(?:and|or|unless|atan2)\b", re.IGNORECASE)
DURATION_OUT_OF_RANGE = "is out of range: Prometheus takes durations of at most 2^63-1 ns (about 292y)"


class QueryRefused(ValueError):
    """The query does not parse, or cannot be confined to the namespace; `str()` says why."""


# What the printer lets through as it is: its own refusals and the exceptions that mean "stop".
_PASSED: tuple[type[BaseException], ...] = (QueryRefused, *STOPPING)


def quote(text: str) -> str:
    """A PromQL double-quoted string: Go's escapes, which JSON's (with non-ASCII kept) are a subset of."""
    return json.dumps(text, ensure_ascii=False)


def confine(query: str, namespace: str) -> str:
    """`query` with every selector confined to `namespace`; QueryRefused when it cannot be."""
    return _cached(query, namespace, tenant=False)


def confine_tenant(query: str, namespace: str) -> str:
    """As `confine`, keeping a selector's own `namespace` matchers that `namespace` satisfies (see the
    module docstring); QueryRefused naming the first one it does not satisfy."""
    return _cached(query, namespace, tenant=True)


def check(query: str) -> None:
    """QueryRefused when `query` does not parse or breaks a limit (see the module docstring): what
    `confine` checks, without confining (the queries of operators' cluster-wide namespaces)."""
    _cached(query, None, tenant=False)


@dataclass(frozen=True)
class _Refusal:
    reason: str


def _cached(query: str, namespace: str | None, *, tenant: bool) -> str:
    outcome = _outcome(query, namespace, tenant)
    if isinstance(outcome, _Refusal):
        raise QueryRefused(outcome.reason)
    return outcome


@lru_cache(maxsize=4096)
def _outcome(query: str, namespace: str | None, tenant: bool) -> str | _Refusal:
    """Cached, refusals too: the daemon confines the same few queries on every reconcile and decision
    read, and a refused one would otherwise be parsed (and panic, and print) each time."""
    try:
        return _printed(query, namespace, tenant)
    except QueryRefused as err:
        return _Refusal(str(err))


def render(expr: pp.Expr) -> str:
    """The PromQL text of a parsed tree, unconfined (for tests)."""
    return _Renderer(None, tenant=False).render(expr)


def _printed(query: str, namespace: str | None, tenant: bool) -> str:
    if len(query) > MAX_QUERY_LENGTH:
        raise QueryRefused(f"longer than {MAX_QUERY_LENGTH} characters ({len(query)})")
    if _nesting(query) > MAX_NESTING:
        raise QueryRefused(f"nested too deeply: more than {MAX_NESTING} brackets and operators")
    try:
        expr = pp.parse(query)
    except ValueError as err:
        raise QueryRefused(f"not a PromQL query: {err}") from None
    except STOPPING:
        raise
    except BaseException as err:
        raise _parser_failed(err) from None
    try:
        return _Renderer(namespace, tenant).render(expr)
    except _PASSED:
        raise
    except RecursionError:
        raise QueryRefused("nested too deeply") from None
    except BaseException as err:
        # A getter of the library's tree raised or panicked on a value it cannot hand to Python.
        raise _parser_failed(err) from None


def _nesting(query: str) -> int:
    """A bound of the depth of the query's tree from its text alone: the deepest nesting of brackets
    plus every operator, outside string literals, comments and selectors' braces (a chain of binary
    operators nests as deep as it is long). Linear, where the parser's work grows with the depth times
    the size of the tree."""
    depth = deepest = operators = 0
    outside = []
    quote = ""
    in_braces = False
    i = 0
    while i < len(query):
        char = query[i]
        if quote:
            if char == "\\" and quote != "`":
                i += 1  # the escaped character
            elif char == quote:
                quote = ""
        elif char in "\"'`":
            quote = char
        elif char == "#":
            end = query.find("\n", i)
            i = len(query) if end < 0 else end
        elif in_braces:
            in_braces = char != "}"
        elif char == "{":
            in_braces = True
        else:
            outside.append(char)
            if char in "([":
                depth += 1
                deepest = max(deepest, depth)
            elif char in ")]":
                depth -= 1
            elif char in _OPERATOR_CHARS:
                operators += 1
        i += 1
    return deepest + operators + len(_KEYWORD_OPERATORS.findall("".join(outside)))


def _parser_failed(err: BaseException) -> QueryRefused:
    return QueryRefused(f"the PromQL parser failed on this query: {type(err).__name__}: {err}")


def _duration(delta: timedelta) -> str:
    if abs(delta) > MAX_DURATION:
        raise QueryRefused(
            f"the duration of {abs(delta) // timedelta(milliseconds=1)}ms {DURATION_OUT_OF_RANGE}"
        )
    size = pp.display_duration(abs(delta))
    return "-" + size if delta < timedelta(0) else size


def _at_seconds(at: pp.AtModifier) -> str:
    """An `@` time as Unix seconds with milliseconds, exactly (the library keeps milliseconds)."""
    try:
        moment = at.at
    except STOPPING:
        raise
    except BaseException:
        # Before 1970 the library's conversion panics; after 9999 Python's datetime overflows.
        raise QueryRefused(AT_OUT_OF_RANGE) from None
    assert moment is not None
    millis = (moment - _EPOCH) // timedelta(milliseconds=1)
    return f"{millis // 1000}.{millis % 1000:03d}"


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Inf" if value > 0 else "-Inf"
    return repr(value)


def _names(labels: list[str]) -> str:
    for label in labels:
        if not _LABEL_NAME.match(label):
            raise QueryRefused(f"label name {label!r} is not a plain name")
    return ", ".join(labels)


def _satisfied(matcher: pp.Matcher, namespace: str) -> bool:
    """Whether a series of `namespace` passes `matcher` (a namespace matcher), as Prometheus decides."""
    op = _OPS[str(matcher.op)]
    if op in ("=", "!="):
        return (matcher.value == namespace) == (op == "=")
    options = re2.Options()
    options.log_errors = False  # the refusal says it; RE2's own log would go to stderr
    try:
        regex = re2.compile(matcher.value, options)
    except re2.error as err:
        reason = err.args[0].decode(errors="replace") if err.args and isinstance(err.args[0], bytes) else err
        raise QueryRefused(f"the regex {quote(matcher.value)} is not RE2: {reason}") from None
    return (regex.fullmatch(namespace) is not None) == (op == "=~")


class _Renderer:
    def __init__(self, namespace: str | None, tenant: bool) -> None:
        self.namespace = namespace
        self.tenant = tenant  # keep the namespace matchers `namespace` satisfies

    def render(self, expr: object) -> str:
        if isinstance(expr, pp.VectorSelector):
            return self._selector(expr) + self._at_offset(expr.at, expr.offset)
        if isinstance(expr, pp.MatrixSelector):
            vs = expr.vector_selector
            return f"{self._selector(vs)}[{_duration(expr.range)}]" + self._at_offset(vs.at, vs.offset)
        if isinstance(expr, pp.SubqueryExpr):
            step = _duration(expr.step) if expr.step is not None else ""
            window = f"[{_duration(expr.range) if expr.range is not None else ''}:{step}]"
            return self.render(expr.expr) + window + self._at_offset(expr.at, expr.offset)
        if isinstance(expr, pp.ParenExpr):
            return f"({self.render(expr.expr)})"
        if isinstance(expr, pp.UnaryExpr):
            return f"-{self.render(expr.expr)}"
        if isinstance(expr, pp.BinaryExpr):
            operator = f"{expr.op}{self._bin_modifier(expr.modifier)}"
            return f"{self.render(expr.lhs)} {operator} {self.render(expr.rhs)}"
        if isinstance(expr, pp.AggregateExpr):
            grouping = ""
            if expr.modifier is not None:
                kind = "by" if expr.modifier.type == pp.AggModifierType.By else "without"
                grouping = f" {kind} ({_names(expr.modifier.labels)}) "
            args = ([] if expr.param is None else [self.render(expr.param)]) + [self.render(expr.expr)]
            return f"{expr.op}{grouping}({', '.join(args)})"
        if isinstance(expr, pp.Call):
            name = expr.func.name
            if name in _REFUSED_FUNCTIONS and self.namespace is not None:
                raise QueryRefused(f"{name}() reads series the query does not name")
            return f"{name}({', '.join(self.render(arg) for arg in expr.args)})"
        if isinstance(expr, pp.NumberLiteral):
            return _number(expr.val)
        if isinstance(expr, pp.StringLiteral):
            return quote(expr.val)
        raise QueryRefused(f"unsupported PromQL expression {type(expr).__name__}")

    def _selector(self, vs: pp.VectorSelector) -> str:
        if vs.matchers.or_matchers:
            raise QueryRefused("alternatives (or) inside a selector are not PromQL")
        matchers = []
        for m in vs.matchers.matchers:
            if not (_LABEL_NAME.match(m.name)):
                raise QueryRefused(f"label name {m.name!r} is not a plain name")
            if m.name == NAMESPACE_LABEL and self.namespace is not None:
                if m.op == pp.MatchOp.Equal and m.value == self.namespace:
                    continue  # written again below
                if not (self.tenant and _satisfied(m, self.namespace)):
                    raise QueryRefused(
                        f"the selector's matcher {m.name}{_OPS[str(m.op)]}{quote(m.value)} reads outside "
                        f"namespace {self.namespace!r}"
                    )
            matchers.append(f"{m.name}{_OPS[str(m.op)]}{quote(m.value)}")
        if self.namespace is not None:
            matchers.append(f"{NAMESPACE_LABEL}={quote(self.namespace)}")
        name = vs.name or ""
        if name and not _METRIC_NAME.match(name):
            raise QueryRefused(f"metric name {name!r} is not a plain name")
        return f"{name}{{{','.join(matchers)}}}"

    def _at_offset(self, at: pp.AtModifier | None, offset: timedelta | None) -> str:
        text = ""
        if at is not None:
            if at.type == pp.AtModifierType.Start:
                text += " @ start()"
            elif at.type == pp.AtModifierType.End:
                text += " @ end()"
            else:
                text += f" @ {_at_seconds(at)}"
        if offset is not None:
            text += f" offset {_duration(offset)}"
        return text

    def _bin_modifier(self, modifier: pp.BinModifier | None) -> str:
        if modifier is None:
            return ""
        text = " bool" if modifier.return_bool else ""
        if modifier.matching is not None:
            kind = "on" if modifier.matching.type == pp.LabelModifierType.Include else "ignoring"
            text += f" {kind} ({_names(modifier.matching.labels)})"
        if modifier.card == pp.VectorMatchCardinality.ManyToOne:
            text += f" group_left ({_names(modifier.group_labels or [])})"
        elif modifier.card == pp.VectorMatchCardinality.OneToMany:
            text += f" group_right ({_names(modifier.group_labels or [])})"
        fill = modifier.fill_values
        if fill is not None and (fill.lhs is not None or fill.rhs is not None):
            raise QueryRefused("fill modifiers are not supported")
        return text
