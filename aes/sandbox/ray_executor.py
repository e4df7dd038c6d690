"""``sandbox.executor=ray``: trials, and the agent loops that drive them, as Ray tasks on the
nodes of a Ray cluster, each node using its own container engine. Ray does the scheduling.

What runs where
  * The driver (``python -m aes.run``) keeps everything else: the pool, the trainer, the
    proposer and its own sandbox (terminal harness, reflection), which use the driver's engine.
  * ``trials.run(task, agent, image)`` submits one Ray task. It asks Ray for the trial's CPUs and
    memory (the task's ``[environment] cpus``/``memory_mb`` or the sandbox defaults, clamped like
    the container's own limits and to the largest node; ``sandbox.ray_cpus_per_trial`` /
    ``ray_memory_mb_per_trial`` override them) plus ``sandbox.ray_resources``. On the node Ray
    picks, the task's files are unpacked from Ray's object store, the image is built there (its
    own Docker engine, cached there by content hash; one build of a context at a time per node),
    the agent is rebuilt from a description (below), and :class:`~aes.sandbox.trial.TrialRunner`
    runs the trial exactly as the local executor does (sealed verifier included). The result
    comes back as plain data (:meth:`TrialResult.to_dict`).
  * ``trials.sandbox.build(task)`` (rollouts build every env first; admission check 2) runs the
    build as a Ray task on some node: the verdict, timings and ``build.*`` reasons are those of a
    real build, and that node's cache is warm. The image it names is only a hint: a trial on a
    node that lacks it builds its own copy (same content hash, unless the nodes' base images
    differ).
  * Agents are not shipped as objects (a terminal agent holds a model client; the embedded model
    lives in the driver's process): a terminal agent travels as its model config, agent config,
    name and hints, and is rebuilt on the worker with :func:`aes.models.build_model` (cached per
    worker process). The embedded ``local`` model is reloaded from the GGUF file the driver's
    engine serves (the newest exported weights: the file must be on a file system the nodes
    share); ``tiny`` is rebuilt from its config, so its weights are not the trainer's. Oracle,
    no-op and other stateless agents are pickled. The worker's model calls are charged to the
    driver's run budget when the trial returns (the worker enforces what was left at submission).

Which engine a node uses: the first entry of ``sandbox.ray_node_docker_hosts`` (key: a custom
resource of the node, a node label ``key=value``, or its IP address) that matches the node, else
the ``DOCKER_HOST`` of the environment ``ray start`` ran in on that node, else the default local
socket. The driver's ``sandbox.docker_host`` applies to the driver only.

Failures
  * A node (or worker process) that dies takes its trials with it: Ray runs each of them again
    elsewhere, up to ``sandbox.ray_max_retries`` times; one that runs out of retries is an
    infrastructure failure (``sandbox_error``: never scored; a resumed run redoes it).
  * Containers carry the Ray node and job that started them (labels ``aes.ray.node``,
    ``aes.ray.job``) besides the usual owner labels. When the executor starts, every node that
    can take trials reaps its engine (containers of dead aes processes there, and of dead Ray
    nodes). Once a node is found dead, the driver removes that node's containers from its engine
    when it can reach it (a TCP/SSH engine, or a socket on the driver's machine); otherwise the
    keep-alive stops them after their longest possible trial and the node's reaper removes them
    when it comes back. ``close()`` (also at exit) removes whatever this run left on any node.
  * A node whose engine cannot be reached or lacks ``sandbox.base_image`` stops the run with a
    message naming the node (at start for every node, later for a node that joins), rather than
    failing builds that would reject good tasks.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import functools
import hashlib
import io
import json
import logging
import os
import shutil
import socket
import tarfile
import tempfile
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aes.config import BudgetConfig, SandboxConfig
from aes.errors import InfrastructureError
from aes.sandbox import docker_client
from aes.sandbox.docker_backend import SandboxError
from aes.sandbox.docker_client import LABEL_MANAGED, SandboxUnavailable
from aes.sandbox.images import IMAGE_REPO, BuildResult
from aes.sandbox.trial import NopAgent, OracleAgent, Outcome, TrialResult
from aes.tasks import Task

log = logging.getLogger(__name__)

LABEL_RAY_NODE = "aes.ray.node"
LABEL_RAY_JOB = "aes.ray.job"
DEFAULT_SOCKET = "unix:///var/run/docker.sock"
SURVEY_TIMEOUT_SEC = 180.0
"""How long the start-up survey waits for a node (a cold worker imports aes and connects)."""
_SWEEP_EVERY_SEC = 5.0
_BUNDLE_CACHE = 128
_MODEL_CACHE = 2


def _ray():
    try:
        import ray
    except ImportError:  # pragma: no cover - depends on the install
        raise SandboxUnavailable(
            "sandbox.executor=ray needs Ray: pip install -e '.[ray]' (or AES_WITH_RAY=1 bash launchers/setup.sh)"
        ) from None
    return ray


# -- what travels to a worker --------------------------------------------------------------------


@dataclass
class TaskBundle:
    """A task's directory as one tar (in Ray's object store) and its content digest."""

    digest: str
    data: bytes


def pack_task(path: Path) -> TaskBundle:
    """The files of the task directory ``path`` as a deterministic tar (no owners, no times)."""
    buf = io.BytesIO()
    root = Path(path)
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            for name in sorted(dirnames) + sorted(filenames):
                full = Path(dirpath) / name
                info = tar.gettarinfo(str(full), arcname=str(full.relative_to(root)))
                if not (info.isreg() or info.isdir() or info.issym()):
                    continue  # sockets, FIFOs, devices: nothing a task may hold
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                info.mtime = 0
                if info.isreg():
                    with open(full, "rb") as fh:
                        tar.addfile(info, fh)
                else:
                    tar.addfile(info)
    data = buf.getvalue()
    return TaskBundle(hashlib.sha256(data).hexdigest(), data)


def _signature(path: Path) -> tuple:
    """What changes when a file of the task changes (names, sizes, modification times)."""
    items = []
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames.sort()
        for name in sorted(filenames) + sorted(dirnames):
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except OSError:
                continue
            items.append((os.path.relpath(os.path.join(dirpath, name), path), st.st_size, st.st_mtime_ns, st.st_mode))
    return tuple(items)


def unpack_task(bundle: TaskBundle, root: Path | None = None) -> Path:
    """The bundle's files under ``root/<digest>`` on this node (unpacked once, atomically)."""
    root = Path(root or Path(tempfile.gettempdir()) / "aes-ray-tasks")
    target = root / bundle.digest
    if target.is_dir():
        return target
    root.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{bundle.digest[:12]}-", dir=root))
    with tarfile.open(fileobj=io.BytesIO(bundle.data), mode="r") as tar:
        tar.extractall(scratch, filter="data")
    try:
        os.rename(scratch, target)
    except OSError:  # another worker on this node unpacked it first
        shutil.rmtree(scratch, ignore_errors=True)
    return target


@dataclass
class AgentSpec:
    """How to rebuild an agent on a worker: ``oracle``, ``nop``, ``terminal`` (a model config and
    the agent's own settings) or ``object`` (a picklable agent, e.g. admission's no-op probe)."""

    kind: str
    name: str
    model: Any = None
    """The terminal agent's :class:`~aes.config.ModelConfig` (local: the GGUF now served)."""
    state: dict = field(default_factory=dict)
    """The terminal agent's attributes other than its model (agent config, name, hints, ...)."""
    weights_version: int | None = None
    """The driver model's weight version at submission (recorded with every model call)."""
    obj: Any = None


_warned: set[str] = set()


def describe_agent(agent) -> AgentSpec:
    """The description of ``agent`` a worker can rebuild it from; TypeError if there is none."""
    from aes.agents import TerminalAgent

    if type(agent) is OracleAgent:
        return AgentSpec("oracle", agent.name)
    if type(agent) is NopAgent:
        return AgentSpec("nop", agent.name)
    if type(agent) is TerminalAgent:
        model = agent.model
        config = getattr(model, "config", None)
        if config is None:
            raise TypeError(f"terminal agent {agent.name!r}: its model has no config to rebuild it from on a Ray worker")
        path = getattr(model, "model_path", None)
        if config.backend == "local" and path is not None:
            config = dataclasses.replace(config, model=str(path))  # the weights the driver serves now
        if config.backend == "tiny" and "tiny" not in _warned:
            _warned.add("tiny")
            log.warning("sandbox.executor=ray rebuilds the tiny solver on each worker from its config: its "
                        "weights are the initial ones, not the trainer's")
        state = {k: v for k, v in vars(agent).items() if k != "model"}
        return AgentSpec("terminal", agent.name, model=config, state=state,
                         weights_version=getattr(model, "weights_version", None))
    ray = _ray()
    try:
        ray.cloudpickle.dumps(agent)
    except Exception as exc:  # noqa: BLE001 - any pickling failure
        raise TypeError(f"agent {getattr(agent, 'name', agent)!r} ({type(agent).__name__}) cannot be shipped to a "
                        f"Ray worker ({exc}); describe it in aes/sandbox/ray_executor.describe_agent") from None
    return AgentSpec("object", agent.name, obj=agent)


def _remaining(budget) -> BudgetConfig:
    """What is left of the driver's run budget, as limits for a worker's model."""
    if budget is None:
        return BudgetConfig()
    summary, cfg = budget.summary(), budget.cfg
    return BudgetConfig(
        max_usd=None if cfg.max_usd is None else max(0.0, cfg.max_usd - summary["cost_usd"]),
        max_tokens=None if cfg.max_tokens is None else max(0, cfg.max_tokens - summary["tokens"]))


def _charge(budget, usage: dict | None) -> None:
    if budget is None or not usage:
        return
    with budget._lock:
        budget.usd += usage.get("cost_usd", 0.0)
        budget.tokens += usage.get("tokens", 0)
        budget.calls += usage.get("model_calls", 0)
        budget.reasoning_usd += usage.get("reasoning_cost_usd", 0.0)
        for kind in budget.counts:  # the parts: reasoning, cache reads and writes
            budget.counts[kind] += usage.get(kind, 0)


# -- the worker side ------------------------------------------------------------------------------


def _config_key(cfg: SandboxConfig) -> str:
    return json.dumps(dataclasses.asdict(cfg), sort_keys=True, default=str)


def engine_for(node: dict, mapping: dict[str, str]) -> str | None:
    """The docker host ``sandbox.ray_node_docker_hosts`` gives the Ray node ``node`` (an entry of
    ``ray.nodes()``), None when no key matches (a resource, a ``label=value``, or the node's IP)."""
    resources = node.get("Resources") or {}
    labels = node.get("Labels") or {}
    for key, host in mapping.items():
        name, _, value = key.partition("=")
        if key in resources or key == node.get("NodeManagerAddress") or (value and labels.get(name) == value):
            return host
    return None


class _Node:
    """This worker process's view of its node: identity, engine, and a trial runner on it."""

    _lock = threading.Lock()
    _instances: dict[str, "_Node"] = {}

    @classmethod
    def get(cls, cfg: SandboxConfig) -> "_Node":
        key = _config_key(cfg)
        with cls._lock:
            if key not in cls._instances:
                cls._instances[key] = cls(cfg)
            return cls._instances[key]

    def __init__(self, cfg: SandboxConfig):
        ray = _ray()
        ctx = ray.get_runtime_context()
        self.node_id = ctx.get_node_id()
        self.job_id = ctx.get_job_id()
        me = next((n for n in ray.nodes() if n["NodeID"] == self.node_id), {})
        self.ip = me.get("NodeManagerAddress") or ray.util.get_node_ip_address()
        self.hostname = socket.gethostname()
        host = engine_for(me, cfg.ray_node_docker_hosts) or os.environ.get("DOCKER_HOST") or None
        # the engine is named explicitly: aes's bridge and engine watch are per docker_host
        self.cfg = dataclasses.replace(cfg, docker_host=host, executor="local")
        self.docker_host = host or DEFAULT_SOCKET
        docker_client.EXTRA_LABELS.update({LABEL_RAY_NODE: self.node_id, LABEL_RAY_JOB: self.job_id})
        self._runner = None

    def where(self) -> str:
        return f"Ray node {self.ip} ({self.hostname}, {self.node_id[:12]}), engine {self.docker_host}"

    @property
    def runner(self):
        """The trial runner on this node's engine (its reaper runs once per process)."""
        if self._runner is None:
            from aes.sandbox.bootstrap import image_exists
            from aes.sandbox.trial import TrialRunner

            try:
                runner = TrialRunner(self.cfg)
            except SandboxUnavailable as exc:
                raise SandboxUnavailable(f"{self.where()}: {exc}") from None
            if not image_exists(self.cfg):
                raise SandboxUnavailable(
                    f"{self.where()} has no {self.cfg.base_image} image: run `aes sandbox bootstrap` on that "
                    f"node (or `docker save {self.cfg.base_image} | docker load` into its engine)")
            self._runner = runner
        return self._runner

    def has_image(self, ref: str) -> bool:
        return self.runner.sandbox.builder._local_image_id(ref) is not None

    @contextlib.contextmanager
    def build_lock(self, digest: str):
        """One build of a given context at a time on this node (worker processes share the engine)."""
        import fcntl

        root = Path(tempfile.gettempdir()) / "aes-ray-locks"
        root.mkdir(parents=True, exist_ok=True)
        with open(root / f"{digest[:32]}.lock", "w") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def build(self, task: Task, digest: str) -> BuildResult:
        with self.build_lock(digest):
            return self.runner.sandbox.build(task)

    def info(self) -> dict:
        return {"node_id": self.node_id, "ip": self.ip, "hostname": self.hostname, "docker_host": self.docker_host,
                "pid": os.getpid()}


_models: OrderedDict[str, Any] = OrderedDict()
_models_lock = threading.Lock()


def _model(config, budget: BudgetConfig):
    """The worker's client for ``config`` (built once per worker process), with a fresh budget."""
    from aes.models import RunBudget, build_model

    key = json.dumps(dataclasses.asdict(config), sort_keys=True, default=str)
    with _models_lock:
        model = _models.pop(key, None)
        if model is None:
            model = build_model(config, RunBudget(budget))
        _models[key] = model
        while len(_models) > _MODEL_CACHE:
            _, old = _models.popitem(last=False)
            with contextlib.suppress(Exception):
                old.close()
    model.budget = RunBudget(budget)
    return model


def _rebuild_agent(spec: AgentSpec, budget: BudgetConfig):
    if spec.kind == "oracle":
        return OracleAgent(), None
    if spec.kind == "nop":
        return NopAgent(), None
    if spec.kind == "object":
        return spec.obj, None
    if spec.kind == "terminal":
        from aes.agents import TerminalAgent

        model = _model(spec.model, budget)
        if spec.weights_version is not None and hasattr(model, "_weights_version"):
            model._weights_version = spec.weights_version
        if getattr(model, "engine", None) == "vllm" and hasattr(model, "server_versions"):
            model.server_versions = True  # follow the updates pushed while the attempt runs (vllm_reload)
        agent = TerminalAgent.__new__(TerminalAgent)
        agent.__dict__.update(spec.state)
        agent.model = model
        return agent, model
    raise ValueError(f"unknown agent kind {spec.kind!r}")


def _materialise(task: Task, bundle: TaskBundle) -> Task:
    return dataclasses.replace(task, path=unpack_task(bundle))


def trial_on_node(cfg: SandboxConfig, task: Task, bundle: TaskBundle, spec: AgentSpec, image: str | None,
                  budget: BudgetConfig, keep_logs: bool = False) -> dict:
    """A Ray task: one trial on this node (build here, run, verify). Plain data back (the trial's
    kept logs as a tar, when ``keep_logs``)."""
    started = time.monotonic()
    node = _Node.get(cfg)
    task = _materialise(task, bundle)
    agent, model = _rebuild_agent(spec, budget)
    runner = node.runner
    timings: dict[str, float] = {}
    if not (image and image.startswith(f"{IMAGE_REPO}:") and node.has_image(image)):
        build = node.build(task, bundle.digest)
        timings["build"] = build.seconds
        if build.image is None:
            result = TrialResult(task=task.name, agent=agent.name, outcome=Outcome.BUILD_FAILED,
                                 detail=str(build.reason), timings=timings)
            return {"result": result.to_dict(), "node": node.info(), "usage": None,
                    "seconds": time.monotonic() - started}
        image = build.image
    logs_tar = None
    with tempfile.TemporaryDirectory(prefix="aes-trial-logs-") as scratch:
        try:
            result = runner.run(task, agent, image, logs_to=Path(scratch) / "logs" if keep_logs else None)
        finally:
            runner.sandbox.drain()  # this trial's containers are gone before the task returns
        if result.logs.get("dir"):
            buf = io.BytesIO()
            with tarfile.open(fileobj=buf, mode="w") as tar:
                tar.add(result.logs["dir"], arcname=".")
            logs_tar = buf.getvalue()
    result.timings = {**timings, **result.timings}
    result.agent_info = {**result.agent_info, "executor": {"kind": "ray", **node.info()}}
    return {"result": result.to_dict(), "logs_tar": logs_tar, "node": node.info(),
            "usage": model.budget.summary() if model is not None else None,
            "seconds": time.monotonic() - started}


def build_on_node(cfg: SandboxConfig, task: Task, bundle: TaskBundle) -> tuple[BuildResult, dict]:
    """A Ray task: build ``task``'s image on this node (cached here)."""
    node = _Node.get(cfg)
    return node.build(_materialise(task, bundle), bundle.digest), node.info()


def survey_node(cfg: SandboxConfig, dead_nodes: list[str]) -> dict:
    """A Ray task pinned to one node: connect to its engine (which reaps containers of dead aes
    processes there), remove containers of dead Ray nodes, check the base image."""
    node = _Node.get(cfg)
    report = {**node.info(), "ok": False, "error": None, "removed_dead_nodes": 0}
    try:
        runner = node.runner
        report["removed_dead_nodes"] = remove_labelled(runner.sandbox.client, LABEL_RAY_NODE, dead_nodes)
        report["ok"] = True
    except Exception as exc:  # noqa: BLE001 - reported, the driver decides
        report["error"] = str(exc)
    return report


def sweep_job_on_node(cfg: SandboxConfig, job_id: str) -> int:
    """A Ray task pinned to one node: remove what the job ``job_id`` left on this node's engine."""
    node = _Node.get(cfg)
    try:
        client = node.runner.sandbox.client
    except Exception:  # noqa: BLE001 - nothing to sweep on a node without an engine
        return 0
    return remove_labelled(client, LABEL_RAY_JOB, [job_id])


def remove_labelled(client, label: str, values: list[str]) -> int:
    """Remove aes containers whose ``label`` is one of ``values`` from the engine of ``client``."""
    import docker.errors

    removed = 0
    for value in values:
        for info in client.api.containers(all=True, filters={"label": [f"{LABEL_MANAGED}=true", f"{label}={value}"]}):
            try:
                client.api.remove_container(info["Id"], force=True, v=True)
                removed += 1
            except docker.errors.NotFound:
                pass
            except docker.errors.APIError as exc:
                if "already in progress" not in str(exc):
                    log.warning("could not remove container %s: %s", info["Id"][:12], exc)
    return removed


@functools.cache
def _remote():
    ray = _ray()
    return {fn.__name__: ray.remote(fn) for fn in (trial_on_node, build_on_node, survey_node, sweep_job_on_node)}


# -- the driver side ------------------------------------------------------------------------------


class RaySandbox:
    """``trials.sandbox`` of the Ray executor: ``build`` runs on a Ray node; everything else (the
    proposer's own containers: ``run_container``, ``through_restarts``, ...) uses the driver's engine."""

    def __init__(self, runner: "RayTrialRunner"):
        self._runner = runner
        self._local = None
        self._local_lock = threading.Lock()

    def build(self, task: Task) -> BuildResult:
        return self._runner.build(task)

    @property
    def local(self):
        """A Docker sandbox on the driver's engine (created on first use)."""
        with self._local_lock:
            if self._local is None:
                from aes.sandbox.docker_backend import DockerSandbox

                self._local = DockerSandbox(dataclasses.replace(self._runner.cfg, executor="local"))
            return self._local

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.local, name)


class RayTrialRunner:
    """The trial runner of ``sandbox.executor=ray``: the interface of
    :class:`~aes.sandbox.trial.TrialRunner` (``run``, ``sandbox.build``, ``cfg``) over a Ray cluster."""

    def __init__(self, cfg: SandboxConfig):
        ray = _ray()
        self.cfg = cfg
        if not ray.is_initialized():
            address = cfg.ray_address or os.environ.get("RAY_ADDRESS")
            ray.init(address=address, include_dashboard=False, log_to_driver=True,
                     configure_logging=False, ignore_reinit_error=True)
        self._ray = ray
        self.job_id = ray.get_runtime_context().get_job_id()
        self.sandbox = RaySandbox(self)
        self._bundles: OrderedDict[tuple, Any] = OrderedDict()
        self._bundles_lock = threading.Lock()
        self._engines: dict[str, dict] = {}
        """Ray node id -> what its worker reported (ip, hostname, docker_host)."""
        self._cleaned: set[str] = set()
        self._sweep_lock = threading.Lock()
        self._swept_at = 0.0
        self._largest: tuple[float, float] | None = None
        self._largest_at = 0.0
        self._closed = False
        self.nodes = self.survey()
        atexit.register(self.close)

    # -- the cluster ---------------------------------------------------------------------------
    def _alive(self) -> list[dict]:
        return [n for n in self._ray.nodes() if n.get("Alive")]

    def _eligible(self, node: dict) -> bool:
        """Can a trial land on ``node`` (its resources include sandbox.ray_resources)?"""
        resources = node.get("Resources") or {}
        return all(resources.get(k, 0) >= v for k, v in self.cfg.ray_resources.items()) and resources.get("CPU", 0) > 0

    def survey(self) -> list[dict]:
        """Every node a trial may land on: reap its engine, check it (engine and base image).
        :class:`SandboxUnavailable` names the nodes that cannot run trials."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        nodes = self._ray.nodes()
        dead = [n["NodeID"] for n in nodes if not n.get("Alive")]
        eligible = [n for n in nodes if n.get("Alive") and self._eligible(n)]
        if not eligible:
            raise SandboxUnavailable(
                f"no node of the Ray cluster can take trials (each needs CPUs and {dict(self.cfg.ray_resources)}); "
                f"nodes: {[n.get('Resources') for n in nodes if n.get('Alive')]}")
        remote = _remote()["survey_node"]
        refs = {n["NodeID"]: remote.options(
            num_cpus=0, max_retries=0,
            scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)).remote(self.cfg, dead)
            for n in eligible}
        ready, _ = self._ray.wait(list(refs.values()), num_returns=len(refs), timeout=SURVEY_TIMEOUT_SEC)
        reports, bad = [], []
        for node_id, ref in refs.items():
            if ref not in ready:
                bad.append(f"node {node_id[:12]}: no answer within {SURVEY_TIMEOUT_SEC:.0f} s")
                continue
            report = self._ray.get(ref)
            reports.append(report)
            self._engines[node_id] = report
            if not report["ok"]:
                bad.append(report["error"])
        if bad:
            raise SandboxUnavailable("sandbox.executor=ray: some nodes cannot run trials:\n  " + "\n  ".join(bad))
        for report in reports:
            log.info("ray executor: node %s (%s) runs trials on %s", report["ip"], report["node_id"][:12],
                     report["docker_host"])
        return reports

    def _largest_node(self) -> tuple[float, float]:
        """(CPUs, memory bytes) of the largest node that can take trials (refreshed every 30 s)."""
        now = time.monotonic()
        if self._largest is None or now - self._largest_at > 30:
            nodes = [n for n in self._alive() if self._eligible(n)] or self._alive()
            self._largest = (max((n["Resources"].get("CPU", 0.0) for n in nodes), default=1.0),
                             max((n["Resources"].get("memory", 0.0) for n in nodes), default=0.0))
            self._largest_at = now
        return self._largest

    def trial_resources(self, task: Task) -> dict:
        """The Ray resources one trial of ``task`` asks for."""
        cpus_max, memory_max = self._largest_node()
        if self.cfg.ray_cpus_per_trial is not None:
            cpus = self.cfg.ray_cpus_per_trial
        else:
            cpus = min(task.spec.cpus or self.cfg.default_cpus, self.cfg.max_cpus)
        memory_mb = self.cfg.ray_memory_mb_per_trial
        if memory_mb is None:
            memory_mb = min(task.spec.memory_mb or self.cfg.default_memory_mb, self.cfg.max_memory_mb)
        options: dict[str, Any] = {"num_cpus": min(cpus, cpus_max)}
        if memory_mb:
            memory = memory_mb * 2**20
            options["memory"] = int(min(memory, memory_max) if memory_max else memory)
        if self.cfg.ray_resources:
            options["resources"] = dict(self.cfg.ray_resources)
        return options

    # -- tasks and agents ------------------------------------------------------------------------
    def _bundle(self, task: Task):
        """(digest, object ref) of the task's files; packed and put once per version of the files."""
        path = Path(task.path).resolve()
        key = (str(path), _signature(path))
        with self._bundles_lock:
            if key in self._bundles:
                self._bundles.move_to_end(key)
                return self._bundles[key]
        bundle = pack_task(path)
        entry = (bundle.digest, self._ray.put(bundle))
        with self._bundles_lock:
            self._bundles[key] = entry
            while len(self._bundles) > _BUNDLE_CACHE:
                self._bundles.popitem(last=False)
        return entry

    def build(self, task: Task) -> BuildResult:
        """Build ``task``'s image on a Ray node (cached there); its verdict is admission's check 2."""
        _, ref = self._bundle(task)
        options = {"num_cpus": min(1.0, self._largest_node()[0]), "max_retries": self.cfg.ray_max_retries}
        if self.cfg.ray_resources:
            options["resources"] = dict(self.cfg.ray_resources)
        try:
            result, node = self._get(_remote()["build_on_node"].options(
                name=f"aes-build:{task.name}"[:200], **options).remote(self.cfg, task, ref))
        except _SystemFailure as exc:  # infrastructure, never the task's verdict (as a local engine loss)
            raise SandboxError(f"{task.name}: image build lost on the Ray cluster: {exc}") from None
        self._engines[node["node_id"]] = node
        return result

    def run(self, task: Task, agent, image: str | None = None, logs_to: Path | None = None) -> TrialResult:
        """One trial of ``task`` by ``agent`` on a node of the cluster (``image``: a hint); its kept
        logs come back with it into ``logs_to``."""
        spec = describe_agent(agent)
        _, ref = self._bundle(task)
        budget = getattr(getattr(agent, "model", None), "budget", None)
        started = time.monotonic()
        try:
            payload = self._get(_remote()["trial_on_node"].options(
                name=f"aes-trial:{task.name}"[:200], max_retries=self.cfg.ray_max_retries,
                **self.trial_resources(task)).remote(self.cfg, task, ref, spec, image, _remaining(budget),
                                                    logs_to is not None))
        except _SystemFailure as exc:
            self.sweep_dead_nodes()
            return TrialResult(task=task.name, agent=agent.name, outcome=Outcome.SANDBOX_ERROR,
                               detail=f"the trial was lost on the Ray cluster after {self.cfg.ray_max_retries} "
                                      f"retries (sandbox.ray_max_retries): {exc}",
                               timings={"ray_total": time.monotonic() - started})
        _charge(budget, payload["usage"])
        self._engines[payload["node"]["node_id"]] = payload["node"]
        data = dict(payload["result"])
        data["outcome"] = Outcome(data["outcome"])
        result = TrialResult(**data)
        if payload.get("logs_tar") and logs_to is not None:
            dest = Path(logs_to)
            dest.mkdir(parents=True, exist_ok=True)
            with tarfile.open(fileobj=io.BytesIO(payload["logs_tar"])) as tar:
                tar.extractall(dest, filter="data")
            result.logs = {**result.logs, "dir": str(dest)}
        result.timings["ray_dispatch"] = max(0.0, time.monotonic() - started - payload["seconds"])
        self.sweep_dead_nodes()
        return result

    def _get(self, ref):
        """``ray.get``: a task's own exception is raised as itself; a lost task as :class:`_SystemFailure`."""
        from ray.exceptions import RayError, RayTaskError

        try:
            return self._ray.get(ref)
        except RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, BaseException):
                raise cause from exc
            raise
        except RayError as exc:
            raise _SystemFailure(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from exc

    # -- cleanup ---------------------------------------------------------------------------------
    def sweep_dead_nodes(self, force: bool = False) -> int:
        """Remove the containers of Ray nodes found dead from their engines, where the driver can
        reach them (TCP/SSH engines; sockets on the driver's machine). Returns the count removed."""
        now = time.monotonic()
        if not force and now - self._swept_at < _SWEEP_EVERY_SEC:
            return 0
        with self._sweep_lock:
            self._swept_at = now
            try:
                nodes = self._ray.nodes()
                here = self._ray.util.get_node_ip_address()
            except Exception:  # noqa: BLE001 - the cluster is gone: nothing to ask
                return 0
            removed = 0
            for node in nodes:
                node_id = node["NodeID"]
                known = self._engines.get(node_id)
                if node.get("Alive") or known is None or (node_id in self._cleaned and not force):
                    continue
                self._cleaned.add(node_id)
                host = known["docker_host"]
                if host.startswith("unix://") and known.get("ip") != here:
                    log.warning("Ray node %s died; its engine %s is on another machine: its containers stop "
                                "after their longest trial and are removed when the node comes back",
                                known.get("ip"), host)
                    continue
                try:
                    import docker

                    client = docker.DockerClient(base_url=host, timeout=15)
                    try:
                        count = remove_labelled(client, LABEL_RAY_NODE, [node_id])
                    finally:
                        client.close()
                except Exception as exc:  # noqa: BLE001 - an engine that is gone too
                    log.warning("Ray node %s died and its engine %s cannot be reached (%s): its containers "
                                "stop after their longest trial", known.get("ip"), host, exc)
                    continue
                removed += count
                log.warning("Ray node %s (%s) died: its trials run again elsewhere; removed %d of its "
                            "container(s) from %s", known.get("ip"), node_id[:12], count, host)
            return removed

    def close(self) -> None:
        """Remove what this run left on any node (dead nodes' engines where reachable); idempotent."""
        if self._closed:
            return
        self._closed = True
        if not self._ray.is_initialized():
            return
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        self.sweep_dead_nodes(force=True)
        try:
            remote = _remote()["sweep_job_on_node"]
            refs = [remote.options(num_cpus=0, max_retries=0, scheduling_strategy=NodeAffinitySchedulingStrategy(
                n["NodeID"], soft=False)).remote(self.cfg, self.job_id) for n in self._alive() if self._eligible(n)]
            ready, _ = self._ray.wait(refs, num_returns=len(refs), timeout=60)
            swept = sum(self._ray.get(r) for r in ready)
            if swept:
                log.info("ray executor: removed %d leftover container(s) of this run", swept)
        except Exception as exc:  # noqa: BLE001 - best effort at exit
            log.warning("ray executor: could not sweep the nodes at close: %s", exc)
        if self.sandbox._local is not None:
            self.sandbox._local.drain()


class _SystemFailure(InfrastructureError):
    """Ray lost the task (node or worker died past the retries, object lost, ...)."""
