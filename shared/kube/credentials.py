"""What a client sends as its `Authorization` header, kept current as credentials rotate.

kubernetes-asyncio resolves a kubeconfig user once, into a fixed header; that is right only for users
whose credentials never change. Bound service-account tokens (in-cluster, or a kubeconfig `tokenFile`)
are rotated in place by the kubelet and expire, and `exec` credential plugins hand out short-lived
tokens. So the client asks its `Credentials` for the header on every request:

* `FixedCredentials`: a kubeconfig `token`, basic auth, or nothing (client certificates, anonymous).
* `TokenFileCredentials`: the file's token, re-read whenever the file changes.
* `ExecCredentials`: the plugin's token, until its `expirationTimestamp` passes or the API server
  rejects it (client-go's rules), then the plugin runs again.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import aiohttp
from kubernetes_asyncio.config import ConfigException
from kubernetes_asyncio.config.exec_provider import ExecProvider

from shared.tokenfile import TokenFile

# Run the plugin again a little before its token expires, so no request is sent with a dead one.
_EXPIRY_MARGIN = timedelta(seconds=10)


class CredentialsError(aiohttp.ClientError):
    """No credentials could be produced for a request (unreadable token file, failing exec plugin).

    A ClientError, so every caller already handles it like the other ways a request can fail to be made.
    """


class Credentials(Protocol):
    async def authorization(self) -> str | None:
        """The `Authorization` header value for the next request (None: send none)."""
        ...

    def rejected(self) -> None:
        """The API server answered 401 Unauthorized to the last header handed out."""
        ...


class FixedCredentials:
    """A header that never changes (or none)."""

    def __init__(self, header: str | None) -> None:
        self._header = header

    async def authorization(self) -> str | None:
        return self._header

    def rejected(self) -> None:
        """Nothing to refresh."""


class TokenFileCredentials:
    """`Bearer <the file's token>`, the file re-read whenever it changes."""

    def __init__(self, path: str) -> None:
        self._file = TokenFile(path)

    async def authorization(self) -> str:
        try:
            return f"Bearer {self._file.current()}"
        except OSError as err:
            raise CredentialsError(f"cannot read token file {self._file.path}: {err}") from err

    def rejected(self) -> None:
        """A rotated token shows up as a changed file: nothing else to do."""


class ExecCredentials:
    """A kubeconfig `exec` user (client-go credential plugin) that answers with a token.

    The token is used until the plugin's `expirationTimestamp` (when it gives one) or until the API
    server rejects it; then the next request runs the plugin again (once, however many are waiting).
    A plugin that answers with a client certificate instead is read once, into the TLS context.
    """

    def __init__(self, exec_config: Any, header: str, expiry: datetime | None) -> None:
        """`exec_config` is the kubeconfig user's `exec` node as kubernetes-asyncio parsed it; `header`
        and `expiry` are what the plugin answered when the kubeconfig was loaded."""
        self._provider = ExecProvider(exec_config)
        self._header: str | None = header
        self._expiry = expiry
        self._lock = asyncio.Lock()

    def _stale(self) -> bool:
        return self._header is None or (
            self._expiry is not None and datetime.now(UTC) >= self._expiry - _EXPIRY_MARGIN
        )

    async def authorization(self) -> str:
        if self._stale():
            async with self._lock:
                if self._stale():
                    await self._run_plugin()
        assert self._header is not None
        return self._header

    def rejected(self) -> None:
        self._header = None

    async def _run_plugin(self) -> None:
        try:
            status = await self._provider.run()
        except (ConfigException, OSError, RuntimeError) as err:
            raise CredentialsError(f"exec credential plugin failed: {err}") from err
        token = status.get("token") if isinstance(status, dict) else None
        if not isinstance(token, str) or not token:
            raise CredentialsError("exec credential plugin answered without a token")
        self._header = f"Bearer {token}"
        self._expiry = parse_expiry(status.get("expirationTimestamp"))


def parse_expiry(text: object) -> datetime | None:
    """An ExecCredential's `expirationTimestamp` (RFC 3339), None when absent or unreadable."""
    if not isinstance(text, str):
        return None
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)
