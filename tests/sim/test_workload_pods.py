"""Pure pieces of the workload controller: pod lifecycle statuses, scale-down order, statuses, names,
the metrics exposition and file_sd target groups."""

import json
from pathlib import Path
from typing import Any

import pytest

from sim.workload.annotations import read_knobs
from sim.workload.exposition import render_pod_metrics
from sim.workload.file_sd import PodTarget, target_groups, write_atomically
from sim.workload.model import PodSample
from sim.workload.naming import SAFE_ALPHABET, pod_template_hash
from sim.workload.pods import Stage, deletion_order, is_ready, parse_rfc3339, status_at
from sim.workload.status import deployment_status, max_unavailable

T0 = 1_700_000_000.0


def _pod(
    name: str,
    *,
    node: str = "n1",
    phase: str = "Running",
    ready: bool = True,
    created: str = "2024-01-01T00:00:00Z",
    ready_at: str = "",
) -> dict[str, Any]:
    conditions = [{"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": ready_at}]
    return {
        "metadata": {"name": name, "creationTimestamp": created},
        "spec": {"nodeName": node} if node else {},
        "status": {"phase": phase, "conditions": conditions},
    }


def test_lifecycle_keeps_earlier_timestamps_and_sets_ready_transition_time() -> None:
    pod = {"metadata": {"name": "p", "uid": "u"}, "spec": {"containers": [{"name": "app", "image": "x"}]}}
    pod["status"] = status_at(pod, Stage.SCHEDULED, T0, "10.0.0.1", "10.244.1.2")
    assert pod["status"]["phase"] == "Pending"
    assert pod["status"]["startTime"] == "2023-11-14T22:13:20Z"
    pod["status"] = status_at(pod, Stage.RUNNING, T0 + 3, "10.0.0.1", "10.244.1.2")
    assert pod["status"]["phase"] == "Running" and pod["status"]["podIP"] == "10.244.1.2"
    assert not is_ready(pod)
    started = pod["status"]["containerStatuses"][0]["state"]["running"]["startedAt"]
    pod["status"] = status_at(pod, Stage.READY, T0 + 7, "10.0.0.1", "10.244.1.2")
    conditions = {c["type"]: c for c in pod["status"]["conditions"]}
    assert is_ready(pod)
    assert parse_rfc3339(conditions["Ready"]["lastTransitionTime"]) == T0 + 7
    assert parse_rfc3339(conditions["PodScheduled"]["lastTransitionTime"]) == T0
    assert parse_rfc3339(pod["status"]["startTime"]) == T0
    assert pod["status"]["containerStatuses"][0]["state"]["running"]["startedAt"] == started
    assert pod["status"]["containerStatuses"][0]["ready"] is True


def test_scale_down_removes_the_least_established_pods_first() -> None:
    pods = [
        _pod("old-ready", ready_at="2024-01-01T00:01:00Z"),
        _pod("new-ready", ready_at="2024-01-01T00:05:00Z", created="2024-01-01T00:04:00Z"),
        _pod("not-ready", ready=False),
        _pod("pending", phase="Pending", ready=False),
        _pod("unscheduled", node="", phase="Pending", ready=False),
    ]
    order = [p["metadata"]["name"] for p in deletion_order(pods)]
    assert order == ["unscheduled", "pending", "not-ready", "new-ready", "old-ready"]


def test_newer_pods_go_first_among_equals() -> None:
    pods = [_pod("a", created="2024-01-01T00:00:00Z"), _pod("b", created="2024-01-01T00:00:09Z")]
    assert [p["metadata"]["name"] for p in deletion_order(pods)] == ["b", "a"]


def test_deployment_status_reports_progress_and_availability() -> None:
    deployment = {"metadata": {"name": "web", "generation": 4}, "spec": {"replicas": 4}}
    rs = {"metadata": {"name": "web-abc"}}
    pods = [_pod(f"p{i}", ready=i < 2) for i in range(3)]
    status = deployment_status(deployment, rs, pods, [], "2024-01-01T00:00:00Z")
    assert status["observedGeneration"] == 4
    assert (status["replicas"], status["readyReplicas"], status["updatedReplicas"]) == (3, 2, 3)
    assert status["unavailableReplicas"] == 1
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["Available"]["status"] == "False"  # 2 < 4 - maxUnavailable(1)
    assert conditions["Progressing"]["reason"] == "ReplicaSetUpdated"
    deployment["status"] = status
    done = deployment_status(deployment, rs, [_pod(f"p{i}") for i in range(4)], [], "2024-01-01T00:01:00Z")
    conditions = {c["type"]: c for c in done["conditions"]}
    assert conditions["Available"]["status"] == "True"
    assert conditions["Available"]["lastTransitionTime"] == "2024-01-01T00:01:00Z"
    assert conditions["Progressing"]["reason"] == "NewReplicaSetAvailable"
    assert conditions["Progressing"]["lastTransitionTime"] == "2024-01-01T00:00:00Z"  # still True


@pytest.mark.parametrize(("replicas", "value", "expected"), [(10, "25%", 2), (3, "25%", 0), (5, 2, 2)])
def test_max_unavailable(replicas: int, value: int | str, expected: int) -> None:
    deployment = {"spec": {"replicas": replicas, "strategy": {"rollingUpdate": {"maxUnavailable": value}}}}
    assert max_unavailable(deployment) == expected


def test_template_hash_is_stable_and_spelled_safely() -> None:
    template = {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "app"}]}}
    first = pod_template_hash(template)
    assert first == pod_template_hash(json.loads(json.dumps(template)))
    assert set(first) <= set(SAFE_ALPHABET)
    assert pod_template_hash(template, collision_count=1) != first
    template["spec"]["containers"][0]["image"] = "v2"
    assert pod_template_hash(template) != first


def test_bad_annotations_are_reported_and_ignored() -> None:
    obj = {
        "metadata": {
            "annotations": {
                "sim.surge.dev/rps": "12.5",
                "sim.surge.dev/capacity-rps": "0",
                "sim.surge.dev/startup-seconds": "soon",
            }
        }
    }
    knobs, problems = read_knobs(obj)
    assert knobs.rps == 12.5
    assert knobs.capacity_rps is None and knobs.startup_seconds is None
    assert len(problems) == 2


def test_pod_exposition_has_both_codes_and_leaves_containers_to_the_kubelet() -> None:
    sample = PodSample(
        served=10.5,
        rejected=2.0,
        cpu_seconds=0.25,
        served_rps=1,
        rejected_rps=0,
        cpu_cores=0.1,
        in_flight=0.5,
        memory_bytes=1024,
    )
    text = render_pod_metrics(sample)
    assert 'http_requests_total{code="200"} 10.5\n' in text
    assert 'http_requests_total{code="503"} 2.0\n' in text
    assert "container_" not in text  # summed with the kubelet's, they would count twice
    assert "# TYPE http_requests_in_flight gauge" in text


def test_file_sd_lists_each_pod_with_its_metrics_path(tmp_path: Path) -> None:
    path = tmp_path / "sd" / "targets.json"
    write_atomically(path, target_groups("127.0.0.1:9", [PodTarget("ns", "b"), PodTarget("ns", "a")]))
    groups = json.loads(path.read_text())
    assert [g["labels"]["pod"] for g in groups] == ["a", "b"]
    assert groups[0] == {
        "targets": ["127.0.0.1:9"],
        "labels": {"__metrics_path__": "/pods/ns/a/metrics", "namespace": "ns", "pod": "a"},
    }
    assert [p.name for p in path.parent.iterdir()] == ["targets.json"]
