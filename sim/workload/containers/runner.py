"""Running pods' containers for real: per container, find its image in local storage (never pulling:
ErrImagePull, then ImagePullBackOff), start it with podman, probe it (startup gating liveness and
readiness), and restart it when it exits or fails its liveness probe (CrashLoopBackOff); per pod, its
volumes on disk and, on deletion, SIGTERM with the grace period, then removal of all it left.

Every task runs on the API server's event loop, supervised (`spawn`: failures are logged, and all of
them are cancelled by `close`). Each change of a container's state calls the pod's `on_change`; the
kubelet writes the status from there.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import shutil
import tempfile
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import structlog

from sim.apiserver import errors
from sim.apiserver.resources import Obj
from sim.apiserver.server import CONTAINER_HOST_ADDRESS
from sim.workload.containers import probes, volumes
from sim.workload.containers.checks import make_check, ports_to_publish
from sim.workload.containers.env import ConfigError, Lookup, command_line, container_env
from sim.workload.containers.images import image_references, names_registry
from sim.workload.containers.podman_args import (
    INSTANCE_LABEL,
    RunSpec,
    check_non_root,
    container_name,
    run_arguments,
    security_context,
    supplemental_groups,
)
from sim.workload.containers.runtime import Image, Podman, PodmanError
from sim.workload.containers.state import ContainerState, Terminated

log = structlog.get_logger(__name__)

PROBE_HEADERS = {"User-Agent": "kube-probe/1.32", "Accept": "*/*"}
# Seconds between showing ErrImagePull and ImagePullBackOff, and the back-off between pull attempts.
PULL_ERROR_SECONDS = 1.0
PULL_BACKOFF_SECONDS = (10.0, 300.0)
# A container that cannot be created (config, runtime error) is tried again after this long.
RETRY_SECONDS = 10.0
DEFAULT_GRACE_SECONDS = 30
POD_UID_LABEL = "io.kubernetes.pod.uid"


@dataclass(frozen=True)
class ClusterAccess:
    """How containers reach the simulated API server; read when a container starts (server up)."""

    api_port: Callable[[], int]
    ca_pem: Callable[[], bytes]
    service_account_token: volumes.TokenSource


def grace_seconds(pod: Obj) -> int:
    """The pod's deletion grace period, or its spec's terminationGracePeriodSeconds (default 30)."""
    meta_grace = pod.get("metadata", {}).get("deletionGracePeriodSeconds")
    if meta_grace is not None:
        return int(meta_grace)
    return int(pod.get("spec", {}).get("terminationGracePeriodSeconds", DEFAULT_GRACE_SECONDS))


class PodRun:
    """One pod's containers: their states, and the podman containers created for them."""

    def __init__(self, pod: Obj, ip: str, on_change: Callable[[], None]) -> None:
        self.pod = pod
        self.ip = ip
        self.on_change = on_change
        self.namespace: str = pod["metadata"]["namespace"]
        self.name: str = pod["metadata"]["name"]
        self.uid: str = pod["metadata"].get("uid", "")
        specs = pod.get("spec", {}).get("containers") or []
        self.specs: dict[str, Obj] = {c["name"]: c for c in specs}
        self.containers = [ContainerState(c["name"], c.get("image", "")) for c in specs]
        self.created: list[str] = []  # every podman container made for the pod, oldest first
        self.directory: Path | None = None
        self.tasks: list[asyncio.Task[None]] = []

    def state(self, container: str) -> ContainerState | None:
        return next((c for c in self.containers if c.name == container), None)


class ContainerRuntime:
    """The kubelet's container runtime: runs, probes, restarts and removes pods' containers."""

    def __init__(
        self,
        access: ClusterAccess,
        lookup: Lookup,
        *,
        clock: Callable[[], float] = time.time,
        podman: Podman | None = None,
    ) -> None:
        self._access = access
        self._lookup = lookup
        self._clock = clock
        self._podman = podman or Podman()
        # Names and labels carry it, so that two simulated clusters on one machine never collide.
        self.instance = secrets.token_hex(3)
        self._pods: dict[tuple[str, str], PodRun] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._root: Path | None = None
        self._session: aiohttp.ClientSession | None = None

    # ---- supervision --------------------------------------------------------------------------

    def spawn(self, coroutine: Coroutine[Any, Any, None], what: str) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(coroutine, name=what)
        self._tasks.add(task)
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("container task failed", task=task.get_name(), exc_info=task.exception())

    # ---- pods ---------------------------------------------------------------------------------

    async def runs_for_real(self, pod: Obj) -> bool:
        """Whether the pod's containers run here: one of its images is in local storage, or names a
        registry (and so fails to pull when absent). A pod of bare names none of which is here (`web`) is
        the simulation's modelled workload (images.names_registry)."""
        images = [c.get("image", "") for c in pod["spec"].get("containers", [])]
        if any(names_registry(image) for image in images):
            return True
        for image in images:
            if await self._podman.find_image(image_references(image)) is not None:
                return True
        return False

    def start_pod(self, pod: Obj, ip: str, on_change: Callable[[], None]) -> PodRun:
        run = PodRun(pod, ip, on_change)
        self._pods[(run.namespace, run.name)] = run
        run.tasks.append(self.spawn(self._start(run), f"pod {run.namespace}/{run.name}"))
        return run

    def pod(self, namespace: str, name: str) -> PodRun | None:
        return self._pods.get((namespace, name))

    async def stop_pod(self, namespace: str, name: str, grace: int) -> None:
        """SIGTERM the pod's containers, SIGKILL after `grace` seconds, then remove all it left."""
        run = self._pods.pop((namespace, name), None)
        if run is None:
            return
        for task in run.tasks:
            task.cancel()
        await asyncio.gather(*run.tasks, return_exceptions=True)
        running = [c.container_id for c in run.containers if c.running_since is not None]
        await asyncio.gather(*(self._podman.stop(cid, grace) for cid in running))
        # By label, not by the IDs known: a start interrupted by the cancellation may have left one.
        await self._podman.remove_labelled(f"{INSTANCE_LABEL}={self.instance}", f"{POD_UID_LABEL}={run.uid}")
        if run.directory is not None:
            shutil.rmtree(run.directory, ignore_errors=True)

    def remove_pod(self, namespace: str, name: str) -> None:
        """The pod is gone from the API: kill and remove its containers (in the background)."""
        if (namespace, name) in self._pods:
            self.spawn(self.stop_pod(namespace, name, 0), f"remove pod {namespace}/{name}")

    async def close(self) -> None:
        """Stop every pod's containers at once, and everything this runtime created."""
        await asyncio.gather(*(self.stop_pod(ns, name, 0) for ns, name in list(self._pods)))
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        # Whatever an interrupted start left behind carries the instance label.
        await self._podman.remove_labelled(f"{INSTANCE_LABEL}={self.instance}")
        if self._session is not None:
            await self._session.close()
            self._session = None
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
            self._root = None

    # ---- reads --------------------------------------------------------------------------------

    def published_address(self, pod_ip: str, port: int) -> tuple[str, int] | None:
        """Where a running container's port of the pod with `pod_ip` is reachable from this machine."""
        for run in self._pods.values():
            if run.ip != pod_ip:
                continue
            for state in run.containers:
                if state.running_since is not None and port in state.host_ports:
                    return ("127.0.0.1", state.host_ports[port])
        return None

    async def logs(
        self, namespace: str, name: str, container: str | None, previous: bool, tail: int | None
    ) -> str:
        """What `kubectl logs` shows; errors worded as the kubelet's."""
        run = self._pods.get((namespace, name))
        if run is None:
            raise errors.bad_request(f'pod "{name}" is not running in a container runtime')
        if container is None:
            if len(run.containers) != 1:
                names = " ".join(c.name for c in run.containers)
                raise errors.bad_request(
                    f"a container name must be specified for pod {name}, choose one of: [{names}]"
                )
            container = run.containers[0].name
        state = run.state(container)
        if state is None:
            raise errors.bad_request(f"container {container} is not valid for pod {name}")
        if previous:
            if state.last_terminated is None:
                raise errors.bad_request(
                    f'previous terminated container "{container}" in pod "{name}" not found'
                )
            container_id = state.last_terminated.container_id
        else:
            if not state.container_id:
                raise errors.bad_request(
                    f'container "{container}" in pod "{name}" is waiting to start: {state.waiting_reason}'
                )
            container_id = state.container_id
        try:
            return await self._podman.logs(container_id, tail)
        except PodmanError as err:
            raise errors.bad_request(
                f'container "{container}" in pod "{name}": {err.stderr.strip()}'
            ) from err

    # ---- a pod's life -------------------------------------------------------------------------

    async def _start(self, run: PodRun) -> None:
        """Lay out the volumes (retrying while something they need is missing), then run each container."""
        service_account = self._lookup(
            "serviceaccounts", run.namespace, volumes.service_account_name(run.pod)
        )
        pod_volumes = volumes.pod_volumes(run.pod, volumes.automounts_token(run.pod, service_account))
        while True:
            run.directory = Path(tempfile.mkdtemp(prefix=f"{run.namespace}-{run.name}-", dir=self._workdir()))
            try:
                files = volumes.ClusterFiles(
                    self._lookup, self._access.service_account_token, self._access.ca_pem()
                )
                directories = volumes.lay_out(run.pod, pod_volumes, run.directory / "volumes", files)
                break
            except ConfigError as err:
                shutil.rmtree(run.directory, ignore_errors=True)
                for state in run.containers:
                    state.wait("ContainerCreating", f"MountVolume.SetUp failed: {err}")
                run.on_change()
                await asyncio.sleep(RETRY_SECONDS)
        for state in run.containers:
            run.tasks.append(
                self.spawn(
                    self._container_life(run, state, pod_volumes, directories),
                    f"container {run.namespace}/{run.name}/{state.name}",
                )
            )

    async def _container_life(
        self, run: PodRun, state: ContainerState, pod_volumes: list[Obj], directories: dict[str, Path]
    ) -> None:
        """Start, supervise and restart one container for as long as the pod lives."""
        spec = run.specs[state.name]
        pull_failures = 0
        while True:
            image = await self._podman.find_image(image_references(state.image))
            if image is None:
                pull_failures += 1
                state.wait("ErrImagePull", f'image "{state.image}" not found in local container storage')
                run.on_change()
                await asyncio.sleep(PULL_ERROR_SECONDS)
                state.wait("ImagePullBackOff", f'Back-off pulling image "{state.image}"')
                run.on_change()
                first, cap = PULL_BACKOFF_SECONDS
                await asyncio.sleep(min(first * 2 ** (pull_failures - 1), cap))
                continue
            state.image_id = f"sha256:{image.id}"
            try:
                container_id = await self._create(run, state, spec, image, pod_volumes, directories)
            except ConfigError as err:
                state.wait("CreateContainerConfigError", str(err))
                run.on_change()
                await asyncio.sleep(RETRY_SECONDS)
                continue
            except PodmanError as err:
                state.wait("RunContainerError", err.stderr.strip())
                run.on_change()
                await asyncio.sleep(RETRY_SECONDS)
                continue
            started_at = state.running_since or self._clock()
            try:
                exit_code = await self._supervise(run, state, spec, container_id)
            except PodmanError as err:  # the container went away behind the kubelet's back
                log.warning("container lost", container=state.name, pod=run.name, error=str(err))
                exit_code = 137
            finished_at = self._clock()
            state.last_terminated = Terminated(container_id, exit_code, started_at, finished_at)
            # Only the latest terminated run is kept (for `kubectl logs --previous`).
            older = [cid for cid in run.created if cid != container_id]
            await self._podman.remove(*older)
            run.created = [container_id]
            delay = probes.restart_delay(state.restart_count, finished_at - started_at)
            state.restart_count += 1
            if delay:
                state.wait(
                    "CrashLoopBackOff",
                    f"back-off {delay:g}s restarting failed container={state.name} "
                    f"pod={run.name}_{run.namespace}({run.pod['metadata'].get('uid', '')})",
                )
            else:
                state.wait("ContainerCreating")
            run.on_change()
            await asyncio.sleep(delay)

    async def _create(
        self,
        run: PodRun,
        state: ContainerState,
        spec: Obj,
        image: Image,
        pod_volumes: list[Obj],
        directories: dict[str, Path],
    ) -> str:
        """Start the container's next run: its ID, with `state` running."""
        port = self._access.api_port()
        cluster_env = {
            "KUBERNETES_SERVICE_HOST": CONTAINER_HOST_ADDRESS,
            "KUBERNETES_SERVICE_PORT": str(port),
            "KUBERNETES_SERVICE_PORT_HTTPS": str(port),
            "KUBERNETES_PORT": f"tcp://{CONTAINER_HOST_ADDRESS}:{port}",
        }
        status = {**(run.pod.get("status") or {}), "podIP": run.ip, "podIPs": [{"ip": run.ip}]}
        pod = {**run.pod, "status": status}
        env = container_env(pod, spec, self._lookup, cluster_env)
        entrypoint, arguments = command_line(spec, env)
        security = security_context(run.pod, spec)
        check_non_root(security, image.user)
        run_spec = RunSpec(
            name=container_name(self.instance, run.namespace, run.name, state.name, state.restart_count),
            image=image.reference,
            hostname=run.name,
            labels={
                INSTANCE_LABEL: self.instance,
                "io.kubernetes.pod.namespace": run.namespace,
                "io.kubernetes.pod.name": run.name,
                POD_UID_LABEL: run.uid,
                "io.kubernetes.container.name": state.name,
            },
            env=env,
            entrypoint=entrypoint,
            arguments=arguments,
            mounts=volumes.container_mounts(run.pod, spec, pod_volumes, directories),
            ports=ports_to_publish(spec),
            security=security,
            supplemental_groups=supplemental_groups(run.pod),
            working_dir=spec.get("workingDir"),
        )
        # A container of an earlier attempt with this name (restart count) is stale: replace it.
        await self._podman.remove(run_spec.name)
        container_id = await self._podman.run(run_arguments(run_spec, image.user))
        run.created.append(container_id)
        state.run(container_id, self._clock(), await self._podman.published_ports(container_id))
        state.started = "startupProbe" not in spec
        state.ready = state.started and "readinessProbe" not in spec
        run.on_change()
        return container_id

    async def _supervise(self, run: PodRun, state: ContainerState, spec: Obj, container_id: str) -> int:
        """Probe the running container until it exits or fails a probe (then it is stopped with the
        pod's grace period): its exit code."""
        exited = asyncio.ensure_future(self._podman.wait(container_id))
        probing = asyncio.ensure_future(self._probe(run, state, spec, container_id))
        try:
            await asyncio.wait({exited, probing}, return_when=asyncio.FIRST_COMPLETED)
            if probing.done() and probing.exception() is not None:
                log.error("probing failed; restarting the container", exc_info=probing.exception())
            if not exited.done():
                grace = int(
                    run.pod.get("spec", {}).get("terminationGracePeriodSeconds", DEFAULT_GRACE_SECONDS)
                )
                await self._podman.stop(container_id, grace)
            return await exited
        finally:
            for task in (exited, probing):
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await probing

    async def _probe(self, run: PodRun, state: ContainerState, spec: Obj, container_id: str) -> None:
        """Returns when the startup or the liveness probe fails; readiness only sets `state.ready`."""
        session = self._probe_session()

        def check(kind: str) -> probes.Check:
            return make_check(
                probes.ProbeSpec.of(spec[kind]),
                spec,
                state.host_ports,
                lambda command: self._podman.exec(container_id, command),
                session,
            )

        if "startupProbe" in spec:
            result = probes.startup(probes.ProbeSpec.of(spec["startupProbe"]))
            async with contextlib.aclosing(
                probes.changes(result, check("startupProbe"), asyncio.sleep)
            ) as changes:
                async for passing in changes:
                    if not passing:
                        return
                    break
            state.started = True
            state.ready = "readinessProbe" not in spec
            run.on_change()
        readiness_task = None
        if "readinessProbe" in spec:
            readiness_task = asyncio.ensure_future(self._readiness(run, state, check("readinessProbe")))
        try:
            if "livenessProbe" in spec:
                result = probes.liveness(probes.ProbeSpec.of(spec["livenessProbe"]))
                async for passing in probes.changes(result, check("livenessProbe"), asyncio.sleep):
                    if not passing:
                        return
            await asyncio.Event().wait()  # no liveness probe: only the container's exit ends this
        finally:
            if readiness_task is not None:
                readiness_task.cancel()

    async def _readiness(self, run: PodRun, state: ContainerState, check: probes.Check) -> None:
        result = probes.readiness(probes.ProbeSpec.of(run.specs[state.name]["readinessProbe"]))
        async for passing in probes.changes(result, check, asyncio.sleep):
            state.ready = passing
            run.on_change()

    # ---- shared resources ---------------------------------------------------------------------

    def _workdir(self) -> Path:
        if self._root is None:
            self._root = Path(tempfile.mkdtemp(prefix=f"surge-kubelet-{self.instance}-"))
        return self._root

    def _probe_session(self) -> aiohttp.ClientSession:
        if self._session is None:
            # Probes open a connection each, as the kubelet's do: no keep-alive to go stale.
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(force_close=True), headers=PROBE_HEADERS
            )
        return self._session
