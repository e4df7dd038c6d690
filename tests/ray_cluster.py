"""A throwaway two-node Ray cluster on this machine, the second node on a second Docker engine.

Used by tests/test_ray_executor.py and ``benchmarks/rollout.py --executors``. Everything here is
started by the caller and stopped by it: the Ray nodes (``ray start --block`` in their own
session; stopping or killing a node ends every process below it, Ray's workers included, which
put themselves in their own process groups), the second ``dockerd`` (own socket, data root,
exec root, pid file, its own default bridge, no iptables) and its directory. Nothing else is touched:
no ``ray stop``, which would end every Ray node of the machine.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RAY_BIN = Path(sys.executable).with_name("ray")
# Fast failure detection: a killed node is declared dead in a few seconds (defaults: ~30 s).
FAST_HEALTH_CHECK = {"RAY_health_check_initial_delay_ms": "1000", "RAY_health_check_period_ms": "1000",
                     "RAY_health_check_timeout_ms": "1000", "RAY_health_check_failure_threshold": "3"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (read from /proc; children first found, pid excluded)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _kill(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


class RayNode:
    """One ``ray start --block`` process and everything it starts."""

    def __init__(self, args: list[str], env: dict[str, str], log: Path):
        self.log = log
        self.proc = subprocess.Popen([str(RAY_BIN), "start", "--block", *args], env=env, start_new_session=True,
                                     stdout=open(log, "wb"), stderr=subprocess.STDOUT)

    def kill(self) -> None:
        """Die like a machine does: SIGKILL to every process of the node at once."""
        pids = [self.proc.pid, *descendants(self.proc.pid)]
        _kill(pids, signal.SIGKILL)
        self.proc.wait(10)
        _wait_gone(pids, 10)

    def stop(self, grace: float = 20.0) -> None:
        if self.proc.poll() is not None:
            return
        pids = [self.proc.pid, *descendants(self.proc.pid)]
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(grace)
        except subprocess.TimeoutExpired:
            pass
        if not _wait_gone(pids, grace):
            _kill(pids + descendants(self.proc.pid), signal.SIGKILL)
            with_timeout = _wait_gone(pids, 10)
            assert with_timeout, f"Ray node processes survived SIGKILL: {pids}"
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _wait_gone(pids: list[int], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(_alive(p) for p in pids):
            return True
        time.sleep(0.2)
    return not any(_alive(p) for p in pids)


class SecondEngine:
    """A second ``dockerd`` beside the machine's own, in ``root`` (socket, data, exec root)."""

    def __init__(self, root: Path, base_image: str | None = None):
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.sock = root / "docker.sock"
        self.host = f"unix://{self.sock}"
        dockerd = shutil.which("dockerd")
        if dockerd is None:
            raise RuntimeError("dockerd is not installed")
        # Its own default bridge, made here: ``--bridge none`` would make this dockerd delete the
        # machine engine's docker0 (the default bridge name), breaking every container after it.
        self.bridge = f"aesse{os.getpid() % 100000}"
        subprocess.run(["ip", "link", "add", self.bridge, "type", "bridge"], capture_output=True)
        self.proc = subprocess.Popen(
            [dockerd, "--host", self.host, "--data-root", str(root / "data"), "--exec-root", str(root / "exec"),
             "--pidfile", str(root / "docker.pid"), "--bridge", self.bridge, "--iptables=false", "--ip-masq=false",
             "--default-address-pool", "base=10.213.0.0/16,size=24"],
            stdout=open(root / "dockerd.log", "wb"), stderr=subprocess.STDOUT, start_new_session=True)
        self.client = None
        import docker

        deadline = time.monotonic() + 60
        while True:
            try:
                self.client = docker.DockerClient(base_url=self.host, timeout=30)
                self.client.ping()
                break
            except Exception:  # noqa: BLE001 - not up yet
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"second dockerd did not start: {(root / 'dockerd.log').read_text()[-2000:]}")
                time.sleep(0.3)
        if base_image:
            self.load_from_default(base_image)

    def load_from_default(self, image: str) -> None:
        """Copy ``image`` from the machine's default engine (``docker save | docker load``)."""
        env = {k: v for k, v in os.environ.items() if k != "DOCKER_HOST"}
        save = subprocess.Popen(["docker", "save", image], stdout=subprocess.PIPE, env=env)
        load = subprocess.run(["docker", "-H", self.host, "load"], stdin=save.stdout, capture_output=True, env=env)
        save.stdout.close()
        if save.wait() != 0 or load.returncode != 0:
            raise RuntimeError(f"could not copy {image} to the second engine: {load.stderr.decode()[-500:]}")

    def aes_containers(self) -> list[dict]:
        return self.client.api.containers(all=True, filters={"label": "aes.managed=true"})

    def _unfirewall(self) -> None:
        """Drop the INPUT rule aes added for its bridge on this engine (the bridge goes with it)."""
        from aes.config import SandboxConfig
        from aes.sandbox.network import bridge_name

        bridge = bridge_name(SandboxConfig(docker_host=self.host))
        for tool in ("iptables", "ip6tables"):
            if shutil.which(tool):
                subprocess.run([tool, "-w", "-D", "INPUT", "-i", bridge, "-j", "REJECT"], capture_output=True)

    def stop(self) -> None:
        if self.client is not None:
            for info in self.client.api.containers(all=True):
                try:
                    self.client.api.remove_container(info["Id"], force=True)
                except Exception:  # noqa: BLE001
                    pass
            self.client.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                _kill([self.proc.pid, *descendants(self.proc.pid)], signal.SIGKILL)
                self.proc.wait(10)
        self._unfirewall()
        subprocess.run(["ip", "link", "delete", self.bridge], capture_output=True)
        subprocess.run(["umount", "-R", "-l", str(self.root / "data")], capture_output=True)
        shutil.rmtree(self.root, ignore_errors=True)


class TwoNodeCluster:
    """Head ``node_a`` (1 CPU, the machine's engine) + worker ``node_b`` (2 CPUs, a second engine)."""

    def __init__(self, base_image: str = "aes-base:bookworm", head_cpus: int = 1, worker_cpus: int = 2,
                 second_engine: bool = True):
        self.dir = Path(tempfile.mkdtemp(prefix="aes-ray-"))
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.engine: SecondEngine | None = None
        self.head: RayNode | None = None
        self.worker: RayNode | None = None
        try:
            if second_engine:
                self.engine = SecondEngine(self.dir / "engine", base_image)
            env = {k: v for k, v in os.environ.items() if k not in ("DOCKER_HOST", "RAY_ADDRESS")}
            (self.dir / "tmp").mkdir()  # the nodes' caches (unpacked tasks, build locks) go with the cluster
            env.update(RAY_DISABLE_USAGE_STATS="1", TMPDIR=str(self.dir / "tmp"), **FAST_HEALTH_CHECK)
            self.head = RayNode(["--head", f"--port={self.port}", f"--num-cpus={head_cpus}",
                                 "--resources=" + json.dumps({"node_a": 1}), "--include-dashboard=false",
                                 "--disable-usage-stats", f"--temp-dir={self.dir / 'ray'}",
                                 f"--node-manager-port={free_port()}", f"--object-manager-port={free_port()}"],
                                env, self.dir / "head.log")
            worker_env = dict(env, **({"DOCKER_HOST": self.engine.host} if self.engine else {}))
            self.worker = RayNode([f"--address={self.address}", f"--num-cpus={worker_cpus}",
                                   "--resources=" + json.dumps({"node_b": 1}),
                                   f"--node-manager-port={free_port()}", f"--object-manager-port={free_port()}"],
                                  worker_env, self.dir / "worker.log")
            self._wait_nodes(2)
        except BaseException:
            self.stop()
            raise

    def _wait_nodes(self, n: int, timeout: float = 90) -> None:
        """Connect this process to the cluster (``ray.init``) and wait for ``n`` live nodes."""
        import ray

        deadline = time.monotonic() + timeout
        while not ray.is_initialized():
            try:
                ray.init(address=self.address, log_to_driver=False, configure_logging=False)
            except (ConnectionError, RuntimeError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        while time.monotonic() < deadline:
            if len([x for x in ray.nodes() if x.get("Alive")]) >= n:
                return
            time.sleep(0.3)
        logs = "\n".join(p.read_text()[-1500:] for p in self.dir.glob("*.log"))
        raise RuntimeError(f"the Ray cluster did not reach {n} node(s) in {timeout:.0f} s:\n{logs}")

    def node_ids(self) -> dict[str, str]:
        """{"node_a": id, "node_b": id} of the live nodes."""
        import ray

        return {name: n["NodeID"] for n in ray.nodes() if n.get("Alive")
                for name in ("node_a", "node_b") if name in n.get("Resources", {})}

    def stop(self) -> None:
        """Disconnect, stop both nodes and the second engine, remove the cluster's directory."""
        import ray

        if ray.is_initialized():
            ray.shutdown()
        for node in (self.worker, self.head):
            if node is not None:
                node.stop()
        if self.engine is not None:
            self.engine.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
