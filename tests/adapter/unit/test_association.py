"""Resource ↔ label association (prometheus-adapter's overrides/template) and the static resource mapper."""

import pytest

from adapter.gotemplate import parse
from adapter.naming.association import ResourceAssociation
from adapter.naming.resources import (
    BUILTIN_RESOURCES,
    GroupResource,
    ResourceInfo,
    StaticResourceMapper,
    resolve_resource,
)

MAPPER = StaticResourceMapper(BUILTIN_RESOURCES)


@pytest.mark.parametrize(
    ("text", "resolved"),
    [
        ("pods", "pods"),
        ("pod", "pods"),
        ("Pod", "pods"),
        ("deployments.apps", "deployments.apps"),
        ("deployment.apps", "deployments.apps"),
        ("deployments", "deployments.apps"),  # empty group searches every group
        ("job", "jobs.batch"),
        ("ingresses.networking.k8s.io", "ingresses.networking.k8s.io"),
        ("pods.apps", None),
        ("widgets", None),
    ],
)
def test_resolve_resource(text: str, resolved: str | None) -> None:
    info = resolve_resource(MAPPER, text)
    assert (str(info.group_resource) if info else None) == resolved


def test_core_wins_for_an_empty_group() -> None:
    mapper = StaticResourceMapper(
        [
            ResourceInfo("example.com", "v1", "services", "service", "Service", True),
            ResourceInfo("", "v1", "services", "service", "Service", True),
        ]
    )
    info = mapper.resolve("", "service")
    assert info is not None and info.group == ""


def test_group_resource_parse_and_str() -> None:
    assert GroupResource.parse("ingresses.networking.k8s.io") == GroupResource(
        "networking.k8s.io", "ingresses"
    )
    assert str(GroupResource("", "pods")) == "pods"
    assert str(GroupResource("apps", "deployments")) == "deployments.apps"


def test_default_template_associates_resource_named_labels() -> None:
    association = ResourceAssociation({}, parse("<<.Resource>>"))
    found = {
        label: (str(info.group_resource) if info else None)
        for label in ["namespace", "pod", "service", "job", "instance", "verb", "node"]
        for info in [association.resource_for_label(label, MAPPER)]
    }
    assert found == {
        "namespace": "namespaces",
        "pod": "pods",
        "service": "services",
        "job": "jobs.batch",
        "instance": None,
        "verb": None,
        "node": "nodes",
    }


def test_overrides_take_precedence_over_the_template() -> None:
    association = ResourceAssociation(
        {"kubernetes_pod_name": GroupResource("", "pod"), "pod": GroupResource("", "service")},
        parse("<<.Resource>>"),
    )
    pod = association.resource_for_label("kubernetes_pod_name", MAPPER)
    assert pod is not None and pod.resource == "pods"
    overridden = association.resource_for_label("pod", MAPPER)
    assert overridden is not None and overridden.resource == "services"
    pods = MAPPER.resolve("", "pods")
    assert pods is not None
    assert association.label_for_resource(pods, MAPPER) == "kubernetes_pod_name"


def test_template_with_group_both_ways() -> None:
    association = ResourceAssociation({}, parse("kube_<<.Group>>_<<.Resource>>"))
    deployments = MAPPER.resolve("apps", "deployments")
    assert deployments is not None
    assert association.label_for_resource(deployments, MAPPER) == "kube_apps_deployment"
    assert association.resource_for_label("kube_apps_deployment", MAPPER) == deployments
    ingresses = MAPPER.resolve("networking.k8s.io", "ingresses")
    assert ingresses is not None
    # The group is sanitised one way only: dotted groups cannot be found back (prometheus-adapter's quirk).
    assert association.label_for_resource(ingresses, MAPPER) == "kube_networking_k8s_io_ingress"
    assert association.resource_for_label("kube_networking_k8s_io_ingress", MAPPER) is None


def test_no_template_and_no_override_means_no_label() -> None:
    association = ResourceAssociation({"ns": GroupResource("", "namespace")}, None)
    pods = MAPPER.resolve("", "pods")
    assert pods is not None
    assert association.label_for_resource(pods, MAPPER) is None
    assert association.resource_for_label("pod", MAPPER) is None


def test_unresolved_overrides_are_reported() -> None:
    association = ResourceAssociation(
        {"pod": GroupResource("", "pod"), "widget": GroupResource("example.com", "widgets")}, None
    )
    assert association.unresolved_overrides(MAPPER) == ["widget: widgets.example.com"]
