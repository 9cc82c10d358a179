"""Shadow mode's pure parts (autoscaler/shadow.py): the --mode flag and the mode annotation, the
incumbent read from an HPA's status, the fence that admits no write, and a shadow decision's record and
series (the daemon end to end: test_shadow_e2e.py)."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from autoscaler.core import decide
from autoscaler.decisions import DecisionRecords, Incumbent
from autoscaler.options import parse_options
from autoscaler.reasons import reason_of
from autoscaler.shadow import ACT, SHADOW, OwnState, ShadowFence, as_if_acted, incumbent_of, object_mode
from autoscaler.sources import MODE_ANNOTATION, mode_annotation
from autoscaler.target_metrics import METRIC_NAMES, SHADOW_HELP, families, shadow_families
from tests.autoscaler.core import builders as b
from tests.autoscaler.core.builders import cpu_snapshot

KEY = ("default", "web")
DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana-dashboard.json"


def test_mode_defaults_to_act_and_takes_only_act_or_shadow() -> None:
    assert parse_options([]).mode == ACT
    assert parse_options(["--mode=shadow"]).mode == SHADOW
    assert parse_options(["--mode=act", "--leader-elect"]).mode == ACT
    with pytest.raises(SystemExit) as exited:
        parse_options(["--mode=observe"])
    assert exited.value.code == 2


def test_shadow_mode_is_refused_with_leader_election(capsys: pytest.CaptureFixture[str]) -> None:
    """A shadow daemon writes nothing, Leases included: it must not take the Leases an incumbent (or an
    acting Surge) holds."""
    with pytest.raises(SystemExit) as exited:
        parse_options(["--mode=shadow", "--leader-elect"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "--mode=shadow" in err and "--leader-elect" in err


@pytest.mark.parametrize(
    ("daemon", "annotation", "mode"),
    [
        (ACT, None, ACT),
        (ACT, "act", ACT),
        (ACT, " act ", ACT),
        (ACT, "shadow", SHADOW),
        (ACT, "shadw", SHADOW),  # a typo shadows: it writes nothing beside the incumbent
        (ACT, "", SHADOW),
        (SHADOW, None, SHADOW),
        (SHADOW, "act", SHADOW),  # an annotation cannot make a shadow daemon write
    ],
)
def test_an_objects_mode(daemon: str, annotation: str | None, mode: str) -> None:
    assert object_mode(daemon, annotation) == mode


def test_the_mode_annotation_is_read_from_the_objects_metadata() -> None:
    assert mode_annotation({"metadata": {"annotations": {MODE_ANNOTATION: "shadow"}}}) == "shadow"
    assert mode_annotation({"metadata": {"annotations": {"other": "x"}}}) is None
    assert mode_annotation({"metadata": {}}) is None
    assert mode_annotation({}) is None


def test_the_incumbent_is_its_hpas_status_replicas() -> None:
    assert incumbent_of({"currentReplicas": 3, "desiredReplicas": 5}) == Incumbent(3, 5)
    assert incumbent_of({"currentReplicas": 3}) == Incumbent(3, None)  # not reconciled by it yet
    assert incumbent_of({"currentReplicas": True, "desiredReplicas": "5"}) == Incumbent(None, None)
    assert incumbent_of(None) == Incumbent(None, None)


class _Lease:
    def __init__(self, held: bool) -> None:
        self.held = held

    def holds(self) -> bool:
        return self.held

    def admit(self, method: str, path: str) -> bool:
        return self.held


@pytest.mark.parametrize("method", ["PUT", "PATCH", "POST", "DELETE"])
def test_the_shadow_fence_admits_no_write_even_while_the_lease_is_held(method: str) -> None:
    lease = _Lease(held=True)
    fence = ShadowFence(lease)
    assert fence.holds()
    assert not fence.admit(method, "/apis/apps/v1/namespaces/default/deployments/web/scale")
    lease.held = False
    assert not fence.holds()  # reconciled only where the lease is held
    assert ShadowFence(None).holds()  # a single replica
    assert not ShadowFence(None).admit(method, "/api/v1/namespaces/default/events")


def test_a_shadow_record_says_so_with_the_incumbents_replicas() -> None:
    records = DecisionRecords()
    spec = b.hpa(metrics=(b.cpu_utilization(50),)).spec
    decision = decide(cpu_snapshot(2, 500))  # a scale-up (to 4 under the rate limit)
    assert decision.rescale
    records.add(KEY, spec, decision, reason_of(decision), b.T0, shadow=Incumbent(2, 2))
    (body,) = records.records_json(KEY) or []
    assert body["shadow"] is True and body["desiredReplicas"] == 4
    assert body["incumbent"] == {"currentReplicas": 2, "desiredReplicas": 2}
    # The incumbent moves on while Surge's outcome stays: one record, the incumbent's newest numbers.
    later = b.T0 + timedelta(seconds=15)
    records.add(KEY, spec, decision, reason_of(decision), later, shadow=Incumbent(2, 3))
    (body,) = records.records_json(KEY) or []
    assert body["incumbent"] == {"currentReplicas": 2, "desiredReplicas": 3}
    # Acting after shadowing is a change of outcome: a record of its own, without the shadow fields.
    records.add(KEY, spec, decision, reason_of(decision), later + timedelta(seconds=15))
    acted, shadowed = records.records_json(KEY) or []
    assert "shadow" not in acted and "incumbent" not in acted and shadowed["shadow"] is True


def test_shadow_series_beside_the_incumbents_and_only_for_shadow_decisions() -> None:
    records = DecisionRecords()
    spec = b.hpa(metrics=(b.cpu_utilization(50),)).spec
    decision = decide(cpu_snapshot(2, 500))
    records.add(KEY, spec, decision, "r", b.T0, shadow=Incumbent(2, 3))
    records.add(("default", "crd"), spec, decision, "r", b.T0, shadow=Incumbent())  # a CRD: none known
    records.add(("default", "acting"), spec, decision, "r", b.T0)
    text = "".join(shadow_families(records.newest()))
    parsed = {f.name: f for f in text_string_to_metric_families(text)}
    assert set(parsed) == set(SHADOW_HELP)

    def samples(name: str) -> dict[str, float]:
        return {s.labels["name"]: s.value for s in parsed[name].samples}

    assert samples("surge_shadow_desired_replicas") == {"web": 4, "crd": 4}
    assert samples("surge_incumbent_current_replicas") == {"web": 2}
    assert samples("surge_incumbent_desired_replicas") == {"web": 3}
    # /metrics has them (`families`), and the per-target series of a shadow decision stay.
    every = {f.name: f for f in text_string_to_metric_families("".join(families(records.newest())))}
    assert set(every) == set(METRIC_NAMES) and set(SHADOW_HELP) <= set(METRIC_NAMES)
    assert every["surge_shadow_desired_replicas"].samples == parsed["surge_shadow_desired_replicas"].samples
    assert len(every["surge_autoscaler_target_status_desired_replicas"].samples) == 3


def test_the_dashboard_plots_the_shadow_decision_beside_the_incumbents() -> None:
    panels = json.loads(DASHBOARD.read_text())["panels"]
    shadow = [p for p in panels if any("surge_shadow_" in t["expr"] for t in p.get("targets", []))]
    assert len(shadow) == 1
    exprs = " ".join(t["expr"] for t in shadow[0]["targets"])
    assert all(name in exprs for name in SHADOW_HELP)


def test_the_shadow_goes_on_from_what_it_would_have_done() -> None:
    """OwnState.after keeps the replicas a decision would have scaled to (and keeps the previous ones when
    it would not rescale), and as_if_acted makes them the target's current replicas of the next decision;
    the cooldown's last-active time is kept until a decision has a newer one."""
    up = decide(cpu_snapshot(2, 500))  # a scale-up
    assert up.rescale and up.desired_replicas > 2
    state = OwnState().after(up)
    assert state.replicas == up.desired_replicas
    snapshot = cpu_snapshot(2, 50)
    assert as_if_acted(snapshot.scale, None) is snapshot.scale  # nothing decided yet: the target's
    scale = as_if_acted(snapshot.scale, state.replicas)
    assert (scale.spec_replicas, scale.status_replicas, scale.selector) == (
        up.desired_replicas,
        snapshot.scale.status_replicas,
        snapshot.scale.selector,
    )
    steady = decide(cpu_snapshot(2, 50))  # at its target: no rescale
    assert not steady.rescale
    assert OwnState(replicas=7, last_active=b.T0).after(steady) == OwnState(replicas=7, last_active=b.T0)
