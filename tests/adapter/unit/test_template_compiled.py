"""The compiled renderer (`Template.render`) answers exactly as the interpreter it short-cuts: same text,
same errors, for the templates of the Go-template table tests and for generated ones."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapter.config import default_config_yaml, parse_config
from adapter.gotemplate import GoStruct, Template, TemplateError, TemplateExecError, parse
from tests.adapter.unit.resource_configs import PA_DEPLOY_CONFIG
from tests.adapter.unit.test_gotemplate import DATA

MISSING_FIELD = GoStruct("naming.queryTemplateArgs", {"Series": "up"})


def outcome(render: Any, data: Any) -> tuple[str, str]:
    """("ok", text) or (exception type, message)."""
    try:
        return "ok", render(data)
    except TemplateExecError as err:
        return type(err).__name__, str(err)


def assert_same(template: Template, data: Any) -> None:
    assert outcome(template.render, data) == outcome(template._interpret, data)


def config_templates() -> list[str]:
    """The queries of the default config's rules and of prometheus-adapter's deploy config."""
    texts = [rule.metrics_query.text for rule in parse_config(default_config_yaml()).rules]
    resource_rules = parse_config(PA_DEPLOY_CONFIG).resource_rules
    assert resource_rules is not None
    for rule in (resource_rules.cpu, resource_rules.memory):
        texts += [rule.container_query.text, rule.node_query.text]
    return texts


@pytest.mark.parametrize("text", config_templates())
def test_config_templates_render_as_interpreted(text: str) -> None:
    template = parse(text)
    assert_same(template, DATA)
    assert_same(template, MISSING_FIELD)  # an unknown field is an error with Go's position prefix


def test_plain_field_error_keeps_gos_message() -> None:
    template = parse("sum(<<.Series>>{<<.Nope>>})")
    with pytest.raises(TemplateExecError, match=r"^template: :1: executing: can't evaluate field Nope"):
        template.render(DATA)


def test_variables_declared_between_fields_persist() -> None:
    template = parse("<<$s := .Series>><<.GroupBy>> <<$s>> <<if .Flag>><<$s>><<end>>")
    assert template.render(DATA) == "pod,container http_requests_total http_requests_total"


# Pieces of templates: text, plain fields (compiled) and what stays interpreted.
PIECES = [
    "sum(",
    ") by (",
    "{",
    ",",
    " ",
    "<<.Series>>",
    "<<.LabelMatchers>>",
    "<<.GroupBy>>",
    "<<.GroupBySlice>>",
    "<<.LabelValuesByName>>",
    "<<.LabelValuesByName.pod>>",
    "<<.LabelValuesByName.nope>>",
    "<<.Count>>",
    "<<.Ratio>>",
    "<<.Flag>>",
    "<<.Nope>>",
    "<<.Series.Nope>>",
    "<< .Series >>",
    "<<- .Series ->>",
    "<</* a comment */>>",
    "<<.>>",
    "<<$>>",
    "<<$.Series>>",
    '<<index .LabelValuesByName "pod">>',
    '<<printf "%s-%d" .Series .Count>>',
    "<<if .Empty>>E<<else>>F<<end>>",
    "<<range .GroupBySlice>>[<<.>>]<<end>>",
    "<<with .LabelValuesByName>><<.namespace>><<end>>",
    "<<$x := .GroupBy>>",
    "<<len .Series>>",
]


@given(st.lists(st.sampled_from(PIECES), max_size=8))
def test_generated_templates_render_as_interpreted(pieces: list[str]) -> None:
    try:
        template = parse("".join(pieces))
    except TemplateError:
        return  # e.g. a `$x` declared twice in one scope is fine, but the joins can still not parse
    assert_same(template, DATA)
    assert_same(template, MISSING_FIELD)
