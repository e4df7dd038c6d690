"""GPU trials: a task that declares ``[environment] gpus = N`` (Harbor's field) gets N NVIDIA GPUs
from Docker when the host has them, and runs on the CPU otherwise, its trial saying ``gpu: none``.

The decision lives here (what to ask Docker for, what to say); ``DockerSandbox.start`` asks for
it for every container of a task (the agent's and the verifier's) and warns once per task when
the host has fewer GPUs than it declares. The gpu_kernels seeds declare none: they run their
CPU path (Triton's interpreter) here and in CI; a task that declares ``gpus = 1`` gets the
device on a GPU host (the NVIDIA container runtime must be installed there).
"""

from __future__ import annotations

import glob
import shutil
from dataclasses import dataclass


def host_gpus() -> int:
    """NVIDIA GPUs this host exposes to Docker (device nodes /dev/nvidia0, 1, ...; 0 without a
    driver). ``nvidia-smi`` alone is not enough: a container needs the device nodes."""
    if not shutil.which("nvidia-smi"):
        return 0
    return len(glob.glob("/dev/nvidia[0-9]*"))


@dataclass(frozen=True)
class GpuPlan:
    """What a trial asks Docker for: ``count`` GPUs (0: none) and the note its result records."""

    count: int
    note: str

    def device_requests(self) -> list:
        """docker-py ``device_requests`` for ``containers.run``/``create`` (empty: no GPU)."""
        if not self.count:
            return []
        from docker.types import DeviceRequest

        return [DeviceRequest(count=self.count, capabilities=[["gpu"]])]


def plan(requested: int | None, available: int | None = None) -> GpuPlan:
    """The GPUs a trial gets: what the task asked for when the host has that many, all the host
    has when it has fewer (noted), none when the task asked for none or the host has none (the task
    still runs, on its CPU path, and the trial records ``gpu: none``)."""
    requested = int(requested or 0)
    if requested < 0:
        raise ValueError(f"gpus must be >= 0, got {requested}")
    available = host_gpus() if available is None else available
    if requested == 0:
        return GpuPlan(0, "gpu: not requested")
    if available == 0:
        return GpuPlan(0, "gpu: none")
    if available < requested:
        return GpuPlan(available, f"gpu: {available} of {requested} requested")
    return GpuPlan(requested, f"gpu: {requested}")
