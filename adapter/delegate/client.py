"""HTTP to one delegate over the shared keep-alive client (shared/kube/http11.py), with Surge's own
credentials: a client certificate and/or a bearer token file, never the caller's."""

from __future__ import annotations

import asyncio
import ssl

import aiohttp
from yarl import URL

from adapter.delegate.options import DelegateOptions
from shared.kube.http11 import Answer, Http11Client
from shared.tls import client_context
from shared.tokenfile import TokenFile

# Connections opened to one delegate at most (the lean client opens one per concurrent request).
_MAX_CONNECTIONS = 64


class DelegateUnreachable(Exception):
    """No answer: refused, reset, timed out, or our token file unreadable."""


def delegate_tls(options: DelegateOptions) -> ssl.SSLContext:
    """One context for every https delegate; raises OSError/ssl.SSLError on bad files (a start-up error)."""
    return client_context(
        options.ca_file or None, cert_file=options.client_cert or None, key_file=options.client_key or None
    )


class DelegateClient:
    def __init__(
        self, url: str, options: DelegateOptions, tls: ssl.SSLContext | None, user_agent: str
    ) -> None:
        base = URL(url)
        self.url = url
        self._prefix = base.raw_path.rstrip("/")
        self._timeout = options.timeout
        self._token = TokenFile(options.token_file) if options.token_file else None
        headers = {"Accept": "application/json", "User-Agent": user_agent}
        self._http = Http11Client(str(base.origin()), tls, headers)
        self._slots = asyncio.Semaphore(_MAX_CONNECTIONS)

    async def get(self, target: str) -> Answer:
        """GET `target` (escaped path and query, as received) below the delegate's URL."""
        headers = {}
        if self._token is not None:
            try:
                headers["Authorization"] = self._token.bearer_header()
            except (OSError, ValueError) as err:
                raise DelegateUnreachable(f"cannot read token file {self._token.path}: {err}") from err
        try:
            async with asyncio.timeout(self._timeout), self._slots:
                return await self._http.exchange("GET", self._prefix + target, None, headers)
        except TimeoutError as err:
            raise DelegateUnreachable(f"no answer within {self._timeout}s") from err
        except aiohttp.ClientError as err:
            raise DelegateUnreachable(str(err) or type(err).__name__) from err

    async def close(self) -> None:
        await self._http.close()
