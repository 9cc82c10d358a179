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
* Alternatives inside a selector (`{a="1" or b="2"}`, not Prometheus syntax) and `info()` (it reads
  `target_info` series the query does not name) are refused.
"""

from __future__ import annotations

import json
import math
import re
from datetime import timedelta
from functools import lru_cache

import promql_parser as pp

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


class QueryRefused(ValueError):
    """The query does not parse, or cannot be confined to the namespace; `str()` says why."""


def quote(text: str) -> str:
    """A PromQL double-quoted string: Go's escapes, which JSON's (with non-ASCII kept) are a subset of."""
    return json.dumps(text, ensure_ascii=False)


@lru_cache(maxsize=4096)
def confine(query: str, namespace: str) -> str:
    """`query` with every selector confined to `namespace`; QueryRefused when it cannot be.

    Cached: the daemon confines the same few queries on every reconcile."""
    try:
        expr = pp.parse(query)
    except ValueError as err:
        raise QueryRefused(f"not a PromQL query: {err}") from None
    return _Renderer(namespace).render(expr)


def render(expr: pp.Expr) -> str:
    """The PromQL text of a parsed tree, unconfined (for tests and operators' cluster-wide queries)."""
    return _Renderer(None).render(expr)


def _duration(delta: timedelta) -> str:
    if delta < timedelta(0):
        return "-" + pp.display_duration(-delta)
    return pp.display_duration(delta)


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


class _Renderer:
    def __init__(self, namespace: str | None) -> None:
        self.namespace = namespace

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
                if m.op != pp.MatchOp.Equal or m.value != self.namespace:
                    raise QueryRefused(
                        f"the selector's matcher {m.name}{_OPS[str(m.op)]}{quote(m.value)} reads outside "
                        f"namespace {self.namespace!r}"
                    )
                continue  # written again below
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
                assert at.at is not None
                text += f" @ {at.at.timestamp():.3f}"
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
