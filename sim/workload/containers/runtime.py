"""Podman's command line, driven through asyncio subprocesses: what the simulated kubelet asks of a
container runtime (look up an image, run, wait, exec, logs, stop, remove).

Every call passes `--runtime runc --cgroup-manager cgroupfs`: this machine's sandbox refuses crun and the
systemd cgroup manager; `podman run` also needs the explicit ulimits (`RUN_LIMITS`), as the defaults are
refused too.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass

PODMAN = "podman"
GLOBAL_OPTIONS = ("--runtime", "runc", "--cgroup-manager", "cgroupfs")
RUN_LIMITS = ("--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024")


class PodmanError(Exception):
    """A podman command failed: its exit code and what it wrote to stderr."""

    def __init__(self, args: tuple[str, ...], code: int, stderr: str) -> None:
        super().__init__(f"podman {' '.join(args[:2])} exited {code}: {stderr.strip()}")
        self.code = code
        self.stderr = stderr


@dataclass(frozen=True)
class Image:
    """A locally stored image: the reference it was found by, its ID and its configured user."""

    reference: str
    id: str
    user: str


@dataclass(frozen=True)
class Completed:
    code: int
    stdout: str
    stderr: str


class Podman:
    """One podman CLI call per method; output decoded as UTF-8 (replacing what is not)."""

    async def call(self, *args: str, merged: bool = False) -> Completed:
        """Run `podman <args>` (cancelling the call kills it). `merged`: stderr into stdout, in the order
        written."""
        process = await asyncio.create_subprocess_exec(
            PODMAN,
            *GLOBAL_OPTIONS,
            *args,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT if merged else asyncio.subprocess.PIPE,
        )
        try:
            stdout, stderr = await process.communicate()
        except BaseException:  # cancelled (e.g. by a caller's timeout): leave no podman process behind
            if process.returncode is None:
                process.kill()
                await process.wait()
            raise
        assert process.returncode is not None
        return Completed(
            process.returncode, stdout.decode(errors="replace"), (stderr or b"").decode(errors="replace")
        )

    async def checked(self, *args: str) -> str:
        """stdout of a podman command that must succeed."""
        done = await self.call(*args)
        if done.code != 0:
            raise PodmanError(args, done.code, done.stderr)
        return done.stdout

    async def find_image(self, references: list[str]) -> Image | None:
        """The first of `references` in local storage, or None when none is (nothing is pulled)."""
        for reference in references:
            done = await self.call("image", "inspect", reference)
            if done.code != 0:
                continue
            found = json.loads(done.stdout)[0]
            return Image(reference, str(found["Id"]), str((found.get("Config") or {}).get("User") or ""))
        return None

    async def run(self, run_args: list[str]) -> str:
        """`podman run -d <run_args>`: the new container's ID."""
        return (await self.checked("run", "-d", *RUN_LIMITS, *run_args)).strip()

    async def published_ports(self, container_id: str) -> dict[int, int]:
        """Container port → host port of each TCP port the container publishes."""
        out = await self.checked("inspect", "--format", "{{json .NetworkSettings.Ports}}", container_id)
        ports: dict[int, int] = {}
        for spec, bindings in (json.loads(out) or {}).items():
            number, _, protocol = spec.partition("/")
            if protocol == "tcp" and bindings:
                ports[int(number)] = int(bindings[0]["HostPort"])
        return ports

    async def wait(self, container_id: str) -> int:
        """Block until the container exits: its exit code."""
        return int((await self.checked("wait", container_id)).strip().splitlines()[-1])

    async def exec(self, container_id: str, command: list[str]) -> int:
        """Run `command` inside the container: its exit code."""
        return (await self.call("exec", container_id, *command)).code

    async def logs(self, container_id: str, tail: int | None) -> str:
        args = ["logs", *(["--tail", str(tail)] if tail is not None else []), container_id]
        # podman replays the container's stdout and stderr on its own two: a pod's log is both, in order.
        done = await self.call(*args, merged=True)
        if done.code != 0:
            raise PodmanError(tuple(args), done.code, done.stdout)
        return done.stdout

    async def stop(self, container_id: str, grace_seconds: int) -> None:
        """SIGTERM, then SIGKILL after `grace_seconds` (a container already gone is not an error)."""
        await self.call("stop", "--ignore", "-t", str(grace_seconds), container_id)

    async def remove(self, *container_ids: str) -> None:
        if container_ids:
            await self.call("rm", "-f", "-t", "0", "--ignore", *container_ids)

    async def remove_labelled(self, *labels: str) -> None:
        """Remove every container carrying all of `labels` (each `key=value`), running or not."""
        await self.call("rm", "-f", "-t", "0", *(f"--filter=label={label}" for label in labels))
