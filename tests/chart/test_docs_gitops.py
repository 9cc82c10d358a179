"""docs/deploy.md section 13 stays true: its commands and its Argo CD and Flux objects use charts/surge
as the chart takes them."""

from __future__ import annotations

import re
import shlex

import helm_python
import yaml

from tests.chart.conftest import CHART, REPO

DOC = (REPO / "docs" / "deploy.md").read_text()
SECTION = DOC[DOC.index("## 13. Replace prometheus-adapter with Helm") : DOC.index("\n## 14. ")]


def gitops_objects() -> dict[str, dict]:
    blocks = re.findall(r"```yaml\n(.*?)```", SECTION, re.S)
    return {doc["kind"]: doc for block in blocks for doc in yaml.safe_load_all(block)}


def test_the_three_commands() -> None:
    (block,) = re.findall(r"```sh\n(.*?)```", SECTION, re.S)[:1]
    commands = [shlex.split(line) for line in block.replace("\\\n", " ").strip().splitlines()]
    assert len(commands) == 3
    get, upgrade, _ = commands
    assert get[:2] == ["helm", "-n"] and "get" in get and "values" in get
    release, namespace = get[get.index("values") + 1], get[2]
    assert upgrade[:5] == ["helm", "-n", namespace, "upgrade", release]
    assert (REPO / upgrade[5]).resolve() == CHART
    sets = helm_python.parse_set_string(
        ",".join(upgrade[i + 1] for i, a in enumerate(upgrade) if a == "--set")
    )
    with helm_python.Chart.load(CHART) as chart:
        merged = chart.merge_values(sets)
        manifests = chart.render(sets, name=release, namespace=namespace)
    assert merged["image"] == {**merged["image"], "repository": "registry.example.com/surge", "tag": "0.1.0"}
    deployment = yaml.safe_load(manifests["surge/templates/adapter-deployment.yaml"])
    assert deployment["metadata"]["name"] == release  # the rollout status command's deployment
    assert f"deployment/{release}" in block


def test_argo_cd_application_and_flux_helm_release_render_the_chart() -> None:
    objects = gitops_objects()
    application, release, source = objects["Application"], objects["HelmRelease"], objects["GitRepository"]
    assert (REPO / application["spec"]["source"]["path"]).resolve() == CHART
    assert (REPO / release["spec"]["chart"]["spec"]["chart"]).resolve() == CHART
    assert release["spec"]["chart"]["spec"]["sourceRef"]["name"] == source["metadata"]["name"]
    renders = [
        (
            application["spec"]["source"]["helm"]["releaseName"],
            application["spec"]["destination"]["namespace"],
            application["spec"]["source"]["helm"]["valuesObject"],
        ),
        (release["spec"]["releaseName"], release["metadata"]["namespace"], release["spec"]["values"]),
    ]
    for name, namespace, values in renders:
        assert helm_python.lint(CHART, values, strict=True)["errors"] == []
        with helm_python.Chart.load(CHART) as chart:
            manifests = chart.render(values, name=name, namespace=namespace)
        deployment = yaml.safe_load(manifests["surge/templates/adapter-deployment.yaml"])
        assert deployment["metadata"]["name"] == "prometheus-adapter"
        container = deployment["spec"]["template"]["spec"]["containers"][0]
        assert container["image"] == "registry.example.com/surge:0.1.0"
        assert "--prometheus-url=http://prometheus-operated.monitoring.svc:9090" in container["args"]
