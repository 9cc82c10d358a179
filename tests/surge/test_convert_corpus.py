"""`surge convert` on inputs nobody tuned it for: every file of tests/data/keda and tests/data/hpa (users'
shapes, KEDA's documented options, HPAs of every autoscaling version) and mutations of valid objects
(hypothesis) either convert to objects the simulated API server accepts (CRD schema, CEL rules, strict
field validation, through the real kubectl), or are refused with exit 2 and one stderr line, never a
traceback. One API server and one kubectl call check every converted object."""

from __future__ import annotations

import contextlib
import copy
import io
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autoscaler.core.types import DIRECT_METRIC_PREFIX
from shared.promql.confine import check
from surge.__main__ import main as surge_main
from surge.convert import ConvertError, convert, to_yaml
from tests.fixtures.apiserver import KubectlRunner

REPO = Path(__file__).resolve().parents[2]
DATA = (REPO / "tests" / "data" / "keda", REPO / "tests" / "data" / "hpa")
CRD_FILE = REPO / "manifests" / "crd-horizontalautoscaler.yaml"
CORPUS = sorted(p for d in DATA for p in d.iterdir() if p.suffix in (".yaml", ".json"))
# The files that are refused, and a phrase of their line (or phrases, one of which); every other file
# converts.
REFUSED: dict[str, str | tuple[str, ...]] = {
    "alias-bomb.yaml": "more than 1000000 values once its YAML aliases are expanded",
    # PyYAML's recursion gives out, or (under a raised recursion limit) it reads a list of lists.
    "deep-nesting.yaml": ("nested too deeply", "not an object"),
    "latin1.yaml": "is not UTF-8 text",
    "bad-name-and-labels.yaml": "metadata.name: 'Orders_Worker'",
    "broken-values.yaml": "spec.fallback.behavior",
    "cpu-only-to-zero.yaml": "cpu and memory triggers cannot scale to zero",
    "cron-above-max.yaml": "minReplicas of a schedule must be less than or equal to maxReplicas",
    "empty.yaml": "holds no object",
    "misplaced.yaml": "belongs in spec.advanced.horizontalPodAutoscalerConfig.behavior",
    "not-yaml.yaml": "is not YAML",
    "query-other-namespace.yaml": 'namespace="frontend"',
    "unknown-triggers.yaml": "cannot express these triggers: kafka",
    "wrong-kind.yaml": "ScaledJob",
    "v2-mistakes.yaml": "spec.metrics[0].resource.targetAverageUtilization: not a field here",
    "v2-scale-to-zero-cpu.yaml": "at least one Object or External metric",
}


def _check_refusal(result: subprocess.CompletedProcess[str], what: str) -> None:
    assert result.returncode == 2, f"{what}: exit {result.returncode}: {result.stderr}"
    assert result.stdout == "", what
    assert result.stderr.startswith("surge convert: ") and result.stderr.count("\n") == 1, result.stderr


def _server_accepts(kubectl: KubectlRunner, printed: str) -> None:
    """One dry-run create of every document `surge convert` printed (their namespaces created first),
    through the real kubectl, which reads the YAML as a user's `surge convert ... | kubectl apply -f -`."""
    documents = [d for d in yaml.safe_load_all(printed) if d is not None]
    kubectl("apply", "-f", str(CRD_FILE))
    namespaces = sorted({d["metadata"]["namespace"] for d in documents if "namespace" in d["metadata"]})
    if namespaces:
        kubectl(
            "apply",
            "-f",
            "-",
            input=yaml.safe_dump_all(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}} for n in namespaces
            ),
        )
    result = kubectl(
        "create",
        "--dry-run=server",
        "-o",
        "name",
        "-f",
        "-",
        input=printed,
        check=False,
    )
    assert result.returncode == 0 and result.stderr == "", result.stderr
    assert result.stdout.count("horizontalautoscaler.autoscaling.surge.dev/") == len(documents)


def _cli(path: Path) -> subprocess.CompletedProcess[str]:
    """`surge convert -f path` through the CLI's entry point (argument parsing, printing, exit status), in
    this process: an interpreter start per file would cost more than all the conversions together."""
    stdout, stderr = io.StringIO(), io.StringIO()
    with (
        contextlib.redirect_stdout(stdout),
        contextlib.redirect_stderr(stderr),
        pytest.raises(SystemExit) as exit,
    ):
        surge_main(["convert", "-f", str(path)])
    assert isinstance(exit.value.code, int)
    return subprocess.CompletedProcess([], exit.value.code, stdout.getvalue(), stderr.getvalue())


def test_every_file_converts_to_what_the_server_accepts_or_is_refused_in_one_line(
    kubectl: KubectlRunner,
) -> None:
    printed: list[str] = []
    for path in CORPUS:
        result = _cli(path)
        if path.name in REFUSED:
            _check_refusal(result, path.name)
            phrases = REFUSED[path.name]
            phrases = (phrases,) if isinstance(phrases, str) else phrases
            assert any(phrase in result.stderr for phrase in phrases), result.stderr
        else:
            assert result.returncode == 0, f"{path.name}: {result.stderr}"
            # Only the lines of what behaves differently, and the HPA's reminder, each naming its object.
            assert all(
                re.match(r"(ScaledObject|HorizontalPodAutoscaler) \S+: \S", line)
                for line in result.stderr.splitlines()
            ), f"{path.name}: {result.stderr}"
            printed.append(result.stdout)
    assert len(CORPUS) >= 38 and set(REFUSED) <= {path.name for path in CORPUS}
    assert len(printed) == len(CORPUS) - len(REFUSED)
    _server_accepts(kubectl, "---\n".join(printed))


def test_python_dash_m_surge_convert_prints_the_same() -> None:
    """The real command, as a subprocess, on a file of each outcome."""
    paths = [
        DATA[0] / "multi-document.yaml",
        DATA[1] / "v1-with-alpha-annotations.json",
        DATA[0] / "broken-values.yaml",
        DATA[0] / "not-yaml.yaml",
    ]
    runs = [
        subprocess.Popen(
            [sys.executable, "-m", "surge", "convert", "-f", str(path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for path in paths
    ]
    for path, run in zip(paths, runs, strict=True):
        stdout, stderr = run.communicate(timeout=120)
        expected = _cli(path)
        assert (run.returncode, stdout, stderr) == (expected.returncode, expected.stdout, expected.stderr)


# --- mutations ----------------------------------------------------------------------------------

VALID = [
    yaml.safe_load((DATA[0] / f"{n}.yaml").read_text())
    for n in ("mixed", "prometheus-full-options", "cron", "statefulset-multi-prometheus")
]
VALID += [
    yaml.safe_load((DATA[1] / f"{n}.yaml").read_text())
    for n in ("v2-external-object-pods", "v2beta1-metrics", "v1-cpu")
]
ODD_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(
        [
            "0",
            "-1",
            "1e9",
            "2147483648",
            "½",
            "٣",
            "1Ki",
            "10m",
            "",
            " 5 ",
            "true",
            "Value",
            "AverageValue",
            "Utilization",
            'x"} or vector(1) #',
            "sum(up)",
            "0 0 31 2 *",
        ]
    ),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
)


def _paths(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [at]
    if isinstance(value, dict):
        for key, item in value.items():
            out += _paths(item, (*at, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            out += _paths(item, (*at, i))
    return out


# Values close to valid ones (most mutations should still convert) and some far from any.
PLAUSIBLE_VALUES = st.one_of(
    st.integers(min_value=-3, max_value=2**33),
    st.sampled_from(
        [
            "0",
            "1",
            "3",
            "2147483648",
            "0.5",
            "1e3",
            "500m",
            "1Ki",
            "",
            " 7 ",
            "Value",
            "Utilization",
            "AverageValue",
            "Deployment",
            "währung",
            "sum(up)",
            "0 9 * * *",
            "Europe/Berlin",
            "static",
        ]
    ),
)


@st.composite
def mutated(draw: st.DrawFn) -> dict[str, Any]:
    """A valid object with one or two of its fields dropped, retyped, moved to spec, or added."""
    obj = copy.deepcopy(draw(st.sampled_from(VALID)))
    for _ in range(draw(st.integers(1, 2))):
        # Mostly below spec and metadata: a broken kind or spec says little.
        paths = [p for p in _paths(obj) if len(p) > 2] or [p for p in _paths(obj) if p]
        path = draw(st.sampled_from(paths))
        parent = obj
        for step in path[:-1]:
            parent = parent[step]
        action = draw(
            st.sampled_from(["retype", "retype", "plausible", "plausible", "drop", "misplace", "add"])
        )
        if action == "drop":
            del parent[path[-1]]
        elif action in ("retype", "plausible"):
            parent[path[-1]] = draw(ODD_VALUES if action == "retype" else PLAUSIBLE_VALUES)
        elif action == "misplace" and isinstance(parent, dict) and isinstance(obj["spec"], dict):
            obj["spec"][path[-1]] = parent.pop(path[-1])
        elif isinstance(parent, dict):
            key = draw(st.sampled_from(["extra", "minReplicas", "ünïcode", "query", "value", "metricName"]))
            parent[key] = draw(st.one_of(ODD_VALUES, PLAUSIBLE_VALUES))
    return obj


def test_mutated_objects_convert_to_what_the_server_accepts_or_are_refused(kubectl: KubectlRunner) -> None:
    accepted: list[dict[str, Any]] = []
    refusals: list[str] = []

    @settings(
        max_examples=300,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(mutated())
    def one(obj: dict[str, Any]) -> None:
        try:
            out = convert(obj)
        except ConvertError as err:
            assert "\n" not in str(err) and str(err)
            refusals.append(str(err))
            return
        yaml.safe_dump(out)  # printable
        for metric in out["spec"].get("metrics") or ():
            query = (metric.get("external") or {}).get("query")
            if query is not None:
                # No value of the input is pasted into PromQL: a query is the input's own, or the constant.
                name = metric["external"]["metric"]["name"]
                assert name.startswith(DIRECT_METRIC_PREFIX)
                assert query == "vector(0)" or query in _strings(obj), query
                check(query)
        accepted.append({**out, "metadata": {**out["metadata"], "name": f"m{len(accepted)}"}})

    one()
    assert accepted and refusals  # both sides of the dichotomy were exercised
    _server_accepts(kubectl, to_yaml(accepted))


def _strings(value: Any) -> set[str]:
    if isinstance(value, dict):
        return set().union(*(_strings(v) for v in value.values()), set())
    if isinstance(value, list):
        return set().union(*(_strings(v) for v in value), set())
    return {value.strip()} if isinstance(value, str) else set()
