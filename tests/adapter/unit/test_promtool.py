"""Rendered queries with hostile values are valid PromQL for Prometheus' own parser (`promtool`)."""

import random
import shutil
import subprocess
from pathlib import Path

import yaml

from adapter.config import default_config
from adapter.naming.resources import BUILTIN_RESOURCES, StaticResourceMapper
from adapter.registry import RuleId, SeriesRegistry
from tests.adapter.unit.requirements import Req

PROMTOOL = shutil.which("promtool")
ALPHABET = list('"\\\n\r\t\v\a|}{,=~!$<>.*()[]^ `\x00\x1b\x7f\x85\u00a0\u2028\u200bé日😀\U000e0001ab')


def hostile(rng: random.Random) -> str:
    return "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 10)))


def test_promtool_accepts_rendered_queries(tmp_path: Path) -> None:
    assert PROMTOOL is not None, "promtool ships in Debian's prometheus package, which the set-up installs"
    rng = random.Random(20261122)
    mapper = StaticResourceMapper(BUILTIN_RESOURCES)
    registry = SeriesRegistry(default_config(), mapper)
    registry.update(RuleId(False, 4), [{"__name__": "http_requests_total", "namespace": "n", "pod": "p"}])
    pods = mapper.resolve("", "pods")
    assert pods is not None
    queries = []
    for _ in range(300):
        names = list({hostile(rng) for _ in range(rng.randint(1, 4))})
        operator = rng.choice(["=", "!=", "in", "notin"])
        selector = [Req("verb", operator, tuple(hostile(rng) for _ in range(rng.randint(1, 3))))]
        if operator in ("=", "!="):
            selector = [Req("verb", operator, selector[0].values[:1])]
        queries.append(registry.custom_query("http_requests", pods, hostile(rng), names, selector).promql)
    rules = {
        "groups": [{"name": "g", "rules": [{"record": f"r{i}", "expr": q} for i, q in enumerate(queries)]}]
    }
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump(rules, allow_unicode=True), encoding="utf-8")
    assert PROMTOOL is not None
    result = subprocess.run(
        [PROMTOOL, "check", "rules", str(path)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 300 rules found" in result.stdout
