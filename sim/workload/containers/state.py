"""What the kubelet knows of each real container between status writes: its current state (waiting,
running), its last termination, readiness and restarts. Plain data, shared by the runner (which changes
it) and the status writer (which reports it).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Terminated:
    """One finished run of a container."""

    container_id: str
    exit_code: int
    started_at: float
    finished_at: float

    @property
    def reason(self) -> str:
        return "Completed" if self.exit_code == 0 else "Error"


@dataclass
class ContainerState:
    """A container of a pod; `container_id` is its latest run (the one `kubectl logs` reads)."""

    name: str
    image: str
    image_id: str = ""
    container_id: str = ""
    waiting_reason: str = "ContainerCreating"
    waiting_message: str = ""
    running_since: float | None = None
    started: bool = False  # the startup probe passed (or there is none)
    ready: bool = False
    restart_count: int = 0
    last_terminated: Terminated | None = None
    host_ports: dict[int, int] = field(default_factory=dict)  # container port → port on 127.0.0.1

    def wait(self, reason: str, message: str = "") -> None:
        self.waiting_reason, self.waiting_message = reason, message
        self.running_since, self.started, self.ready, self.host_ports = None, False, False, {}

    def run(self, container_id: str, now: float, host_ports: dict[int, int]) -> None:
        self.container_id, self.running_since, self.host_ports = container_id, now, host_ports
        self.waiting_reason = self.waiting_message = ""
