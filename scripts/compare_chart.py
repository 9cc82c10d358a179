"""Render charts/surge and the prometheus-community prometheus-adapter chart with the same values files and
print where the objects differ.

    .venv/bin/python scripts/compare_chart.py --upstream PATH/charts/prometheus-adapter values1.yaml ...

The upstream chart is not part of this repository: check out prometheus-community/helm-charts and pass its
charts/prometheus-adapter directory. Both are rendered offline by Helm's own engine (helm-python-sdk), as
release `--release` in `--namespace`. Each object is named `Kind namespace/name`; for the objects both render,
each differing field is printed with both values, the ones Surge changes on purpose marked `expected` with the
reason (the rest of docs/deploy.md's key table). config.yaml is compared parsed, the adapter's arguments as a
flag set, and Surge's adapter parses the arguments it is given (a flag it refuses would crash-loop the pod;
one it ignores is printed with the adapter's warning). Exit status 1 when anything unexpected differs.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import helm_python
import yaml

from adapter.flags import FLAG_GROUPS, parse_flags
from shared.auth import add_auth_flags

SURGE_CHART = Path(__file__).resolve().parents[1] / "charts" / "surge"

Obj = dict[str, Any]

# Fields Surge renders differently on purpose (path prefix -> why). A path is `Kind:field.field[index]`.
EXPECTED: dict[str, str] = {
    "*:metadata.labels.helm.sh/chart": "the chart's own name and version",
    "*:metadata.labels.app.kubernetes.io/version": "Surge's version",
    "Deployment:spec.template.metadata.labels.helm.sh/chart": "the chart's own name and version",
    "Deployment:spec.template.metadata.labels.app.kubernetes.io/version": "Surge's version",
    "Deployment:spec.template.metadata.annotations.checksum/config": (
        "surge.reloadConfig: Surge reloads config.yaml without a restart"
    ),
    "Deployment:spec.template.spec.containers[0].image": "Surge's image",
    "Deployment:spec.template.spec.containers[0].args": "Surge's flags (see the flag diff)",
    "Deployment:spec.template.spec.containers[0].readinessProbe.httpGet.path": "/readyz: Surge's readiness",
    "APIService:apiVersion": "always apiregistration.k8s.io/v1 (an offline upstream render picks v1beta1)",
    "APIService:spec.service.port": "service.port reaches the APIService (upstream leaves the default 443)",
    "APIService:metadata.annotations.cert-manager.io/inject-ca-from": "only with certManager.enabled",
    "APIService:metadata.annotations.certmanager.k8s.io/inject-ca-from": "only with certManager.enabled",
}

# Objects only Surge renders (name suffix -> why).
EXPECTED_OBJECTS: dict[str, str] = {
    "-aggregated-metrics-reader": "surge.aggregatedMetricsReader: kubectl top for view/edit/admin",
    "-autoscaler": "autoscaler.enabled",
    "-autoscaler-leader-election": "autoscaler.enabled",
    "/v1beta2.custom.metrics.k8s.io": "surge.customMetricsV1beta2",
}

# Values Surge's chart refuses on purpose while upstream's renders them (Helm's error contains -> why).
EXPECTED_FAILURES: dict[str, str] = {
    "prometheus-adapter would refuse the config.yaml made of it": (
        "upstream renders a config.yaml its adapter refuses at start-up (a crash-looping pod)"
    ),
}

# Adapter flags: upstream's that Surge does not take (with why), and Surge's it adds.
EXPECTED_FLAGS: dict[str, str] = {
    "/adapter": "the binary path: Surge's image runs /adapter itself",
    "--v": "klog verbosity: Surge's --log-level instead (logLevel >= 6 is debug)",
    "--log-level": "from logLevel",
    "--metrics-cache-ttl": "surge.metricsCache",
    "--metrics-cache-max-entries": "surge.metricsCache",
    "--batch-namespace-queries": "surge.batchNamespaceQueries",
    "--regex-escape-values": "surge.regexEscapeValues",
    "--delegate-url": "surge.delegates",
    "--delegate-ca-file": "surge.delegateCaFile",
    "--delegate-token-file": "surge.delegateTokenFile",
}


def render(
    chart: Path, values: dict[str, Any], release: str, namespace: str
) -> tuple[dict[str, Obj], list[str]]:
    """The objects rendered, by name, and the templates whose output is not YAML (with the parser's error)."""
    with helm_python.Chart.load(chart) as loaded:
        manifests = loaded.render(values, name=release, namespace=namespace)
    objects: dict[str, Obj] = {}
    invalid: list[str] = []
    for path, text in manifests.items():
        if path.endswith("NOTES.txt"):
            continue
        try:
            docs = list(yaml.safe_load_all(text))
        except yaml.YAMLError as err:
            invalid.append(f"{path}: {str(err).splitlines()[0]}")
            continue
        for doc in docs:
            if doc and not isinstance(doc, dict):
                invalid.append(f"{path}: a document that is not an object ({type(doc).__name__})")
            elif doc:
                meta = doc["metadata"]
                objects[f"{doc['kind']} {meta.get('namespace', '')}/{meta['name']}"] = doc
    return objects, invalid


def leaves(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict) and value:
        for key, item in value.items():
            yield from leaves(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list) and value and not path.endswith(".args"):
        for index, item in enumerate(value):
            yield from leaves(item, f"{path}[{index}]")
    elif value not in (None, {}, []):  # an empty field means what an absent one does
        yield path, value


def comparable(obj: Obj) -> Obj:
    """The object with config.yaml parsed, so that its layout does not count."""
    if obj["kind"] == "ConfigMap" and "config.yaml" in obj.get("data", {}):
        config = yaml.safe_load(obj["data"]["config.yaml"]) or {}
        obj = {**obj, "data": {**obj["data"], "config.yaml": config}}
    return obj


def flags(args: list[str]) -> dict[str, str]:
    return {arg.partition("=")[0]: arg.partition("=")[2] for arg in args}


def expected(kind: str, path: str) -> str | None:
    for key, why in EXPECTED.items():
        prefix_kind, _, field = key.partition(":")
        if prefix_kind in ("*", kind) and (path == field or path.startswith(field + ".")):
            return why
    return None


def compare(
    upstream: dict[str, Obj], surge: dict[str, Obj], upstream_invalid: list[str]
) -> tuple[list[str], int]:
    """A line per difference (`(expected: why)` or `(UNEXPECTED)`), and how many are unexpected."""
    lines: list[str] = []
    unexpected = 0
    for name in sorted(upstream.keys() - surge.keys()):
        lines.append(f"  only upstream: {name}")
        unexpected += 1
    for name in sorted(surge.keys() - upstream.keys()):
        why = next((why for suffix, why in EXPECTED_OBJECTS.items() if name.endswith(suffix)), None)
        kind = name.partition(" ")[0].lower()
        if any(where.partition(":")[0].endswith(f"/{kind}.yaml") for where in upstream_invalid):
            why = f"upstream's {kind}.yaml renders no YAML with these values"
        lines.append(f"  only Surge:    {name} ({f'expected: {why}' if why else 'UNEXPECTED'})")
        unexpected += why is None
    for name in sorted(upstream.keys() & surge.keys()):
        kind = name.partition(" ")[0]
        ours = dict(leaves(comparable(surge[name])))
        theirs = dict(leaves(comparable(upstream[name])))
        for path in sorted(ours.keys() | theirs.keys()):
            if ours.get(path) == theirs.get(path):
                continue
            why = expected(kind, path)
            if path.endswith(".args") and isinstance(ours.get(path), list):
                ours_flags, theirs_flags = flags(ours[path]), flags(theirs.get(path) or [])
                for flag in sorted(ours_flags.keys() | theirs_flags.keys()):
                    if ours_flags.get(flag) != theirs_flags.get(flag):
                        flag_why = EXPECTED_FLAGS.get(flag)
                        unexpected += flag_why is None
                        mark = f"expected: {flag_why}" if flag_why else "UNEXPECTED"
                        lines.append(
                            f"  {name} {path} {flag}: upstream {theirs_flags.get(flag)!r}, "
                            f"Surge {ours_flags.get(flag)!r} ({mark})"
                        )
                continue
            unexpected += why is None
            mark = f"expected: {why}" if why else "UNEXPECTED"
            lines.append(f"  {name} {path}: upstream {theirs.get(path)!r}, Surge {ours.get(path)!r} ({mark})")
    return lines, unexpected


def adapter_flag_lines(surge: dict[str, Obj]) -> tuple[list[str], int]:
    """Surge's adapter parses the args of the Deployment's `prometheus-adapter` container, as it does at
    start-up: a line per flag it ignores (expected) and one if it refuses them (unexpected)."""
    lines: list[str] = []
    for name, obj in surge.items():
        containers = obj["spec"]["template"]["spec"]["containers"] if obj["kind"] == "Deployment" else []
        for container in containers[:1]:
            if container["name"] != "prometheus-adapter":
                continue
            errors = io.StringIO()
            try:
                with contextlib.redirect_stderr(errors):
                    _, _, warnings = parse_flags(container["args"], (*FLAG_GROUPS, add_auth_flags))
            except SystemExit:
                refusal = errors.getvalue().strip().splitlines()[-1]
                return [*lines, f"  {name} Surge's adapter refuses its args: {refusal} (UNEXPECTED)"], 1
            lines += [f"  {name} args: {warning} (expected: Surge's adapter says so)" for warning in warnings]
    return lines, 0


def render_or_error(
    chart: Path, values: dict[str, Any], release: str, namespace: str
) -> tuple[dict[str, Obj], list[str], str | None]:
    """render(), or no objects and the first line of Helm's error when a template fails to execute."""
    try:
        return (*render(chart, values, release, namespace), None)
    except helm_python.HelmRenderError as err:
        return {}, [], " ".join(str(err).split())


def compare_values(
    upstream_chart: Path, values: dict[str, Any], release: str, namespace: str
) -> tuple[list[str], int, str]:
    """The differences of one values set, how many are unexpected, and the object counts."""
    upstream, upstream_invalid, upstream_error = render_or_error(upstream_chart, values, release, namespace)
    surge, surge_invalid, surge_error = render_or_error(SURGE_CHART, values, release, namespace)
    counts = f"{len(upstream)} upstream objects, {len(surge)} Surge objects"
    if upstream_error or surge_error:
        # A values file upstream's templates cannot execute is the file's fault: Surge may refuse it too.
        lines = [f"  upstream fails to render: {upstream_error}"] if upstream_error else []
        why = next((why for text, why in EXPECTED_FAILURES.items() if text in (surge_error or "")), None)
        if upstream_error:
            why = "so does upstream"
        if surge_error:
            mark = f"expected: {why}" if why else "UNEXPECTED"
            lines.append(f"  Surge fails to render: {surge_error} ({mark})")
        return lines, int(bool(surge_error and not why)), counts
    lines, unexpected = compare(upstream, surge, upstream_invalid)
    flag_lines, refused = adapter_flag_lines(surge)
    lines += flag_lines
    unexpected += refused
    lines += [f"  upstream renders no YAML: {where}" for where in upstream_invalid]
    # Input that breaks upstream's template the same way (e.g. an extraManifests item written as a
    # string) is the values file's fault, not a difference.
    upstream_errors = {where.partition(": ")[2] for where in upstream_invalid}
    for where in surge_invalid:
        same = where.partition(": ")[2] in upstream_errors
        mark = "expected: so does upstream" if same else "UNEXPECTED"
        lines.append(f"  Surge renders no YAML: {where} ({mark})")
        unexpected += not same
    return lines, unexpected, counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--upstream", type=Path, required=True, help="charts/prometheus-adapter of a helm-charts checkout"
    )
    parser.add_argument("--release", default="prometheus-adapter")
    parser.add_argument("--namespace", default="monitoring")
    parser.add_argument("--all", action="store_true", help="also print the expected differences")
    parser.add_argument("values", nargs="*", type=Path, help="values files (none: the defaults)")
    args = parser.parse_args(argv)
    total = 0
    for values_file in args.values or [None]:
        values = helm_python.values_from_yaml(values_file.read_text()) if values_file else {}
        lines, unexpected, counts = compare_values(args.upstream, values, args.release, args.namespace)
        total += unexpected
        print(f"{values_file or 'defaults'}: {counts}, {len(lines)} differences, {unexpected} unexpected")
        for line in lines:
            if args.all or "(expected: " not in line:
                print(line)
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
