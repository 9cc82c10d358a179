"""Write fencing: a write that is only valid while something holds (a leader's lease) asks its fence at
the last moment before its bytes go out, after every wait on the way (the client's rate limiter, the
credentials, a connection), and again before each re-send. A fence that does not admit the write drops
it: nothing is sent and the caller gets `WriteDropped`.

The fence is per write, not per client, so one client can serve writes fenced by different leases (one
lease per bucket of keys) and unfenced ones (the lease renewals themselves, reads).
"""

from __future__ import annotations

from typing import Protocol


class WriteFence(Protocol):
    def admit(self, method: str, path: str) -> bool:
        """Asked right before the write is sent; False drops it (the fence logs and counts why)."""
        ...


class WriteDropped(Exception):
    """A write its fence did not admit at the moment of sending: nothing reached the server."""

    def __init__(self, method: str, path: str) -> None:
        super().__init__(f"{method} {path} dropped: its fence no longer admits writes")
        self.method = method
        self.path = path
