"""The simulated API server's audit log (`--audit-log`): one audit.k8s.io/v1 Event per request at Metadata
level, written when the answer is complete, for every answer (refused and injected ones too), naming the
caller (user, User-Agent), the verb and object, the code and the times."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from shared.kube import ApiError, KubeClient, load_access, user_agent
from sim.__main__ import parse_args
from sim.apiserver import ApiServer, CertificateAuthority
from sim.runner import ServerThread
from tests.autoscaler.harness import deployment
from tests.autoscaler.helpers import eventually

AGENT = user_agent("surge-autoscaler", "1.2.3", "replica-a")


@pytest.fixture
def audited(apiserver_ca: CertificateAuthority, tmp_path: Path) -> Iterator[ServerThread[ApiServer]]:
    with ServerThread(ApiServer(ca=apiserver_ca, audit_log=tmp_path / "audit.log")) as running:
        yield running


def events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def stamp(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ")


async def test_every_request_is_one_event_saying_who_did_what_with_which_answer(
    audited: ServerThread[ApiServer], tmp_path: Path
) -> None:
    kubeconfig = audited.write_kubeconfig(tmp_path / "kubeconfig", user="replica-a")
    kube = KubeClient(await load_access(str(kubeconfig)), user_agent=AGENT)
    try:
        await kube.request("POST", "/apis/apps/v1/namespaces/default/deployments", body=deployment("web", 2))
        scale_path = "/apis/apps/v1/namespaces/default/deployments/web/scale"
        scale = await kube.get(scale_path)
        await kube.request("PUT", scale_path, body={**scale, "spec": {"replicas": 3}})
        with pytest.raises(ApiError):
            await kube.get("/api/v1/namespaces/default/configmaps/missing")
        injected = audited.call(lambda: audited.server.faults.add("/leases", method="GET", error=503))
        with pytest.raises(ApiError):
            await kube.get("/apis/coordination.k8s.io/v1/namespaces/default/leases/x")
        audited.call(lambda: audited.server.faults.remove(injected))
        await kube.get("/version")
    finally:
        await kube.close()
    async with (
        aiohttp.ClientSession() as session,
        session.get(
            audited.url + "/api/v1/pods", ssl=False, headers={"Authorization": "Bearer wrong"}
        ) as response,
    ):
        assert response.status == 401

    log = events(tmp_path / "audit.log")
    assert [(e["verb"], e["responseStatus"]["code"]) for e in log] == [
        ("create", 201),
        ("get", 200),
        ("update", 200),
        ("get", 404),
        ("get", 503),
        ("get", 200),
        ("list", 401),
    ]
    for event in log:
        assert event["kind"] == "Event" and event["apiVersion"] == "audit.k8s.io/v1"
        assert event["level"] == "Metadata" and event["stage"] == "ResponseComplete"
        assert stamp(event["requestReceivedTimestamp"]) <= stamp(event["stageTimestamp"])
        assert event["sourceIPs"] == ["127.0.0.1"]
    assert len({e["auditID"] for e in log}) == len(log)
    for event in log[:6]:
        assert event["user"] == {"username": "replica-a", "groups": ["system:authenticated"]}
        assert event["userAgent"] == "surge-autoscaler/1.2.3 (replica-a)"
    assert log[6]["user"] == {}  # not authenticated
    assert log[0]["objectRef"] == {  # a create names the object from its body, as kube-apiserver's does
        "resource": "deployments",
        "namespace": "default",
        "name": "web",
        "apiGroup": "apps",
        "apiVersion": "v1",
    }
    assert log[2]["objectRef"] == {
        "resource": "deployments",
        "namespace": "default",
        "name": "web",
        "apiGroup": "apps",
        "apiVersion": "v1",
        "subresource": "scale",
    }
    assert log[2]["requestURI"] == "/apis/apps/v1/namespaces/default/deployments/web/scale"
    assert log[3]["objectRef"] == {
        "resource": "configmaps",
        "namespace": "default",
        "name": "missing",
        "apiVersion": "v1",
    }
    assert "objectRef" not in log[5] and log[5]["requestURI"] == "/version"


async def test_a_watch_is_logged_when_it_ends(audited: ServerThread[ApiServer], tmp_path: Path) -> None:
    kubeconfig = audited.write_kubeconfig(tmp_path / "kubeconfig")
    kube = KubeClient(await load_access(str(kubeconfig)))
    try:
        async with kube.stream("/api/v1/namespaces/default/configmaps", {"watch": "true"}) as stream:
            await kube.request(
                "POST", "/api/v1/namespaces/default/configmaps", body={"metadata": {"name": "a"}}
            )
            await stream.content.readline()  # the ADDED event
            assert [e["verb"] for e in events(tmp_path / "audit.log")] == ["create"]  # the watch still runs
            audited.call(audited.server.store.close_watches)
            assert await stream.content.read() == b""
    finally:
        await kube.close()
    # The server writes the watch's event once its handler returns, which may be after the client saw the end.
    await eventually(lambda: len(events(tmp_path / "audit.log")) == 2, within=5)
    log = events(tmp_path / "audit.log")
    assert [(e["verb"], e["responseStatus"]["code"]) for e in log] == [("create", 201), ("watch", 200)]
    assert log[1]["requestURI"] == "/api/v1/namespaces/default/configmaps?watch=true"


def test_python_m_sim_takes_audit_log(tmp_path: Path) -> None:
    args = parse_args(["--kubeconfig", str(tmp_path / "kc"), "--audit-log", str(tmp_path / "audit.log")])
    assert args.audit_log == tmp_path / "audit.log"


async def test_at_request_level_writes_carry_their_body(
    apiserver_ca: CertificateAuthority, tmp_path: Path
) -> None:
    log = tmp_path / "audit.log"
    with ServerThread(ApiServer(ca=apiserver_ca, audit_log=log, audit_level="Request")) as server:
        kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig", user="replica-a")
        kube = KubeClient(await load_access(str(kubeconfig)), user_agent=AGENT)
        try:
            deployments = "/apis/apps/v1/namespaces/default/deployments"
            await kube.request("POST", deployments, body=deployment("web", 2))
            scale_path = f"{deployments}/web/scale"
            scale = await kube.get(scale_path)
            await kube.request("PUT", scale_path, body={**scale, "spec": {"replicas": 3}})
        finally:
            await kube.close()
    written = [(e["verb"], e.get("requestObject")) for e in events(log)]
    assert written[0][0] == "create" and written[0][1]["metadata"]["name"] == "web"
    assert written[1] == ("get", None)
    assert written[2][0] == "update" and written[2][1]["spec"] == {"replicas": 3}


async def test_a_request_a_partition_black_holed_is_not_logged(
    audited: ServerThread[ApiServer], tmp_path: Path
) -> None:
    """It never reached the server; the requests of the others are logged meanwhile."""
    kubeconfig = audited.write_kubeconfig(tmp_path / "kubeconfig", user="replica-a")
    partition = audited.call(lambda: audited.server.faults.partition("replica-a"))
    kube = KubeClient(await load_access(str(kubeconfig)), user_agent=AGENT)
    try:
        with pytest.raises((TimeoutError, aiohttp.ClientError)):
            await kube.get("/api/v1/namespaces/default/configmaps", request_timeout=0.5)
    finally:
        await kube.close()
    await eventually(lambda: partition.hits == 1)
    audited.call(lambda: audited.server.faults.remove(partition))
    admin = audited.write_kubeconfig(tmp_path / "admin", user="admin")
    kube = KubeClient(await load_access(str(admin)), user_agent=AGENT)
    try:
        await kube.get("/api/v1/namespaces/default/configmaps")
    finally:
        await kube.close()
    assert [e["user"]["username"] for e in events(tmp_path / "audit.log")] == ["admin"]
