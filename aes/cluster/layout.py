"""Who does what on an allocation: the nodes and GPUs SLURM gave the job, and the plan that splits
them between rollout servers and trainer ranks. Pure functions of the config and the environment,
so every node of a job computes the same plan on its own.

The plan (``cluster.*``, :class:`aes.config.ClusterConfig`):

* GPUs are numbered per node; the servers take the first ones in node order, ``gpus_per_server``
  each, and a server never spans two nodes (it moves to the next node instead).
* Trainer ranks take every GPU no server uses on the first ``trainer_nodes`` nodes that have any
  left (at most ``trainer_gpus_per_node`` each), one rank per GPU; on a node without GPUs (CPU) a
  trainer node has one rank.
* Global rank 0 is the first trainer GPU: its node runs the flywheel (rollouts, Docker trials,
  the pool) and the other trainer ranks only train. A node with servers but no trainer rank keeps
  its servers up until the flywheel's node says the run is over.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import zlib
from dataclasses import dataclass, field

from aes.config import ClusterConfig, ConfigError


@dataclass(frozen=True)
class Allocation:
    """The nodes of the job and this process's place among them."""

    hostnames: tuple[str, ...]
    """Every node of the job, in SLURM's order (one entry on a laptop)."""
    node: int
    """This process's node (its index in ``hostnames``)."""
    gpus: tuple[str, ...]
    """The GPU ids of a node (CUDA_VISIBLE_DEVICES values), the same on every node; empty on CPU."""
    job_id: str = "local"
    """The SLURM job id (``local`` outside SLURM)."""
    restart: int = 0
    """SLURM_RESTART_COUNT: how often a requeued job has started again."""

    @property
    def session(self) -> str:
        """Names this run of the job (a requeued job is a new session of the same run dir)."""
        return f"{self.job_id}.{self.restart}"

    @property
    def slurm(self) -> bool:
        return self.job_id != "local"

    @classmethod
    def detect(cls, cfg: ClusterConfig, env: dict[str, str] | None = None) -> "Allocation":
        """From SLURM's own variables (SLURM_JOB_NODELIST, SLURM_NODEID, SLURM_JOB_ID,
        SLURM_RESTART_COUNT) in a job step that srun started on every node (what submitit runs),
        else this host alone (a laptop, or a shell inside an allocation)."""
        env = dict(os.environ if env is None else env)
        gpus = node_gpus(cfg, env)
        if not all(k in env for k in ("SLURM_JOB_ID", "SLURM_JOB_NODELIST", "SLURM_STEP_ID")):
            return cls((socket.gethostname(),), 0, gpus)
        hosts = tuple(expand_nodelist(env["SLURM_JOB_NODELIST"]))
        ntasks = int(env.get("SLURM_NTASKS", len(hosts)) or len(hosts))
        if ntasks > len(hosts):
            raise ConfigError(
                f"the job runs {ntasks} SLURM tasks on {len(hosts)} node(s): with a cluster section aes starts the "
                "trainer ranks of a node itself, so give the launcher tasks_per_node: 1 (one task per node)")
        return cls(hosts, int(env.get("SLURM_NODEID", "0") or 0), gpus, env["SLURM_JOB_ID"],
                   int(env.get("SLURM_RESTART_COUNT", "0") or 0))


def node_gpus(cfg: ClusterConfig, env: dict[str, str]) -> tuple[str, ...]:
    """The GPU ids of this node: ``cluster.gpus_per_node`` of CUDA_VISIBLE_DEVICES (or 0..n-1),
    else CUDA_VISIBLE_DEVICES, else what nvidia-smi lists, else none."""
    visible = [g.strip() for g in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if g.strip()]
    if cfg.gpus_per_node is not None:
        if visible and len(visible) < cfg.gpus_per_node:
            raise ConfigError(f"cluster.gpus_per_node={cfg.gpus_per_node} but CUDA_VISIBLE_DEVICES lists "
                              f"{len(visible)} GPU(s): {','.join(visible)}")
        return tuple(visible[:cfg.gpus_per_node] if visible else (str(i) for i in range(cfg.gpus_per_node)))
    if visible:
        return tuple(visible)
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"],
                             capture_output=True, text=True, check=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return ()
    return tuple(line.strip() for line in out.splitlines() if line.strip())


def expand_nodelist(nodelist: str) -> list[str]:
    """SLURM's compact node list as host names: ``gpu[01-03,07],cpu5`` -> gpu01 gpu02 gpu03 gpu07 cpu5."""
    hosts: list[str] = []
    for part in re.findall(r"[^,\[]+(?:\[[^\]]*\])?[^,]*", nodelist):
        match = re.fullmatch(r"([^\[]*)\[([^\]]*)\](.*)", part)
        if not match:
            hosts.append(part)
            continue
        prefix, ranges, suffix = match.groups()
        for item in ranges.split(","):
            lo, _, hi = item.partition("-")
            if not hi:
                hosts.append(f"{prefix}{lo}{suffix}")
                continue
            for n in range(int(lo), int(hi) + 1):
                hosts.append(f"{prefix}{str(n).zfill(len(lo))}{suffix}")
    if not hosts:
        raise ConfigError(f"cannot read SLURM_JOB_NODELIST={nodelist!r}")
    return hosts


@dataclass(frozen=True)
class ServerSlot:
    """One rollout server of the plan."""

    index: int
    node: int
    gpus: tuple[str, ...]
    port: int | None
    """None: a free port is chosen when it starts (servers on the flywheel's node only)."""


@dataclass(frozen=True)
class RankSlot:
    """One trainer rank of the plan."""

    rank: int
    node: int
    local_rank: int
    gpu: str | None


@dataclass
class Plan:
    """The split of an allocation: servers, trainer ranks, and which node runs the flywheel."""

    servers: list[ServerSlot] = field(default_factory=list)
    ranks: list[RankSlot] = field(default_factory=list)

    @property
    def world_size(self) -> int:
        return len(self.ranks)

    @property
    def leader_node(self) -> int:
        """The node of trainer rank 0: it runs the flywheel."""
        return self.ranks[0].node

    def servers_on(self, node: int) -> list[ServerSlot]:
        return [s for s in self.servers if s.node == node]

    def ranks_on(self, node: int) -> list[RankSlot]:
        return [r for r in self.ranks if r.node == node]

    def describe(self, alloc: Allocation) -> str:
        lines = []
        for node, host in enumerate(alloc.hostnames):
            servers = ", ".join(f"server {s.index} on GPUs {','.join(s.gpus) or '-'}" for s in self.servers_on(node))
            ranks = ", ".join(f"rank {r.rank}" + (f" on GPU {r.gpu}" if r.gpu is not None else " (CPU)")
                              for r in self.ranks_on(node))
            role = " [flywheel]" if node == self.leader_node else ""
            lines.append(f"node {node} {host}{role}: {servers or 'no servers'}; {ranks or 'no trainer ranks'}")
        return "\n".join(lines)


def plan(cfg: ClusterConfig, alloc: Allocation) -> Plan:
    """Split ``alloc`` between servers and trainer ranks as ``cfg`` says (see the module doc)."""
    n_nodes, gpus = len(alloc.hostnames), list(alloc.gpus)
    free = {node: list(gpus) for node in range(n_nodes)}
    servers: list[ServerSlot] = []
    node = 0
    for index in range(cfg.servers):
        need = cfg.gpus_per_server if gpus else 0
        if need > len(gpus):
            raise ConfigError(f"cluster.gpus_per_server={cfg.gpus_per_server} but a node has {len(gpus)} GPU(s)")
        while node < n_nodes and len(free[node]) < need:
            node += 1
        if node >= n_nodes:
            raise ConfigError(f"{cfg.servers} server(s) x {cfg.gpus_per_server} GPU(s) do not fit on "
                              f"{n_nodes} node(s) of {len(gpus)} GPU(s)")
        taken, free[node] = free[node][:need], free[node][need:]
        port = None if cfg.port is None else cfg.port + index
        servers.append(ServerSlot(index, node, tuple(taken), port))
    if servers and cfg.backend == "vllm" and not cfg.command and not gpus and cfg.gpus_per_server > 0:
        raise ConfigError("cluster.backend=vllm needs GPUs, and this node has none (CUDA_VISIBLE_DEVICES and "
                          "nvidia-smi list nothing); set cluster.gpus_per_server=0 for vLLM's CPU build "
                          "(experiment=cluster_vllm_cpu), or cluster.backend=llamacpp")
    ranks: list[RankSlot] = []
    trainer_nodes = [n for n in range(n_nodes) if free[n] or not gpus][:cfg.trainer_nodes]
    if len(trainer_nodes) < cfg.trainer_nodes:
        raise ConfigError(f"cluster.trainer_nodes={cfg.trainer_nodes} but the allocation has "
                          f"{len(trainer_nodes)} node(s) with a GPU left for training ({n_nodes} node(s), "
                          f"{len(servers)} server(s)); ask the launcher for more nodes")
    for node in trainer_nodes:
        slots: list[str | None] = list(free[node]) if gpus else [None]
        if cfg.trainer_gpus_per_node is not None:
            if gpus and cfg.trainer_gpus_per_node > len(slots):
                raise ConfigError(f"cluster.trainer_gpus_per_node={cfg.trainer_gpus_per_node} but node {node} has "
                                  f"{len(slots)} GPU(s) left after the servers")
            slots = slots[:cfg.trainer_gpus_per_node] if gpus else [None] * cfg.trainer_gpus_per_node
        for local, gpu in enumerate(slots):
            ranks.append(RankSlot(len(ranks), node, local, gpu))
    result = Plan(servers, ranks)
    if cfg.port is None and any(s.node != result.leader_node for s in servers):
        raise ConfigError("cluster.port=null picks free ports, which only works for servers on the flywheel's "
                          "node: set cluster.port")
    if cfg.backend == "llamacpp" and any(s.node != result.leader_node for s in servers):
        raise ConfigError("llama.cpp servers are restarted with new weights by the flywheel's process: they must "
                          "run on its node (fewer servers, or cluster.backend=vllm)")
    return result


def master_port(cfg: ClusterConfig, alloc: Allocation) -> int:
    """The trainer ranks' rendezvous port: ``cluster.master_port`` or one derived from the job id
    (so two jobs sharing a node do not collide)."""
    if cfg.master_port is not None:
        return cfg.master_port
    return 20000 + zlib.crc32(alloc.session.encode()) % 20000
