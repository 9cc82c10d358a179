"""Watch streams: newline-delimited JSON events (`{"type": ..., "object": ...}`), read chunk by chunk.

Hand-written instead of aiohttp's `readline()`/line iteration because those cap a line at the reader's
buffer limit (64 KiB by default; `LineTooLong` beyond it): one large object (a pod with big annotations, a
CRD object) would end the watch with an error that is not a connection failure. Here the bytes of a line
are gathered until its newline, with no cap of our own: an event is as large as an object the API
server accepted.

Anything that is not a watch event (a garbled line, a line that is not JSON, JSON that is not an event)
raises `WatchDecodeError`; the informer then re-lists, since it cannot know what the lost event said.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

import aiohttp

from shared.kube.json_decode import decode_json

Event = dict[str, Any]


class WatchDecodeError(ValueError):
    """A line of the watch stream is not a watch event."""


async def lines(content: aiohttp.StreamReader) -> AsyncGenerator[bytes]:
    """The newline-terminated lines of a stream, without their newline; blank lines are skipped.

    Raises aiohttp.ClientPayloadError when the stream ends inside a line (the connection broke mid-event).
    """
    pending = bytearray()
    async for chunk in content.iter_any():
        start = 0
        end = chunk.find(b"\n")
        while end >= 0:
            if pending:
                pending += chunk[start:end]
                line = bytes(pending)
                pending.clear()
            else:
                line = chunk[start:end]
            if line.strip():
                yield line
            start = end + 1
            end = chunk.find(b"\n", start)
        pending += chunk[start:]
    if pending.strip():
        raise aiohttp.ClientPayloadError(f"watch stream ended inside an event ({len(pending)} bytes)")


def decode(line: bytes) -> Event:
    """One watch event; raises WatchDecodeError when the line is not one."""
    try:
        event = decode_json(line)
    except ValueError as err:  # also UnicodeDecodeError
        raise WatchDecodeError(f"undecodable watch line ({len(line)} bytes): {err}") from err
    if not isinstance(event, dict) or not isinstance(event.get("type"), str):
        raise WatchDecodeError(f"not a watch event: {line[:200]!r}")
    if not isinstance(event.get("object"), dict):
        raise WatchDecodeError(f"watch event without an object: {line[:200]!r}")
    return event


async def events(content: aiohttp.StreamReader) -> AsyncGenerator[Event]:
    """The events of a watch response body, until the server ends the stream."""
    async for line in lines(content):
        yield decode(line)
