"""A bearer token kept in a file that may be replaced at any time (projected service-account tokens,
`tokenFile` kubeconfig users, Prometheus `--prometheus-token-file`).

Bound service-account tokens expire and the kubelet rotates the file in place, so a token read once at
start-up stops working after about an hour. The file is stat()ed on every use and read again only when
it changed: a stat costs microseconds, and there is no refresh period during which a rotated token goes
unseen.

`bearer_header()` is the `Authorization` value every client of such a file sends.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass
class TokenFile:
    """A bearer token file re-read whenever it changes (a new inode, mtime or size)."""

    path: str
    _stamp: tuple[int, int, int] = (-1, -1, -1)
    _token: str = ""

    def current(self) -> str:
        """The token; raises OSError when the file cannot be read."""
        stat = os.stat(self.path)
        stamp = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
        if stamp != self._stamp:
            with open(self.path, encoding="utf-8") as handle:
                self._token = handle.read().strip()
            self._stamp = stamp
        return self._token

    def bearer_header(self) -> str:
        """`Bearer <token>`; raises OSError when the file cannot be read, ValueError for a token that
        would not fit in one header line."""
        return bearer(self.current())


def bearer(token: str) -> str:
    """The Authorization value for a bearer token; raises ValueError when the token holds a line break or
    NUL (headers are written raw, so it would split the request)."""
    if any(c in token for c in "\r\n\0"):
        raise ValueError("the token contains a line break or NUL")
    return f"Bearer {token}"
