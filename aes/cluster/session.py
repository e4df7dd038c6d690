"""The job on its allocation: servers up, trainer ranks joined, the run, everything down.

``aes.run`` enters :func:`cluster_session` around the mode it runs; with no ``cluster`` section
asking for anything (``cluster.servers`` 0, one trainer rank) it does nothing. Otherwise, on
every node of the job (one SLURM task per node, started by the submitit launcher):

1. read the allocation from SLURM's variables and split it (:mod:`aes.cluster.layout`): servers on
   the first GPUs, one trainer rank per remaining GPU of the trainer nodes;
2. start this node's servers (:mod:`aes.cluster.servers`; vLLM, or aes's llama.cpp server), each on
   its GPUs and port, logging to ``RUN_DIR/servers/``, and wait for their health checks (the node
   that runs the flywheel waits for every server, its own and the other nodes');
3. point the solver at them (``solver.base_url`` and ``solver.base_urls``: requests are spread
   over the servers, weights are pushed to every one after each update);
4. with several trainer ranks: give this node's ranks their variables (RANK, LOCAL_RANK,
   WORLD_SIZE, MASTER_ADDR = the first trainer node, MASTER_PORT, CUDA_VISIBLE_DEVICES), start the
   node's extra ranks as processes (logs in ``RUN_DIR/cluster/``) and join the process group;
5. run: the node of trainer rank 0 runs the mode (the flywheel), other trainer ranks follow rank 0's
   updates (:mod:`aes.cluster.distributed`), a node with only servers keeps them up;
   ``RUN_DIR/cluster/servers.json`` says which server runs where (URL, GPUs, log, command);
6. on the way out, on success, failure or preemption (submitit's requeue exits the job with
   SystemExit; a requeued job is a new session that resumes from the run dir): mark the session
   finished (``RUN_DIR/cluster/finished-<job>.<restart>``, which ends the other nodes), stop this
   node's extra ranks and servers. Servers run under a guard that stops them if the job process
   dies without its teardown.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from aes.cluster.layout import Allocation, Plan, master_port, plan
from aes.cluster.servers import ServerError, ServerGroup, ServerSpec, activate, free_port
from aes.config import AesConfig, ConfigError

log = logging.getLogger("aes.cluster")

TRAINING_MODES = ("run", "train")
"""Modes whose training goes through the trainable solver (and so can span several ranks)."""
RANK_STOP_SEC = 120.0
"""How long the session waits for this node's extra ranks to stop after the run."""


@dataclass
class Job:
    """What this process does in the job: ``leader`` runs the mode, ``follower`` is a trainer rank
    other than 0, ``servers`` keeps this node's servers up until the run is over."""

    cfg: AesConfig
    role: str
    run_dir: Path
    group: ServerGroup | None = None
    finished: Path | None = None
    ranks: list[subprocess.Popen] = field(default_factory=list)

    def run(self, dispatch: Callable[[AesConfig, Path], bool]) -> bool:
        if self.role == "leader":
            return dispatch(self.cfg, self.run_dir)
        if self.role == "follower":
            from aes.cluster.distributed import follow

            return follow(self.cfg, self.run_dir, self.finished)
        return self._serve()

    def _serve(self) -> bool:
        log.info("this node only serves: waiting for the run to finish (%s)", self.finished)
        while self.finished is not None and not self.finished.exists():
            if self.group is not None:
                self.group.check_alive()
            time.sleep(2.0)
        return True


# -- the servers' commands -----------------------------------------------------------------

def server_model(cfg: AesConfig) -> str:
    """What the servers load: ``cluster.model``, else ``solver.model`` (a GGUF file for llama.cpp)."""
    model = cfg.cluster.model or cfg.solver.model
    if cfg.cluster.backend == "llamacpp":
        from aes.models import ModelError
        from aes.models.local import resolve_gguf

        try:
            return str(resolve_gguf(model))
        except ModelError as exc:
            raise ConfigError(f"cluster.backend=llamacpp serves a GGUF file: {exc}") from None
    from aes.models.export import served_directory

    return served_directory(model)


def serving_plan(cfg: AesConfig):
    """The vLLM server's plan (:mod:`aes.cluster.vllm_command`): tool parser, context, CPU or GPU;
    None for llama.cpp servers and for a ``cluster.command`` of its own."""
    if cfg.cluster.backend != "vllm" or cfg.cluster.command:
        return None
    from aes.cluster.vllm_command import serving_plan as plan_vllm

    return plan_vllm(cfg)


def server_command(cfg: AesConfig, spec: ServerSpec, vllm_plan=None) -> list[str]:
    """The command of one server: ``cluster.command`` (placeholders filled) or the backend's default,
    then ``cluster.extra_args``."""
    c, solver = cfg.cluster, cfg.solver
    values = {"model": spec.model, "host": spec.bind_host, "port": spec.port, "tp": max(1, len(spec.gpus)),
              "gpus": ",".join(spec.gpus), "name": solver.model, "index": spec.index}
    if c.command:
        try:
            command = [str(arg).format(**values) for arg in c.command]
        except (KeyError, IndexError, ValueError) as exc:
            raise ConfigError(f"cluster.command: cannot fill {exc} (placeholders: {', '.join(values)})") from None
    elif c.backend == "vllm":
        from aes.cluster.vllm_command import vllm_command

        command = vllm_command(cfg, vllm_plan or serving_plan(cfg), host=spec.bind_host, port=spec.port,
                               tp=values["tp"])
    else:
        command = [sys.executable, "-m", "aes.cluster.llamacpp_server", "--model", spec.model,
                   "--host", spec.bind_host, "--port", str(spec.port), "--alias", solver.model,
                   "--ctx", str(solver.context_length), "--parallel", str(solver.parallel)]
        if solver.threads:
            command += ["--threads", str(solver.threads)]
    return command + [str(a) for a in c.extra_args]


def server_specs(cfg: AesConfig, alloc: Allocation, layout: Plan, run_dir: Path) -> list[ServerSpec]:
    """Every server of the plan, as this node sees it (others' are ``remote``)."""
    c = cfg.cluster
    log_dir = Path(c.log_dir) if c.log_dir else run_dir / "servers"
    model = server_model(cfg) if layout.servers else ""
    vllm_plan = serving_plan(cfg) if layout.servers else None
    # trials (and their agent loops) on Ray nodes call the servers from other machines
    local_clients = cfg.sandbox.executor != "ray"
    specs = []
    for slot in layout.servers:
        on_leader = slot.node == layout.leader_node and local_clients
        bind = c.bind_host or ("127.0.0.1" if on_leader else "0.0.0.0")
        port = slot.port if slot.port is not None else free_port(bind if bind != "0.0.0.0" else "127.0.0.1")
        env = {str(k): str(v) for k, v in c.env.items()}
        if slot.gpus:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(slot.gpus)
        if c.backend == "vllm":
            env.setdefault("VLLM_SERVER_DEV_MODE", "1")  # the weight-update endpoints
            if vllm_plan is not None:
                from aes.cluster.vllm_command import server_env

                env = {**server_env(cfg, vllm_plan), **env}
        spec = ServerSpec(slot.index, c.backend, model, [], env, bind, port,
                          "127.0.0.1" if on_leader else alloc.hostnames[slot.node], log_dir / f"server-{slot.index}.log",
                          slot.gpus, remote=slot.node != alloc.node)
        spec.command = server_command(cfg, spec, vllm_plan)
        specs.append(spec)
    return specs


def write_servers(path: Path, alloc: Allocation, layout: Plan, specs: list[ServerSpec]) -> None:
    """Where every server of the session runs: ``RUN_DIR/cluster/servers.json``."""
    path.write_text(json.dumps({"session": alloc.session, "servers": [
        {"index": s.index, "backend": s.backend, "model": s.model, "node": alloc.hostnames[slot.node],
         "gpus": list(s.gpus), "base_url": s.base_url, "log": str(s.log), "command": s.command}
        for s, slot in zip(specs, layout.servers)]}, indent=1))


def with_servers(cfg: AesConfig, specs: list[ServerSpec]) -> AesConfig:
    """``cfg`` with the solver pointed at the servers (every one of them)."""
    if not specs:
        return cfg
    urls = [s.base_url for s in specs]
    solver = dataclasses.replace(cfg.solver, base_url=urls[0], base_urls=urls, engine=cfg.cluster.backend)
    vllm_plan = serving_plan(cfg)
    if vllm_plan is not None and not vllm_plan.use_tools:  # no tool parser for the family: fenced blocks
        solver = dataclasses.replace(solver, use_tools=False)
    return dataclasses.replace(cfg, solver=solver)


def check(cfg: AesConfig, layout: Plan) -> None:
    if layout.servers and cfg.solver.backend != "openai_compatible":
        raise ConfigError(f"cluster.servers={cfg.cluster.servers} starts model servers for an openai_compatible "
                          f"solver, but solver.backend={cfg.solver.backend}; choose e.g. solver=qwen, or cluster=none")
    if layout.world_size > 1 and cfg.mode not in TRAINING_MODES:
        raise ConfigError(f"the cluster section asks for {layout.world_size} trainer ranks, which only modes "
                          f"{', '.join(TRAINING_MODES)} use; set cluster.trainer_nodes=1 and "
                          "cluster.trainer_gpus_per_node=1 for mode=" + cfg.mode)


# -- trainer ranks -------------------------------------------------------------------------

def rank_env(layout: Plan, alloc: Allocation, rank: int, port: int) -> dict[str, str]:
    slot = layout.ranks[rank]
    first = layout.ranks[0].node
    return {"RANK": str(rank), "LOCAL_RANK": str(slot.local_rank), "WORLD_SIZE": str(layout.world_size),
            "MASTER_ADDR": "127.0.0.1" if len(alloc.hostnames) == 1 else alloc.hostnames[first],
            "MASTER_PORT": str(port)}


def _config_file(cfg: AesConfig, run_dir: Path, alloc: Allocation) -> Path:
    from omegaconf import OmegaConf

    path = run_dir / "cluster" / f"config-{alloc.session}-node{alloc.node}.yaml"
    path.write_text(OmegaConf.to_yaml(OmegaConf.structured(cfg)))
    return path


def spawn_ranks(cfg: AesConfig, run_dir: Path, alloc: Allocation, layout: Plan, port: int,
                finished: Path) -> list[subprocess.Popen]:
    """This node's trainer ranks after its first (which is the job process itself)."""
    mine = layout.ranks_on(alloc.node)[1:]
    if not mine:
        return []
    config = _config_file(cfg, run_dir, alloc)
    procs = []
    for slot in mine:
        out = open(run_dir / "cluster" / f"rank-{slot.rank}.log", "ab")
        env = {**os.environ, **rank_env(layout, alloc, slot.rank, port)}
        procs.append(subprocess.Popen([sys.executable, "-m", "aes.cluster.rank", "--config", str(config),
                                       "--run-dir", str(run_dir), "--finished", str(finished)],
                                      stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env))
        out.close()
        log.info("started trainer rank %d (log %s)", slot.rank, run_dir / "cluster" / f"rank-{slot.rank}.log")
    return procs


def stop_ranks(procs: list[subprocess.Popen], timeout: float = RANK_STOP_SEC) -> None:
    deadline = time.monotonic() + timeout
    for proc in procs:
        try:
            proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            log.warning("trainer rank process %d did not stop: terminating it", proc.pid)
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _trainer_gpus(layout: Plan, node: int) -> str | None:
    gpus = [r.gpu for r in layout.ranks_on(node) if r.gpu is not None]
    return ",".join(gpus) if gpus else None


@contextmanager
def _sigterm_as_exit() -> Iterator[None]:
    """Outside submitit (which handles SIGTERM itself), SIGTERM ends the job through its teardown."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return

    def stop(signum, _frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _no_proxy(specs: list[ServerSpec]) -> None:
    """Model servers are reached directly, never through an HTTP proxy of the environment."""
    hosts = {s.client_host for s in specs}
    for var in ("NO_PROXY", "no_proxy"):
        have = [h for h in os.environ.get(var, "").split(",") if h]
        os.environ[var] = ",".join(have + sorted(hosts - set(have)))


@contextmanager
def cluster_session(cfg: AesConfig, run_dir: Path) -> Iterator[Job]:
    """The job around the mode (see the module doc); a plain :class:`Job` when ``cluster`` asks for nothing."""
    if not cfg.cluster.active:
        yield Job(cfg, "leader", run_dir)
        return
    c = cfg.cluster
    alloc = Allocation.detect(c)
    layout = plan(c, alloc)
    check(cfg, layout)
    here, leader = alloc.node, alloc.node == layout.leader_node
    log.info("allocation %s (%d node(s), %d GPU(s) each): %d server(s), %d trainer rank(s)\n%s", alloc.session,
             len(alloc.hostnames), len(alloc.gpus), len(layout.servers), layout.world_size, layout.describe(alloc))
    (run_dir / "cluster").mkdir(parents=True, exist_ok=True)
    finished = run_dir / "cluster" / f"finished-{alloc.session}"
    specs = server_specs(cfg, alloc, layout, run_dir)
    group = ServerGroup([s for s in specs if leader or not s.remote], c.stop_timeout_sec, c.health_timeout_sec)
    job_cfg = with_servers(cfg, specs)
    ranks: list[subprocess.Popen] = []
    status = "failed"
    with _sigterm_as_exit():
        try:
            activate(group)
            group.start()
            group.wait_healthy(remote=leader)
            _no_proxy(specs)
            if leader and specs:
                write_servers(run_dir / "cluster" / "servers.json", alloc, layout, specs)
            gpus = _trainer_gpus(layout, here)
            if gpus is not None:
                os.environ["CUDA_VISIBLE_DEVICES"] = gpus
            mine = layout.ranks_on(here)
            if layout.world_size > 1 and mine:
                port = master_port(c, alloc)
                ranks = spawn_ranks(job_cfg, run_dir, alloc, layout, port, finished)
                os.environ.update(rank_env(layout, alloc, mine[0].rank, port))
                from aes.cluster import distributed

                distributed.init(c.dist_timeout_min)
            role = "leader" if leader else ("follower" if mine else "servers")
            yield Job(job_cfg, role, run_dir, group, finished, ranks)
            status = "ok"
        finally:
            if leader:
                try:
                    finished.write_text(json.dumps({"status": status, "session": alloc.session,
                                                    "time": time.strftime("%Y-%m-%d %H:%M:%S")}))
                except OSError as exc:
                    log.warning("could not mark the session finished (%s): %s", finished, exc)
            stop_ranks(ranks, RANK_STOP_SEC if status == "ok" else 15.0)
            if layout.world_size > 1:
                from aes.cluster import distributed

                distributed.shutdown()
            group.stop()
            activate(None)


__all__ = ["Job", "ServerError", "cluster_session", "server_command", "server_specs", "with_servers"]
