"""Server-side printing helpers: kubectl's age format and the HPA TARGETS column."""

from __future__ import annotations

from sim.apiserver.tables import hpa_targets, human_duration, since


def test_human_duration_matches_kubectl_age_format() -> None:
    cases = {
        0: "0s",
        59: "59s",
        119: "119s",
        120: "2m",
        125: "2m5s",
        600: "10m",
        179 * 60: "179m",
        3 * 3600: "3h",
        3 * 3600 + 120: "3h2m",
        8 * 3600: "8h",
        47 * 3600: "47h",
        2 * 86400: "2d",
        2 * 86400 + 3600: "2d1h",
        8 * 86400: "8d",
        800 * 86400: "2y70d",
        9 * 365 * 86400: "9y",
    }
    assert {s: human_duration(s) for s in cases} == cases
    assert human_duration(-5) == "<invalid>" and human_duration(-0.5) == "0s"
    assert since("not a time") == "<invalid>" and since(None) == "<unknown>"


def test_hpa_targets_column() -> None:
    cpu = {
        "type": "Resource",
        "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}},
    }
    pods = {
        "type": "Pods",
        "pods": {"metric": {"name": "rps"}, "target": {"type": "AverageValue", "averageValue": "10"}},
    }
    hpa = {
        "spec": {"metrics": [cpu, pods]},
        "status": {
            "currentMetrics": [
                {
                    "type": "Resource",
                    "resource": {
                        "name": "cpu",
                        "current": {"averageUtilization": 72, "averageValue": "144m"},
                    },
                }
            ]
        },
    }
    assert hpa_targets(hpa) == "cpu: 72%/60%, rps: <unknown>/10"
    many = {"spec": {"metrics": [cpu] * 5}}
    assert hpa_targets(many).endswith(" + 2 more...")
    assert hpa_targets({"spec": {}}) == "<none>"
