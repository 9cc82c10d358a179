"""`surge explain` without a daemon: flag errors, an unreachable daemon, and the text of various records."""

from __future__ import annotations

import socket
from datetime import timedelta

import pytest

from autoscaler.core import History, Snapshot, decide
from autoscaler.core.types import MetricFetchError, Recommendation
from autoscaler.decisions import DecisionRecords
from autoscaler.reasons import reason_of
from surge.__main__ import main
from surge.explain import describe
from tests.autoscaler.core import builders as b
from tests.autoscaler.core.builders import cpu_snapshot

KEY = ("default", "web")


def explain(*argv: str) -> int:
    """`surge explain ...` as the console script runs it; its exit status."""
    with pytest.raises(SystemExit) as exited:
        main(["explain", *argv])
    code = exited.value.code
    assert isinstance(code, int)
    return code


def test_unreachable_daemon_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as s:  # a port nobody listens on once closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert explain("default/web", "--autoscaler-url", f"http://127.0.0.1:{port}") == 1
    err = capsys.readouterr().err
    assert err.startswith(f"surge explain: error: cannot reach the autoscaler at http://127.0.0.1:{port}: ")
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    ("argv", "complaint"),
    [
        (["web", "--autoscaler-url", "http://127.0.0.1:1"], "'web' is not NAMESPACE/NAME"),
        (["a/b/c", "--autoscaler-url", "http://127.0.0.1:1"], "'a/b/c' is not NAMESPACE/NAME"),
        (["default/web", "--autoscaler-url", "localhost:8080"], "is not an http:// or https:// URL"),
        (["default/web"], "the following arguments are required: --autoscaler-url"),
        (["default/web", "--autoscaler-url", "http://127.0.0.1:1", "-o", "yaml"], "invalid choice: 'yaml'"),
    ],
)
def test_flag_errors_exit_2(argv: list[str], complaint: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert explain(*argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("surge explain: error: ") and complaint in err and err.count("\n") == 1


def text_of(snapshot: Snapshot) -> str:
    """`surge explain`'s text for the record the daemon would keep of this snapshot's decision."""
    decision = decide(snapshot)
    records = DecisionRecords()
    records.add(KEY, snapshot.hpa.spec, decision, reason_of(decision), b.T0)
    (record,) = records.records_json(KEY) or []
    return describe(record)


def test_text_of_a_utilization_metric_held_by_the_scale_down_window() -> None:
    history = History(recommendations=(Recommendation(8, b.T0 - timedelta(seconds=100)),))
    text = text_of(cpu_snapshot(8, 10, history=history))
    assert "resource cpu on pods  (as a percentage of request):  10% (10m) / 50%" in text
    assert "8 current / 8 desired" in text
    assert "held by scale-down stabilization window (max of last 300 s = 8)" in text
    assert "10% (10m) / 50% -> ratio 0.20 -> proposal 2" in text
    assert (
        "stabilization  8 (scale-down window 300 s: max of [8, 2] = 8), held by the scale-down window" in text
    )
    assert "limits         8 (min 1, max 10) -> ScalingLimited DesiredWithinRange" in text


def test_text_of_a_failed_metric() -> None:
    snap = cpu_snapshot(2, 100)
    text = text_of(b.snapshot(snap.hpa, 2, snap.pods, (MetricFetchError("it is down"),), b.T0))
    assert "resource cpu on pods  (as a percentage of request):  <unknown> / 50%" in text
    assert "no value (the metric failed)" in text
    assert "Reason:" in text and "kept 2 replicas: the HPA was unable to compute the replica count" in text
    assert "stabilization" not in text and "Min replicas" not in text
    assert "FailedGetResourceMetric" in text  # the ScalingActive condition in the table
