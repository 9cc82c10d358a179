"""docs/deploy.md stays true: its objects are valid, the files and flags it names exist."""

from __future__ import annotations

import re

import kubernetes_validate
import yaml

from adapter.flags import FLAG_GROUPS, build_parser, normalize_argv
from autoscaler.flags import build_parser as autoscaler_parser
from shared.auth.flags import add_auth_flags
from sim.__main__ import build_parser as sim_parser
from tests.manifests.conftest import MANIFESTS, REPO

DOC = (REPO / "docs" / "deploy.md").read_text()


# Argo CD's and Flux's objects (section 13) have no built-in schema; tests/chart/test_docs_gitops.py renders
# the chart with their values instead.
GITOPS_GROUPS = ("argoproj.io/", "source.toolkit.fluxcd.io/", "helm.toolkit.fluxcd.io/")


def yaml_blocks() -> list[object]:
    return [doc for block in re.findall(r"```yaml\n(.*?)```", DOC, re.S) for doc in yaml.safe_load_all(block)]


def test_kubernetes_objects_in_the_guide_validate() -> None:
    objects = [b for b in yaml_blocks() if isinstance(b, dict) and "apiVersion" in b and "kind" in b]
    assert {"HorizontalPodAutoscaler"} <= {o["kind"] for o in objects}
    for obj in objects:
        if not obj["apiVersion"].startswith(GITOPS_GROUPS):
            kubernetes_validate.validate(obj, "1.31.0", strict=True)


def test_paths_the_guide_names_exist() -> None:
    for path in set(re.findall(r"(?<![\w/])manifests/[\w./-]+", DOC)):
        assert (REPO / path.rstrip(".")).exists(), path
    for stem in re.findall(r"for f in ([\w\s\\-]+?); do", DOC, re.S)[0].split():
        if stem != "\\":
            assert (MANIFESTS / f"{stem}.yaml").exists(), stem


# Flags of the kube-apiserver the guide tells admins to check, not the adapter's.
KUBE_APISERVER_FLAGS = {"--proxy-client-cert-file", "--proxy-client-key-file"}


def test_flags_the_guide_names_are_accepted() -> None:
    # Both daemons' flags, and the simulated cluster's (section 15).
    parsers = (build_parser((*FLAG_GROUPS, add_auth_flags)), autoscaler_parser(), sim_parser())
    known = {option for parser in parsers for action in parser._actions for option in action.option_strings}
    for flag in set(re.findall(r"`(--[a-z0-9-]*[a-z0-9])", DOC)) - KUBE_APISERVER_FLAGS:
        _, warnings = normalize_argv([flag])
        assert flag in known or warnings, flag  # accepted, or accepted and ignored with a warning
