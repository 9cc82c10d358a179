"""A bearer token kept in a file that may be replaced at any time (projected service-account tokens,
`tokenFile` kubeconfig users, Prometheus `--prometheus-token-file`).

Bound service-account tokens expire and the kubelet rotates the file in place, so a token read once at
start-up stops working after about an hour. The file is stat()ed on every use and read again only when
it changed: a stat costs microseconds, and there is no refresh period during which a rotated token goes
unseen.
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
