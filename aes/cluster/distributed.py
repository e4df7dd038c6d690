"""Trainer ranks on several GPUs and nodes: rank 0 runs the flywheel, the others only train.

DPPO through DeepSpeed is data parallel: every rank must run the same update (its share of the
micro-batches), the same checkpoint save and load and the same weight-sync gathers, in the same
order. Only rank 0 has rollouts. So rank 0's trainable solver is wrapped in :class:`LeaderSolver`,
which, before each of those steps, broadcasts it to the other ranks over a command channel (a gloo
group with ``cluster.dist_timeout_min``: the other ranks wait there while rank 0 rolls out, which
can take far longer than a collective's usual timeout), and :func:`follow` is the other ranks' loop.

The variables every rank gets (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT,
CUDA_VISIBLE_DEVICES) are set by :mod:`aes.cluster.session` from the plan; the process group is
initialised here with the long timeout before any trainer exists.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

log = logging.getLogger("aes.cluster")

RANK_VARS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


class Channel:
    """Rank 0's commands to the other trainer ranks (pickled objects over a gloo group)."""

    def __init__(self, timeout: timedelta):
        import torch.distributed as dist

        self.dist = dist
        self.group = dist.new_group(backend="gloo", timeout=timeout)
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
        self.closed = False

    def send(self, *command: Any) -> None:
        self.dist.broadcast_object_list([command], src=0, group=self.group)

    def receive(self) -> tuple:
        box: list[Any] = [None]
        self.dist.broadcast_object_list(box, src=0, group=self.group)
        return box[0]


_CHANNEL: Channel | None = None


def current() -> Channel | None:
    """The command channel of this process (None: one trainer rank, nothing to coordinate)."""
    return _CHANNEL


def init(timeout_min: float) -> Channel:
    """Initialise the trainer ranks' process group (variables from the session) and the channel."""
    global _CHANNEL
    import deepspeed
    import torch

    import aes.train  # noqa: F401  (where DeepSpeed's compiled ops are cached, before any is loaded)
    from deepspeed.accelerator import get_accelerator

    timeout = timedelta(minutes=timeout_min)
    if not torch.distributed.is_initialized():
        deepspeed.init_distributed(dist_backend=get_accelerator().communication_backend_name(),
                                   auto_mpi_discovery=False, verbose=False, timeout=timeout)
    _CHANNEL = Channel(timeout)
    from aes.train.backends import SOLVER_WRAPPERS

    if wrap_leader not in SOLVER_WRAPPERS:
        SOLVER_WRAPPERS.append(wrap_leader)
    log.info("trainer rank %d of %d joined (master %s:%s)", _CHANNEL.rank, _CHANNEL.world_size,
             os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT"))
    return _CHANNEL


def shutdown() -> None:
    global _CHANNEL
    channel, _CHANNEL = _CHANNEL, None
    if channel is None:
        return
    try:
        import torch

        if torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()
    except Exception as exc:  # noqa: BLE001 - teardown of a group whose peers may be gone
        log.debug("destroying the process group: %s", exc)


class LeaderSolver:
    """Rank 0's trainable solver: each collective step is first announced to the other ranks.

    Wraps a :class:`aes.train.policy.TrainableSolver` (everything else passes through)."""

    def __init__(self, inner: Any, channel: Channel):
        self._inner = inner
        self._channel = channel
        self._built = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    @property
    def trainer(self):
        if not self._built:
            self._channel.send("build")
            self._built = True
        return self._inner.trainer

    def update(self, *args: Any, **kwargs: Any) -> dict:
        """The same ``update`` call on every rank (its groups travel to the others)."""
        self.trainer  # noqa: B018 - the other ranks build theirs first
        self._channel.send("update", args, kwargs)
        return self._inner.update(*args, **kwargs)

    def save(self, directory: Path) -> None:
        self.trainer  # noqa: B018
        self._channel.send("save", str(directory))
        self._inner.save(directory)

    def restore(self, directory: Path) -> None:
        if Path(directory).exists():
            self.trainer  # noqa: B018
            self._channel.send("restore", str(directory))
        self._inner.restore(directory)

    def close(self, timeout: float = 60.0) -> None:
        """Tell the other ranks to stop (given up after ``timeout`` s: after a failed update they may
        be blocked in a collective, and the session's finished marker ends them), then close."""
        if not self._channel.closed:
            self._channel.closed = True
            sender = threading.Thread(target=self._send_stop, name="aes-rank-stop", daemon=True)
            sender.start()
            sender.join(timeout)
            if sender.is_alive():
                log.warning("the other trainer ranks did not take the stop command within %.0f s", timeout)
        self._inner.close()

    def _send_stop(self) -> None:
        try:
            self._channel.send("stop")
        except Exception as exc:  # noqa: BLE001 - the other ranks may be gone already
            log.warning("could not tell the other trainer ranks to stop: %s", exc)


def wrap_leader(solver: Any) -> Any:
    """``solver`` wrapped for rank 0 when this process leads several trainer ranks; else itself."""
    channel = current()
    if channel is None or channel.world_size == 1 or channel.rank != 0:
        return solver
    return LeaderSolver(solver, channel)


def follow(cfg: Any, run_dir: Path, finished: Path | None = None) -> bool:
    """A trainer rank other than 0: build the same trainable solver, then do what rank 0 announces
    until it says stop. ``finished`` (the session's marker) ends a rank whose rank 0 is gone."""
    from aes.models import RunBudget
    from aes.paths import RunPaths
    from aes.train.backends import build_trainable_solver

    channel = current()
    if channel is None:
        raise RuntimeError("follow() needs the trainer ranks' channel (aes.cluster.distributed.init)")
    if finished is not None:
        _exit_when(finished)
    solver = build_trainable_solver(cfg, RunBudget(cfg.budget), RunPaths(Path(run_dir)))
    steps = 0
    try:
        while True:
            command = channel.receive()
            what = command[0]
            if what == "stop":
                break
            if what == "build":
                solver.trainer  # noqa: B018 - builds the DeepSpeed engine with the other ranks
            elif what == "update":
                solver.update(*command[1], **command[2])
                steps += 1
            elif what == "save":
                solver.save(Path(command[1]))
            elif what == "restore":
                solver.restore(Path(command[1]))
            else:
                raise RuntimeError(f"trainer rank {channel.rank}: unknown command {what!r} from rank 0")
    finally:
        channel.closed = True
        solver.close()
    log.info("trainer rank %d: %d update(s), stopping", channel.rank, steps)
    return True


def _exit_when(marker: Path, grace: float = 60.0, failed_grace: float = 5.0) -> None:
    """Exit this rank (it may be blocked in a collective) once rank 0's session has finished: soon
    after a failure, after ``grace`` seconds otherwise (a normal stop arrives well before)."""

    def watch() -> None:
        while not marker.exists():
            time.sleep(1.0)
        try:
            failed = json.loads(marker.read_text()).get("status") != "ok"
        except (OSError, ValueError):
            failed = True
        time.sleep(failed_grace if failed else grace)
        log.error("rank 0 finished (%s) but this rank is still waiting: exiting", marker)
        os._exit(1)

    threading.Thread(target=watch, name="aes-rank-watch", daemon=True).start()
