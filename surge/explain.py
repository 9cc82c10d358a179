"""`surge explain NAMESPACE/NAME --autoscaler-url URL [-o text|json]`: why an autoscaler has its count.

Reads the newest decision record the autoscaler daemon keeps for the target (`/debug/decisions/<namespace>/
<name>` on its metrics port) and prints it like `kubectl describe hpa`, followed by the derivation: each
metric's value, ratio and proposal, then stabilization, limits and the result. `-o json` prints the record.
The daemon authorizes the read as `get` on the autoscaler: the request carries the credentials of
--kubeconfig's user (bearer token or client certificate), as kubectl would send them to the API server.
An unknown target, a refusal or an unreachable daemon is one line on stderr and exit status 1; flag errors
exit 2.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import ssl
import sys
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import aiohttp

from shared.cli import http_url
from shared.kube import ApiError, ClusterAccess, KubeClient, KubeConfigError, direct_access, load_access

NAME = "explain"
HELP = "why an autoscaler has its replica count: its last decision, from the autoscaler daemon"
DESCRIPTION = (
    "Prints the newest decision the autoscaler daemon recorded for NAMESPACE/NAME: the autoscaler as "
    "`kubectl describe hpa` shows it, the reason in one sentence, and the derivation (metric -> ratio -> "
    "proposal -> stabilization -> limits -> result). The daemon serves its records on its metrics port "
    "(--secure-port, 8443 by default); only the leader decides, so ask the leading replica (with "
    "--leader-elect-buckets, the replica holding the target's bucket: any other replica names it)."
)
TIMEOUT_SECONDS = 10.0

Record = dict[str, Any]


class ExplainError(Exception):
    """No record could be had: the message says why, in one line."""


def _target(text: str) -> tuple[str, str]:
    """argparse type: NAMESPACE/NAME."""
    namespace, _, name = text.partition("/")
    if not namespace or not name or "/" in name:
        raise argparse.ArgumentTypeError(f"{text!r} is not NAMESPACE/NAME")
    return namespace, name


def register(subcommands: Any) -> None:
    """Add `explain` to the `surge` command's subcommands."""
    p = subcommands.add_parser(NAME, help=HELP, description=DESCRIPTION)
    p.add_argument("target", type=_target, metavar="NAMESPACE/NAME", help="the autoscaler")
    p.add_argument(
        "--autoscaler-url",
        type=http_url,
        required=True,
        metavar="URL",
        help="the autoscaler daemon's metrics port, e.g. https://127.0.0.1:8443",
    )
    p.add_argument(
        "--kubeconfig",
        default=os.environ.get("KUBECONFIG") or None,
        help="whose credentials to present (default: $KUBECONFIG; without one the request is anonymous)",
    )
    p.add_argument(
        "--certificate-authority", default="", metavar="FILE", help="CA bundle of the daemon's certificate"
    )
    p.add_argument(
        "--insecure-skip-tls-verify", action="store_true", help="do not verify the daemon's certificate"
    )
    p.add_argument(
        "-o", "--output", choices=("text", "json"), default="text", help="text (default) or the JSON record"
    )
    p.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> int:
    daemon = Daemon(
        args.autoscaler_url, args.kubeconfig, args.certificate_authority, args.insecure_skip_tls_verify
    )
    try:
        record = asyncio.run(latest_record(daemon, args.target))
    except ExplainError as err:
        sys.stderr.write(f"surge explain: error: {err}\n")
        return 1
    print(json.dumps(record, indent=2) if args.output == "json" else describe(record))
    return 0


@dataclass(frozen=True)
class Daemon:
    """Where the autoscaler daemon is, and how to reach it."""

    url: str
    kubeconfig: str | None = None  # whose credentials; None: anonymous
    ca_file: str = ""
    insecure_skip_tls_verify: bool = False

    async def access(self) -> ClusterAccess:
        """KubeConfigError, OSError or ssl.SSLError when the kubeconfig or the CA file is unusable."""
        cluster = await load_access(self.kubeconfig) if self.kubeconfig else ClusterAccess(self.url)
        return direct_access(self.url, self.ca_file, self.insecure_skip_tls_verify, cluster)


async def latest_record(daemon: Daemon, target: tuple[str, str]) -> Record:
    """The newest decision record of `target` from the daemon."""
    namespace, name = target
    path = f"/debug/decisions/{quote(namespace, safe='')}/{quote(name, safe='')}"
    url = f"{daemon.url.rstrip('/')}{path}"
    try:
        access = await daemon.access()
    except (KubeConfigError, OSError, ssl.SSLError) as err:
        raise ExplainError(str(err)) from None
    client = KubeClient(access, user_agent="surge-explain")
    try:
        body = await client.get(path, request_timeout=TIMEOUT_SECONDS)
    except ApiError as err:
        raise ExplainError(
            err.message if err.code == 404 else f"{url} answered {err.code}: {err.message}"
        ) from None
    except (aiohttp.ClientError, OSError, TimeoutError) as err:
        raise ExplainError(
            f"cannot reach the autoscaler at {daemon.url}: {err or type(err).__name__}"
        ) from None
    except ValueError:
        raise ExplainError(f"{url} did not answer with JSON: is it an autoscaler's metrics port?") from None
    finally:
        await client.close()
    decisions = body.get("decisions") if isinstance(body, dict) else None
    if not decisions:
        raise ExplainError(f"{url} answered without a decision record")
    record: Record = decisions[0]
    owner = body.get("owner")
    if isinstance(owner, dict):
        record = {**record, "owner": owner}  # the replica (and bucket) that decided
    return record


# --- text ------------------------------------------------------------------------------------------


def _unknown(value: Any) -> str:
    return "<unknown>" if value is None else str(value)


def _metric_label(metric: Record) -> str:
    """The metric as `kubectl describe hpa` names it."""
    kind, name, target = metric["type"], metric["name"], metric["target"]
    utilization = target.get("type") == "Utilization"
    if kind in ("Resource", "ContainerResource"):
        where = "of a container on pods" if kind == "ContainerResource" else "on pods"
        return f"resource {name} {where}" + ("  (as a percentage of request)" if utilization else "")
    if kind == "Pods":
        return f'"{name}" on pods'
    which = "(target average value)" if target.get("type") == "AverageValue" else "(target value)"
    return f'"{name}" on an object {which}' if kind == "Object" else f'"{name}" {which}'


def _current_and_target(metric: Record) -> str:
    target, current = metric["target"], metric["value"] or {}
    if target.get("type") == "Utilization":
        shown = current.get("averageUtilization")
        value = "<unknown>" if shown is None else f"{shown}% ({_unknown(current.get('averageValue'))})"
        return f"{value} / {target.get('averageUtilization')}%"
    field = "averageValue" if target.get("type") == "AverageValue" else "value"
    return f"{_unknown(current.get(field))} / {target.get(field)}"


def _counts(counts: list[int]) -> str:
    return "[" + ", ".join(str(c) for c in counts) + "]"


def _seconds(value: float) -> str:
    return f"{value:g} s"


def _policy(policy: Record) -> str:
    unit = "%" if policy["type"] == "Percent" else ""
    return f"{policy['type']} {policy['value']}{unit}/{policy['periodSeconds']}s"


def _stabilization_line(stabilization: Record) -> str:
    windows = []
    up, down = stabilization["scaleUp"], stabilization["scaleDown"]
    if up is not None:
        windows.append(
            f"scale-up window {_seconds(up['windowSeconds'])}: min of {_counts(up['recommendations'])}"
            f" = {up['min']}"
        )
    windows.append(
        f"scale-down window {_seconds(down['windowSeconds'])}: max of {_counts(down['recommendations'])}"
        f" = {down['max']}"
    )
    held = {"scaleUp": ", held by the scale-up window", "scaleDown": ", held by the scale-down window"}
    return f"{stabilization['selected']} ({'; '.join(windows)}){held.get(stabilization['heldBy'] or '', '')}"


def _limits_line(limits: Record) -> str:
    parts = [f"min {limits['minReplicas']}, max {limits['maxReplicas']}"]
    if limits["rateLimit"] is not None:
        by = f"policy {_policy(limits['limitingPolicy'])}" if limits["limitingPolicy"] else None
        if by is None:
            disabled = limits["selectPolicy"] == "Disabled"
            by = "selectPolicy Disabled" if disabled else "the rate limit without a behavior"
        parts.append(f"rate limit {limits['rateLimit']} by {by}")
    if limits["policies"]:
        policies = ", ".join(_policy(p) for p in limits["policies"])
        parts.append(f"selectPolicy {limits['selectPolicy']} of {policies}")
    return f"{limits['selected']} ({'; '.join(parts)}) -> ScalingLimited {limits['reason']}"


def _forecast_line(forecast: Record) -> str:
    """spec.predictive's forecast of a metric: its value (in the history's unit), error, and whether the
    algorithm read it (and so took the pods it needs as a floor, core/predictive.py)."""
    if forecast["value"] is None:
        return f"none ({forecast['reason']})"
    error = "unknown" if forecast["error"] is None else f"{forecast['error']:.1%}"
    said = f"{forecast['value']:g} (recent error {error})"
    if forecast["used"]:
        return (
            f"{said}, used: the metric read the higher of the forecast and the current value, "
            "and the pods it needs are a floor"
        )
    return f"{said}, not used: {forecast['reason']}"


def _burst_line(seen: Record) -> str:
    """A burst check (spec.burst): the short window's reading, the count it set, the burst's peak."""
    ratio = "no value" if seen["ratio"] is None else f"ratio {seen['ratio']:.2f}"
    head = f'"{seen["metric"]}" over the short window {seen["windowSeconds"]} s: {ratio}'
    if seen["left"]:
        return f"{head}; the burst ended, its peak {seen['peak']} held by the scale-down window"
    step = f"threshold {seen['threshold']:g} -> proposal {seen['proposal']} -> {seen['replicas']}"
    return f"{head}, {step} (peak {seen['peak']}{', entered burst' if seen['entered'] else ''})"


def _readiness_step(readiness: Record) -> str:
    """The HPA's readiness correction: who counted with what, and the ratio over all of them."""
    counted = [f"{readiness['ready']} ready"]
    if readiness["unready"]:
        counted.append(f"{readiness['unready']} unready as idle")
    if readiness["missing"]:
        counted.append(f"{readiness['missing']} without a sample as assumed")
    ratio = "<unknown>" if readiness["ratio"] is None else f"{readiness['ratio']:.2f}"
    return f"with {', '.join(counted)}: ratio {ratio}"


def _formula_line(formula: Record) -> str:
    """spec.formula (autoscaler/core/composite.py): its inputs as read, its value and the target of the
    composite-metric it is read as; or why it has no value (its read failed: spec.fallback's count)."""
    inputs = ", ".join(
        f"{i['name']} {'failed' if i['value'] == 'failed' else format(i['value'], 'g')}"
        for i in formula["inputs"]
    )
    target = formula["target"]
    wanted = target.get("value") if target.get("type") == "Value" else target.get("averageValue")
    head = f"{formula['expression']} with {inputs or 'no inputs'}"
    if formula["value"] is None:
        return f"{head}: no value ({formula['error']})"
    return f"{head} = {formula['value']:g} -> composite-metric, target {target.get('type')} {wanted}"


def _derivation(record: Record) -> list[str]:
    lines = []
    if record.get("formula") is not None:
        lines.append(f"formula        {_formula_line(record['formula'])}")
    if record.get("burst") is not None:
        # A burst check computes no count of its own from the normal window: its line is the derivation.
        return [
            f"burst          {_burst_line(record['burst'])}",
            f"result         {record['desiredReplicas']} desired, {record['currentReplicas']} current",
        ]
    for metric in record["metrics"]:
        if metric["proposal"] is None:
            step = "no value (the metric failed)"
        else:
            ratio = "<unknown>" if metric["ratio"] is None else f"{metric['ratio']:.2f}"
            readiness = metric.get("readiness")
            ratio += "" if readiness is None else f" -> {_readiness_step(readiness)}"
            step = f"{_current_and_target(metric)} -> ratio {ratio} -> proposal {metric['proposal']}"
        lines.append(f"metric         {_metric_label(metric)}: {step}")
        if metric.get("forecast") is not None:
            lines.append(f"forecast       {_metric_label(metric)}: {_forecast_line(metric['forecast'])}")
    stabilization, limits = record["stabilization"], record["limits"]
    if stabilization is not None:
        schedule = record.get("schedule")
        proposals = [m["proposal"] for m in record["metrics"] if m["proposal"] is not None]
        if schedule is not None and stabilization["proposal"] > max(proposals, default=0):
            source = f"the minReplicas of schedule {schedule['cron']} {schedule['timeZone'] or 'UTC'}"
        else:
            source = "the highest of the metrics' proposals"
        lines.append(f"proposal       {stabilization['proposal']} ({source})")
        lines.append(f"stabilization  {_stabilization_line(stabilization)}")
    if limits is not None:
        lines.append(f"limits         {_limits_line(limits)}")
    if record.get("cooldown"):
        # The step to zero under spec.cooldownPeriodSeconds (autoscaler/core/cooldown.py): held, or taken.
        lines.append(f"cooldown       {record['cooldown']}")
    lines.append(f"result         {record['desiredReplicas']} desired, {record['currentReplicas']} current")
    return lines


def describe(record: Record) -> str:
    """The record as `kubectl describe hpa` shows an autoscaler, then the reason and the derivation."""
    namespace, _, name = record["target"].partition("/")
    metrics = [(f"  {_metric_label(m)}:", _current_and_target(m)) for m in record["metrics"]]
    fields = [
        ("Name:", name),
        ("Namespace:", namespace),
        ("Decided at:", record["time"]),
        *_owner_field(record.get("owner")),
        ("Metrics:", "( current / target )"),
        *metrics,
    ]
    if record["limits"] is not None:
        fields += [("Min replicas:", str(record["limits"]["minReplicas"]))]
        fields += [("Max replicas:", str(record["limits"]["maxReplicas"]))]
    fields += [
        ("Replicas:", f"{record['currentReplicas']} current / {record['desiredReplicas']} desired"),
        *_shadow_fields(record),
        ("Reason:", record["reason"]),
    ]
    width = max(len(key) for key, _ in fields) + 2
    lines = [f"{key:<{width}}{value}" for key, value in fields]
    lines += ["Conditions:", *_conditions_table(record["conditions"])]
    lines += ["Derivation:", *(f"  {line}" for line in _derivation(record))]
    return "\n".join(lines)


def _shadow_fields(record: Record) -> list[tuple[str, str]]:
    """A shadow decision (autoscaler/shadow.py): that it wrote nothing, and what the incumbent's status said
    (`<unknown>` where not known, as for the CRD, whose status is Surge's own)."""
    if not record.get("shadow"):
        return []
    incumbent = record.get("incumbent") or {}
    current, desired = (_unknown(incumbent.get(k)) for k in ("currentReplicas", "desiredReplicas"))
    return [
        ("Mode:", "shadow (decided, not acted on: the incumbent autoscaler scales the target)"),
        ("Incumbent:", f"{current} current / {desired} desired"),
    ]


def _owner_field(owner: Record | None) -> list[tuple[str, str]]:
    if not owner:
        return []
    bucket = f", bucket {owner['bucket']} (Lease {owner['lease']})" if "bucket" in owner else ""
    return [("Decided by:", f"replica {owner['replica']}{bucket}")]


def _conditions_table(conditions: list[Record]) -> list[str]:
    if not conditions:
        return ["  <none>"]
    rows = [("Type", "Status", "Reason", "Message"), ("----", "------", "------", "-------")]
    rows += [(c["type"], c["status"], c["reason"], c["message"]) for c in conditions]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    return [
        "  " + "  ".join(f"{cell:<{w}}" for cell, w in zip(row[:3], widths, strict=True)) + "  " + row[3]
        for row in rows
    ]
