"""Prometheus file_sd target groups for the simulated pods, written atomically."""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True, order=True)
class PodTarget:
    namespace: str
    pod: str


def metrics_path(namespace: str, pod: str) -> str:
    return f"/pods/{namespace}/{pod}/metrics"


def target_groups(address: str, pods: Iterable[PodTarget]) -> list[dict[str, Any]]:
    """One group per pod: they share one address and differ by `__metrics_path__`."""
    return [
        {
            "targets": [address],
            "labels": {
                "__metrics_path__": metrics_path(p.namespace, p.pod),
                "namespace": p.namespace,
                "pod": p.pod,
            },
        }
        for p in sorted(pods)
    ]


def write_atomically(path: Path, groups: list[dict[str, Any]]) -> None:
    """Prometheus may read at any moment: write a sibling file, then rename it over the target."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(groups, f, indent=1)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class FileSdWriter:
    """Keeps `path` listing the current targets; `changed()` coalesces bursts into one write per loop turn."""

    def __init__(
        self, path: Path, address: Callable[[], str], targets: Callable[[], Iterable[PodTarget]]
    ) -> None:
        self.path = Path(path)
        self._address = address
        self._targets = targets
        self._pending: asyncio.Handle | None = None

    def write_now(self) -> None:
        self._pending = None
        write_atomically(self.path, target_groups(self._address(), self._targets()))

    def changed(self) -> None:
        if self._pending is None:
            self._pending = asyncio.get_running_loop().call_soon(self.write_now)

    def close(self) -> None:
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None
