"""shared.kube.exec_plugin: running a client-go credential plugin and reading its ExecCredential."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from shared.kube.exec_plugin import ExecAnswer, ExecPlugin, ExecPluginError, parse_answer

V1 = "client.authentication.k8s.io/v1"
V1BETA1 = "client.authentication.k8s.io/v1beta1"


def _credential(status: Any, api_version: str = V1) -> bytes:
    return json.dumps({"apiVersion": api_version, "kind": "ExecCredential", "status": status}).encode()


def test_token_answer_with_expiry() -> None:
    answer = parse_answer(_credential({"token": "t", "expirationTimestamp": "2030-01-02T03:04:05Z"}), V1)
    assert answer == ExecAnswer(token="t", expiry=datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC))


def test_client_certificate_answer() -> None:
    output = _credential({"clientCertificateData": "CERT", "clientKeyData": "KEY"}, V1BETA1)
    answer = parse_answer(output, V1BETA1)
    assert answer == ExecAnswer(client_certificate=(b"CERT", b"KEY"))


@pytest.mark.parametrize(
    ("output", "message"),
    [
        (b"token: t", "not JSON"),
        (json.dumps({"apiVersion": V1, "kind": "Status"}).encode(), "not an ExecCredential"),
        (_credential({"token": "t"}, V1BETA1), f"use API version {V1}, plugin returned version {V1BETA1}"),
        (_credential(None), "didn't return a status"),
        (_credential({}), "didn't return a token or cert/key pair"),
        (_credential({"clientCertificateData": "CERT"}), "only certificate or key"),
        (_credential({"token": 12}), "non-string status.token"),
        (_credential({"token": "t", "expirationTimestamp": "tomorrow"}), "unreadable expirationTimestamp"),
    ],
)
def test_bad_answers(output: bytes, message: str) -> None:
    with pytest.raises(ExecPluginError, match=message):
        parse_answer(output, V1)


def _shell(script: str, tmp_path: Path, **fields: Any) -> ExecPlugin:
    path = tmp_path / "plugin.sh"
    path.write_text(script)
    return ExecPlugin("/bin/sh", V1, (str(path), "arg-1"), **fields)


async def test_the_plugin_gets_exec_info_env_and_args(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("INHERITED", "from-daemon")
    # Answers with its first argument, an env variable from the kubeconfig, one inherited, and its stdin.
    script = (
        'printf %s "$KUBERNETES_EXEC_INFO" > "$(dirname "$0")/exec-info"\n'
        f'printf \'{{"apiVersion":"{V1}","kind":"ExecCredential","status":{{"token":"%s"}}}}\' '
        '"$1 $PROFILE $INHERITED $(readlink /proc/$$/fd/0)"\n'
    )
    plugin = _shell(script, tmp_path, env={"PROFILE": "ops"}, cluster={"server": "https://k8s"})
    answer = await plugin.run()
    assert answer.token == "arg-1 ops from-daemon /dev/null"
    assert json.loads((tmp_path / "exec-info").read_text()) == {
        "apiVersion": V1,
        "kind": "ExecCredential",
        "spec": {"interactive": False, "cluster": {"server": "https://k8s"}},
    }


async def test_a_failing_plugin_reports_its_stderr(tmp_path: Path) -> None:
    plugin = _shell("echo 'token expired, run: login' >&2; exit 3\n", tmp_path)
    with pytest.raises(ExecPluginError, match="exited with code 3: token expired, run: login"):
        await plugin.run()


async def test_a_missing_plugin_shows_the_install_hint(tmp_path: Path) -> None:
    plugin = ExecPlugin(str(tmp_path / "absent"), V1, install_hint="brew install get-token")
    with pytest.raises(ExecPluginError, match="not found\n\nbrew install get-token"):
        await plugin.run()
