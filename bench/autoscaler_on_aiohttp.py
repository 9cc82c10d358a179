"""The autoscaler daemon with its plain Kubernetes requests sent through an aiohttp session instead of
shared/kube/http11.py: the other side of bench_autoscaler_transport.py's A/B (not a benchmark itself).

    .venv/bin/python bench/autoscaler_on_aiohttp.py <the autoscaler's flags>
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Mapping

import aiohttp
import yarl

from autoscaler.__main__ import main
from shared.kube.client import KubeClient


class AiohttpTransport:
    """KubeClient's request transport on aiohttp, as the watches use it: one session, one TLS context."""

    def __init__(self, base_url: str, ssl_context: ssl.SSLContext | None, headers: Mapping[str, str]) -> None:
        self._base_url = base_url
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=ssl_context or True, limit=0),
            headers=dict(headers),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
        )

    async def request(
        self,
        method: str,
        target: str,
        body: bytes | None,
        headers: Mapping[str, str] | None,
        before_send: Callable[[], None] | None = None,
    ) -> tuple[int, bytes]:
        if before_send is not None:
            before_send()  # (aiohttp has no hook between its connection and the write)
        url = yarl.URL(self._base_url + target, encoded=True)
        async with self._session.request(method, url, data=body, headers=headers) as resp:
            return resp.status, await resp.read()

    async def close(self) -> None:
        await self._session.close()


if __name__ == "__main__":
    KubeClient.transport = AiohttpTransport
    main()
