"""client-go credential plugins (a kubeconfig user's `exec`): run the command, read its ExecCredential.

The protocol (client.authentication.k8s.io v1 and v1beta1, the same on the wire): the plugin gets an
ExecCredential in the KUBERNETES_EXEC_INFO environment variable (`spec.interactive`, and
`spec.cluster` when the user asks for `provideClusterInfo`) and prints one on stdout whose `status`
holds a bearer token or a PEM client certificate and key, and optionally an `expirationTimestamp`.
A daemon has no terminal, so the plugin always runs non-interactive, with stdin closed.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

# The versions client-go still speaks (v1alpha1 was removed in Kubernetes 1.24).
API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")


class ExecPluginError(RuntimeError):
    """The plugin could not be run, failed, or answered something that is not a usable credential."""


@dataclass(frozen=True)
class ExecAnswer:
    """What the plugin answered: a token, a client certificate (PEM certificate and key), or both."""

    token: str = ""
    client_certificate: tuple[bytes, bytes] | None = None
    expiry: datetime | None = None


@dataclass(frozen=True)
class ExecPlugin:
    """A kubeconfig user's `exec` node, its paths resolved, ready to run."""

    command: str
    api_version: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    install_hint: str = ""
    # `spec.cluster` of the ExecCredential handed to the plugin; None unless `provideClusterInfo`.
    cluster: Mapping[str, Any] | None = None

    def exec_info(self) -> str:
        """The KUBERNETES_EXEC_INFO value."""
        spec: dict[str, Any] = {"interactive": False}
        if self.cluster is not None:
            spec["cluster"] = dict(self.cluster)
        return json.dumps({"apiVersion": self.api_version, "kind": "ExecCredential", "spec": spec})

    async def run(self) -> ExecAnswer:
        """Run the plugin once. Raises ExecPluginError."""
        env = {**os.environ, **self.env, "KUBERNETES_EXEC_INFO": self.exec_info()}
        try:
            process = await asyncio.create_subprocess_exec(
                self.command,
                *self.args,
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
        except FileNotFoundError as err:
            hint = f"\n\n{self.install_hint}" if self.install_hint else ""
            raise ExecPluginError(f"exec plugin executable {self.command!r} not found{hint}") from err
        except OSError as err:
            raise ExecPluginError(f"cannot run exec plugin {self.command!r}: {err}") from err
        try:
            stdout, stderr = await process.communicate()
        except asyncio.CancelledError:
            process.kill()  # the daemon is stopping: leave no plugin behind
            raise
        if process.returncode != 0:
            detail = stderr.decode(errors="replace").strip()
            raise ExecPluginError(
                f"exec plugin {self.command!r} exited with code {process.returncode}"
                + (f": {detail}" if detail else "")
            )
        return parse_answer(stdout, self.api_version)


def parse_answer(output: bytes, api_version: str) -> ExecAnswer:
    """The credential in a plugin's stdout, checked as client-go checks it. Raises ExecPluginError."""
    try:
        credential = json.loads(output)
    except ValueError as err:
        raise ExecPluginError(f"exec plugin output is not JSON: {err}") from err
    if not isinstance(credential, dict) or credential.get("kind") != "ExecCredential":
        raise ExecPluginError("exec plugin output is not an ExecCredential")
    if credential.get("apiVersion") != api_version:
        raise ExecPluginError(
            f"exec plugin is configured to use API version {api_version}, "
            f"plugin returned version {credential.get('apiVersion')}"
        )
    status = credential.get("status")
    if not isinstance(status, dict):
        raise ExecPluginError("exec plugin didn't return a status field")
    token, cert, key = (_string(status, name) for name in ("token", "clientCertificateData", "clientKeyData"))
    if bool(cert) != bool(key):
        raise ExecPluginError("exec plugin returned only certificate or key, not both")
    if not token and not cert:
        raise ExecPluginError("exec plugin didn't return a token or cert/key pair")
    return ExecAnswer(
        token=token,
        client_certificate=(cert.encode(), key.encode()) if cert else None,
        expiry=_expiry(status.get("expirationTimestamp")),
    )


def _string(status: Mapping[str, Any], name: str) -> str:
    value = status.get(name) or ""
    if not isinstance(value, str):
        raise ExecPluginError(f"exec plugin answered a non-string status.{name}")
    return value


def _expiry(text: object) -> datetime | None:
    """`expirationTimestamp` (RFC 3339), None when absent."""
    if not text:
        return None
    try:
        parsed = datetime.fromisoformat(str(text))
    except ValueError as err:
        raise ExecPluginError(f"exec plugin answered an unreadable expirationTimestamp {text!r}") from err
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)
