"""Rendered queries with hostile values are valid PromQL for Prometheus' own parser (`promtool`).

With `regex_escape_values` every query parses. By default values joined into a regex pass through as
prometheus-adapter passes them, so a value that is no valid regex makes Prometheus refuse the query;
the only parse errors allowed then are regex errors inside a string literal, never a broken query.
"""

import random
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from adapter.config import default_config
from adapter.naming.resources import BUILTIN_RESOURCES, StaticResourceMapper
from adapter.registry import RuleId, SeriesRegistry
from tests.adapter.unit.requirements import Req

PROMTOOL = shutil.which("promtool")
ALPHABET = list('"\\\n\r\t\v\a|}{,=~!$<>.*()[]^ `\x00\x1b\x7f\x85\u00a0\u2028\u200bé日😀\U000e0001ab')
QUERIES = 300


def hostile(rng: random.Random) -> str:
    return "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 10)))


def rendered_queries(regex_escape_values: bool) -> list[str]:
    rng = random.Random(20261122)
    mapper = StaticResourceMapper(BUILTIN_RESOURCES)
    registry = SeriesRegistry(default_config(), mapper, regex_escape_values=regex_escape_values)
    registry.update(RuleId(False, 4), [{"__name__": "http_requests_total", "namespace": "n", "pod": "p"}])
    pods = mapper.resolve("", "pods")
    assert pods is not None
    queries = []
    for _ in range(QUERIES):
        names = list({hostile(rng) for _ in range(rng.randint(1, 4))})
        operator = rng.choice(["=", "!=", "in", "notin"])
        selector = [Req("verb", operator, tuple(hostile(rng) for _ in range(rng.randint(1, 3))))]
        if operator in ("=", "!="):
            selector = [Req("verb", operator, selector[0].values[:1])]
        queries.append(registry.custom_query("http_requests", pods, hostile(rng), names, selector).promql)
    return queries


@pytest.mark.parametrize("regex_escape_values", [False, True], ids=["pa-exact", "regex-escaped"])
def test_promtool_accepts_rendered_queries(tmp_path: Path, regex_escape_values: bool) -> None:
    assert PROMTOOL is not None, "promtool ships in Debian's prometheus package, which the set-up installs"
    queries = rendered_queries(regex_escape_values)
    rules = {
        "groups": [{"name": "g", "rules": [{"record": f"r{i}", "expr": q} for i, q in enumerate(queries)]}]
    }
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump(rules, allow_unicode=True), encoding="utf-8")
    result = subprocess.run(
        [PROMTOOL, "check", "rules", str(path)], capture_output=True, text=True, timeout=60
    )
    output = result.stdout + result.stderr
    if regex_escape_values:
        assert result.returncode == 0, output
        assert f"SUCCESS: {QUERIES} rules found" in result.stdout
        return
    errors = [line for line in output.splitlines() if "could not parse expression" in line]
    assert errors, "hostile values should include invalid regexes, or this case checks nothing"
    assert len(errors) < QUERIES
    for error in errors:
        assert "parse error: error parsing regexp" in error, error
