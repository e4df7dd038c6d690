"""Memory, process and CPU caps on image builds.

A task's Dockerfile is a hostile proposal's code too: its ``RUN`` steps run on the host's engine
before any check of the built image. The classic builder (Docker 20.10) runs each step in a
container whose limits come from the build request: memory (``memory``/``memswap``) and CPU
(``cpuperiod``/``cpuquota``) apply there, but the request has no process limit (a ``pids_limit``
is not among the build options). Processes are capped with a cgroup instead: each build gets its
own parent cgroup (``cgroupparent``) whose ``pids.max`` (and memory limit) the engine's step
containers inherit, which also tells afterwards which cap a failed step ran into.

The parent cgroup needs an engine on this host with the ``cgroupfs`` driver and write access to
``/sys/fs/cgroup`` (aes as root, as on the machines it targets). Elsewhere (a remote engine, the
``systemd`` driver, no access) builds still run under the memory and CPU caps, the process cap is
off, and a warning says so once.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

CGROUP_ROOT = Path("/sys/fs/cgroup")
PARENT = "aes-build"
"""The cgroup (under every hierarchy) that holds one child per running build."""


@dataclass
class BuildCaps:
    """What one build may use: MiB of memory, CPUs, processes (0: no cap)."""

    memory_mb: int
    cpus: float
    pids: int

    def params(self, cgroup: "BuildCgroup | None") -> dict[str, str]:
        """The build request's limit parameters; with ``cgroup`` the memory cap is the cgroup's (so a
        step killed for memory is told apart from one killed otherwise)."""
        params: dict[str, str] = {}
        if self.cpus > 0:
            params.update(cpuperiod="100000", cpuquota=str(max(1000, int(self.cpus * 100000))))
        if cgroup is not None:
            params["cgroupparent"] = cgroup.parent
        elif self.memory_mb > 0:
            params.update(memory=str(self.memory_mb << 20), memswap=str(self.memory_mb << 20))
        return params


class BuildCgroup:
    """One build's parent cgroup: created with its caps before the build, read and removed after."""

    def __init__(self, caps: BuildCaps, version: int):
        self.caps = caps
        self.version = version
        self.name = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
        self.parent = f"/{PARENT}/{self.name}"

    # -- where ---------------------------------------------------------------------------------
    def _dir(self, controller: str) -> Path:
        if self.version == 2:
            return CGROUP_ROOT / PARENT / self.name
        return CGROUP_ROOT / controller / PARENT / self.name

    def _dirs(self) -> list[Path]:
        if self.version == 2:
            return [CGROUP_ROOT / PARENT / self.name]
        return [d / PARENT / self.name for d in CGROUP_ROOT.iterdir() if (d / PARENT).is_dir()]

    # -- lifecycle -----------------------------------------------------------------------------
    def __enter__(self) -> "BuildCgroup":
        if self.version == 2:
            _enable_controllers(CGROUP_ROOT, ("pids", "memory"))
            (CGROUP_ROOT / PARENT).mkdir(exist_ok=True)
            _enable_controllers(CGROUP_ROOT / PARENT, ("pids", "memory"))
        for controller in ("pids", "memory"):
            self._dir(controller).mkdir(parents=True, exist_ok=True)
        if self.caps.pids > 0:
            _write(self._dir("pids") / "pids.max", str(self.caps.pids))
        if self.caps.memory_mb > 0:
            limit = str(self.caps.memory_mb << 20)
            memory = self._dir("memory")
            if self.version == 2:
                _write(memory / "memory.max", limit)
                if (memory / "memory.swap.max").exists():
                    _write(memory / "memory.swap.max", "0")
            else:
                _write(memory / "memory.limit_in_bytes", limit)
                if (memory / "memory.memsw.limit_in_bytes").exists():
                    _write(memory / "memory.memsw.limit_in_bytes", limit)
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.remove()
        except OSError as exc:  # bookkeeping: a cgroup left behind is swept by the next builder
            log.warning("could not remove the build cgroup %s: %s", self.parent, exc)

    def remove(self, wait: float = 10.0) -> None:
        """Remove this build's cgroup in every hierarchy (the engine removes its step containers'
        cgroups with the containers, which a cancelled build may take a moment to do)."""
        deadline = time.monotonic() + wait
        for top in self._dirs():
            while not _rmtree_cgroup(top) and time.monotonic() < deadline:
                time.sleep(0.2)

    # -- what happened -------------------------------------------------------------------------
    def hit(self) -> dict[str, bool]:
        """Which caps the build's steps ran into: ``pids`` (the cgroup reached its process cap: a fork
        was refused), ``memory`` (the cgroup reached its memory cap). Cgroup v1 counts refused forks
        and OOM kills in the step's own cgroup, gone with its container, so the parent's peaks are
        read instead."""
        pids, memory = self._dir("pids"), self._dir("memory")
        peak = _number(pids / "pids.peak")
        at_cap = self.caps.pids > 0 and peak is not None and peak >= self.caps.pids
        if self.version == 2:
            return {"pids": at_cap or _counter(pids / "pids.events", "max") > 0,
                    "memory": _counter(memory / "memory.events", "max") + _counter(memory / "memory.events", "oom_kill") > 0}
        peak_memory = _number(memory / "memory.max_usage_in_bytes") or 0
        return {"pids": at_cap or _counter(pids / "pids.events", "max") > 0,
                "memory": self.caps.memory_mb > 0 and peak_memory >= (self.caps.memory_mb << 20) - (1 << 20)}


def cgroup_support(client, info: dict) -> tuple[int | None, str]:
    """(cgroup version, "") when builds on ``client``'s engine (``info``: its ``docker info``) can get
    a parent cgroup from this process; (None, why not) otherwise."""
    base = str(getattr(client.api, "base_url", ""))
    if not base.startswith("http+docker://"):
        return None, f"the Docker engine ({base}) is not on this host"
    driver = str(info.get("CgroupDriver") or "")
    if driver != "cgroupfs":
        return None, f"the engine's cgroup driver is {driver or 'unknown'!r}, not cgroupfs"
    version = 2 if str(info.get("CgroupVersion") or "1") == "2" else 1
    probe = CGROUP_ROOT / ("pids" if version == 1 else "") / PARENT
    try:
        probe.mkdir(exist_ok=True)
    except OSError as exc:
        return None, f"{probe} cannot be created ({exc.strerror}): aes is not root on the engine's host"
    sweep(version)
    return version, ""


def sweep(version: int) -> None:
    """Remove build cgroups left by processes that are gone (a crash between build and cleanup)."""
    try:
        tops = [CGROUP_ROOT / PARENT] if version == 2 else [d / PARENT for d in CGROUP_ROOT.iterdir()]
        for top in tops:
            for name in os.listdir(top) if top.is_dir() else ():
                match = re.match(r"^(\d+)-", name)
                if match and not _alive(int(match.group(1))):
                    _rmtree_cgroup(top / name)
    except OSError as exc:
        log.debug("sweeping build cgroups: %s", exc)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _rmtree_cgroup(top: Path) -> bool:
    """rmdir ``top`` and the cgroups below it, deepest first; True when it is gone. The engine may be
    removing the step containers' cgroups meanwhile: entries that vanish are skipped, never raised."""
    for dirpath, _, _ in os.walk(top, topdown=False):  # os.walk ignores directories that vanish
        try:
            os.rmdir(dirpath)
        except OSError:
            pass
    return not os.path.lexists(top)


def _enable_controllers(path: Path, controllers: tuple[str, ...]) -> None:
    control = path / "cgroup.subtree_control"
    try:
        present = control.read_text().split()
        missing = [c for c in controllers if c not in present]
        if missing:
            _write(control, " ".join(f"+{c}" for c in missing))
    except OSError as exc:
        log.debug("could not enable %s in %s: %s", controllers, path, exc)


def _write(path: Path, value: str) -> None:
    with open(path, "w") as fh:
        fh.write(value)


def _counter(path: Path, key: str) -> int:
    try:
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key and value.strip().isdigit():
                return int(value)
    except OSError:
        pass
    return 0


def _number(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None
