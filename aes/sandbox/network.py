"""A bridge network from which builds and trials reach the internet but not the host.

Docker's default bridge lets every container (and every image build) connect to any service
listening on the host: the bridge gateway and the host's other addresses are local destinations.
aes puts builds, trials and proposer sandboxes with network access on its own bridge (inter-
container traffic off) and rejects, in the host's INPUT chain, every packet that arrives from that
bridge: the host's own services (a model server, a database, the engine's API on TCP) are out of
reach, while forwarded traffic to the package index and the Debian mirror is untouched.

This needs the engine on this host and root (iptables); otherwise aes warns once and runs with
the network unprotected (:func:`host_isolated` says which).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import threading

import docker.errors

from aes.config import SandboxConfig
from aes.sandbox.docker_client import ENGINE_ERRORS

log = logging.getLogger(__name__)

_DONE: dict[tuple[str | None, str], tuple[str, bool]] = {}
_LOCK = threading.Lock()


def bridge_name(cfg: SandboxConfig) -> str:
    """The Linux bridge of aes's network for this engine (15 characters at most)."""
    # the engine DOCKER_HOST names counts too: two engines on one host (Docker and Podman) must
    # not share a bridge; with neither set the name is the one aes always used
    host = cfg.docker_host or os.environ.get("DOCKER_HOST") or None
    return "aes" + hashlib.sha256(f"{host}|{cfg.network_name}".encode()).hexdigest()[:8]


def _local_engine(cfg: SandboxConfig) -> bool:
    host = cfg.docker_host or os.environ.get("DOCKER_HOST") or "unix://"
    return host.startswith("unix://")


def _firewall(bridge: str) -> str | None:
    """Reject what arrives at the host from ``bridge``; None on success, else why not."""
    if os.geteuid() != 0:
        return "aes is not running as root"
    done = False
    for tool in ("iptables", "ip6tables"):
        binary = shutil.which(tool)
        if binary is None:
            continue
        rules = [["INPUT", "-i", bridge, "-j", "REJECT"]]
        if tool == "iptables":
            # no traffic between containers on the bridge: Docker's enable_icc=false adds this rule
            # itself; Podman ignores that option, so aes adds it (a no-op where Docker did)
            rules.append(["FORWARD", "-i", bridge, "-o", bridge, "-j", "DROP"])
        refused = None
        for rule in rules:
            check = subprocess.run([binary, "-w", "-C", *rule], capture_output=True)
            if check.returncode != 0:
                added = subprocess.run([binary, "-w", "-I", *rule], capture_output=True, text=True)
                if added.returncode != 0:
                    refused = f"{tool} refused the rule: {added.stderr.strip()}"
                    break
        if refused:
            if tool == "iptables":
                return refused
            continue
        done = done or tool == "iptables"
    return None if done else "iptables is not installed"


def _podman(client) -> bool:
    """Whether the engine is Podman's Docker-compatible service."""
    try:
        components = client.version().get("Components") or []
    except (docker.errors.APIError, *ENGINE_ERRORS):
        return False
    return any("podman" in str(c.get("Name", "")).lower() for c in components)


def _reported_bridge(client, network) -> str | None:
    """The Linux bridge of an existing network as the engine reports it (Docker: its options;
    Podman, whose Docker API leaves them empty: its own API), None if it says none."""
    name = (network.attrs.get("Options") or {}).get("com.docker.network.bridge.name")
    if name:
        return name
    api = client.api
    try:
        response = api.get(f"{api.base_url}/v4.0.0/libpod/networks/{network.name}/json", timeout=10)
        if response.status_code == 200:
            return response.json().get("network_interface") or None
    except Exception:  # noqa: BLE001 - not Podman
        pass
    return None


def isolated_network(client, cfg: SandboxConfig) -> str:
    """The network name for builds and trials with network access (created once per engine)."""
    if not cfg.isolate_host:
        return "bridge"
    key = (cfg.docker_host, cfg.network_name)
    with _LOCK:
        if key in _DONE:
            return _DONE[key][0]
        bridge = bridge_name(cfg)
        try:
            existing = client.networks.get(cfg.network_name)
            # a network made earlier keeps its bridge: firewall that one
            bridge = _reported_bridge(client, existing) or bridge
        except docker.errors.NotFound:
            try:
                client.networks.create(cfg.network_name, driver="bridge", labels={"aes.managed.network": "true"},
                                       options={"com.docker.network.bridge.name": bridge,
                                                "com.docker.network.bridge.enable_icc": "false"})
            except docker.errors.APIError as exc:
                if "already exists" not in str(exc):
                    raise
        why = _firewall(bridge) if _local_engine(cfg) else "the Docker engine is on another host"
        if why is None and _podman(client):
            # its Docker-compatible /build ignores networkmode (4.3: even "none"): a RUN step sees the
            # host's network namespace, which no rule on aes's bridge can protect
            why = "Podman's Docker API runs image builds in the host's network namespace"
        if why:
            log.warning("builds and trials can reach services on the engine's host (%s): run aes as root on "
                        "the engine's host, or firewall the %s bridge yourself", why, bridge)
        _DONE[key] = (cfg.network_name, why is None)
        return cfg.network_name


def host_isolated(cfg: SandboxConfig) -> bool:
    """Whether the host is firewalled from aes's network (after :func:`isolated_network`)."""
    return _DONE.get((cfg.docker_host, cfg.network_name), ("", False))[1]
