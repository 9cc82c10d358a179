"""What a client sends as its `Authorization` header, kept current as credentials rotate.

Bound service-account tokens (in-cluster, or a kubeconfig `tokenFile`) are rotated in place by the
kubelet and expire, and `exec` credential plugins hand out short-lived tokens, so a header fixed at
load time stops working. The client asks its `Credentials` for the header on every request:

* `FixedCredentials`: a kubeconfig `token`, basic auth, or nothing (client certificates, anonymous).
* `TokenFileCredentials`: the file's token, re-read whenever the file changes.
* `ExecCredentials`: the plugin's token, until its `expirationTimestamp` passes or the API server
  rejects it (client-go's rules), then the plugin runs again.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Protocol

import aiohttp

from shared.kube.exec_plugin import ExecAnswer, ExecPlugin, ExecPluginError
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
            return self._file.bearer_header()
        except (OSError, ValueError) as err:
            raise CredentialsError(f"cannot use token file {self._file.path}: {err}") from err

    def rejected(self) -> None:
        """A rotated token shows up as a changed file: nothing else to do."""


class ExecCredentials:
    """A kubeconfig `exec` user (client-go credential plugin) that answers with a token.

    The token is used until the plugin's `expirationTimestamp` (when it gives one) or until the API
    server rejects it; then the next request runs the plugin again (once, however many are waiting).
    A client certificate in the plugin's first answer is read once, into the TLS context.
    """

    def __init__(self, plugin: ExecPlugin, answer: ExecAnswer) -> None:
        """`answer` is what the plugin answered when the kubeconfig was loaded (it has a token)."""
        self._plugin = plugin
        self._header: str | None = f"Bearer {answer.token}"
        self._expiry = answer.expiry
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
            answer = await self._plugin.run()
        except ExecPluginError as err:
            raise CredentialsError(str(err)) from err
        if not answer.token:
            raise CredentialsError("exec credential plugin answered without a token")
        self._header = f"Bearer {answer.token}"
        self._expiry = answer.expiry
