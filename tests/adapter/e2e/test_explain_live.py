"""adapter explain against a real Prometheus: the CLI (`python -m adapter explain`) and the adapter's
`/debug/explain` endpoint."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from adapter.__main__ import main
from sim.prometheus import PrometheusProcess, free_port
from tests.adapter.e2e.conftest import TEST_CONFIG_YAML

CUSTOM = "/apis/custom.metrics.k8s.io/v1beta1"


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exited:
        main(["explain", *args])
    return int(exited.value.code or 0), capsys.readouterr().out


def test_cli_explains_a_served_and_an_unserved_metric(
    static_prometheus: PrometheusProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(TEST_CONFIG_YAML)
    flags = (f"--config={config}", f"--prometheus-url={static_prometheus.url}")

    code, out = run_cli(capsys, *flags, "-o", "json", f"{CUSTOM}/namespaces/default/pods/web-1/queue_length")
    assert code == 0
    served = json.loads(out)
    assert served["served"] is True and served["rule"] == "rules[3]"
    assert served["promql"] == 'sum(queue_length{namespace="default",pod="web-1"}) by (pod)'
    assert served["series"] == [{"name": "queue_length", "labels": ["instance", "job", "namespace", "pod"]}]
    assert [value["value"] for value in served["result"]["values"]] == ["100m"]
    assert served["result"]["values"][0]["describedObject"]["name"] == "web-1"

    code, out = run_cli(capsys, *flags, f"{CUSTOM}/namespaces/default/pods/*/queue_lenght")
    assert code == 0
    assert "Served:    no\n" in out
    assert "Why not:   no rule serves queue_lenght for pods\n" in out
    assert "Nearest:   queue_length" in out

    code, out = run_cli(
        capsys,
        f"--config={config}",
        f"--prometheus-url=http://127.0.0.1:{free_port()}",
        "-o",
        "json",
        f"{CUSTOM}/namespaces/default/pods/web-1/queue_length",
    )
    assert code == 1  # Prometheus unreachable: explained as far as it goes
    unreachable = json.loads(out)
    assert unreachable["served"] is None
    assert unreachable["rules"][0]["reasons"] == ["its seriesQuery failed: no answer (see Why not)"]
    assert unreachable["reasons"][0].startswith("Prometheus unreachable: /api/v1/series: ")


async def test_debug_explain_endpoint(static_prometheus: PrometheusProcess, start_adapter: Any) -> None:
    adapter = await start_adapter(static_prometheus.url)
    path = f"{CUSTOM}/namespaces/default/pods/*/queue_length?labelSelector=app%3Dweb"
    status, body = await adapter.get(f"/debug/explain?path={quote(path)}")
    assert status == 200, body
    assert body["served"] is True and body["rule"] == "rules[3]"
    # The objects the selector matches, from the adapter's object cache, as the provider names them.
    assert body["promql"] == 'sum(queue_length{namespace="default",pod=~"web-1|web-2"}) by (pod)'
    values = body["result"]["values"]
    assert [(v["describedObject"]["name"], v["value"]) for v in values] == [
        ("web-1", "100m"),
        ("web-2", "300m"),
    ]
    status, served = await adapter.get(path)
    assert [item["value"] for item in served["items"]] == ["100m", "300m"]  # what the API answers

    status, body = await adapter.get(
        f"/debug/explain?path={quote(CUSTOM + '/namespaces/default/services/*/queue_length')}"
    )
    assert status == 200 and body["served"] is False
    assert "no series has label 'service'" in body["rules"][3]["reasons"][0]

    status, body = await adapter.get("/debug/explain")
    assert status == 400 and body["kind"] == "Status"
    assert body["message"].startswith("query parameter path is required")
    status, body = await adapter.get("/debug/explain?path=/apis/nope")
    assert status == 400 and "is not a metric path" in body["message"]
