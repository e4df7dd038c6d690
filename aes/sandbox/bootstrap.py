"""Build the local base image without a registry: debootstrap a Debian root, import it.

Registries are unreachable on our machines and on many air-gapped clusters, so
``FROM python:3.12-slim`` cannot be pulled there. ``aes sandbox bootstrap`` builds
``sandbox.base_image`` from the Debian mirror the host already uses, with python3,
pip, venv and pytest, so tasks build and verify offline. The host's extra CA
certificates are installed in it, so ``pip`` and ``apt`` work inside later builds
behind a TLS-intercepting proxy.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from aes.config import SandboxConfig
from aes.sandbox.docker_client import LABEL_IMAGE, connect

log = logging.getLogger(__name__)

CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
DEFAULT_MIRROR = "http://deb.debian.org/debian"


class BootstrapError(RuntimeError):
    """The base image could not be built; the message says what to install or set."""


def debian_mirror(sources_dir: Path = Path("/etc/apt")) -> str:
    """The Debian mirror of the host's apt sources (deb822 or one-line format)."""
    files = [sources_dir / "sources.list", *sorted((sources_dir / "sources.list.d").glob("*"))]
    for path in files:
        try:
            text = path.read_text()
        except OSError:
            continue
        for url in re.findall(r"(?:URIs:|^deb)\s+(\S+)", text, flags=re.MULTILINE):
            if re.search(r"/debian/?$", url):
                return url.rstrip("/")
    return DEFAULT_MIRROR


def image_exists(cfg: SandboxConfig) -> bool:
    import docker.errors

    try:
        connect(cfg).images.get(cfg.base_image)
        return True
    except docker.errors.ImageNotFound:
        return False


def bootstrap_base_image(cfg: SandboxConfig, force: bool = False) -> str:
    """Build ``cfg.base_image`` unless it exists; returns the image id."""
    client = connect(cfg)
    if not force and image_exists(cfg):
        image = client.images.get(cfg.base_image)
        log.info("base image %s exists (%s); use --force to rebuild", cfg.base_image, image.short_id)
        return image.id
    if shutil.which("debootstrap") is None:
        raise BootstrapError("debootstrap is not installed: run `apt-get install -y debootstrap`")
    if os.geteuid() != 0:
        raise BootstrapError("debootstrap needs root: run `sudo aes sandbox bootstrap`")
    mirror = cfg.bootstrap_mirror or debian_mirror()
    with tempfile.TemporaryDirectory(prefix="aes-rootfs-") as tmp:
        rootfs = Path(tmp) / "rootfs"
        _debootstrap(rootfs, cfg, mirror)
        _configure(rootfs, Path(cfg.ca_cert_dir))
        archive = Path(tmp) / "rootfs.tar"
        subprocess.run(["tar", "-C", str(rootfs), "-cf", str(archive), "."], check=True)
        repository, _, tag = cfg.base_image.rpartition(":")
        if not repository:
            repository, tag = cfg.base_image, "latest"
        changes = [
            "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "ENV LANG=C.UTF-8",
            f"ENV PIP_CERT={CA_BUNDLE}",
            f"ENV REQUESTS_CA_BUNDLE={CA_BUNDLE}",
            f"ENV SSL_CERT_FILE={CA_BUNDLE}",
            "ENV PIP_DISABLE_PIP_VERSION_CHECK=1",
            f"LABEL {LABEL_IMAGE}=base",
            'CMD ["bash"]',
        ]
        client.api.import_image_from_file(
            str(archive), repository=repository, tag=tag, changes=changes
        )
    image = client.images.get(cfg.base_image)
    log.info("built base image %s (%s) from %s", cfg.base_image, image.short_id, mirror)
    return image.id


def _debootstrap(rootfs: Path, cfg: SandboxConfig, mirror: str) -> None:
    cmd = ["debootstrap", "--variant=minbase"]
    if cfg.bootstrap_packages:
        cmd.append("--include=" + ",".join(cfg.bootstrap_packages))
    cmd += [cfg.bootstrap_suite, str(rootfs), mirror]
    log.info("running %s (about a minute)", " ".join(cmd))
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-15:])
        raise BootstrapError(f"debootstrap failed (exit {proc.returncode}) from {mirror}:\n{tail}")


def _configure(rootfs: Path, ca_dir: Path) -> None:
    """Trust the host's extra CAs, let pip install system-wide, drop package caches."""
    certs = sorted(ca_dir.glob("*.crt")) if ca_dir.is_dir() else []
    target = rootfs / "usr/local/share/ca-certificates"
    target.mkdir(parents=True, exist_ok=True)
    for cert in certs:
        shutil.copy2(cert, target / cert.name)
    if certs:
        subprocess.run(["chroot", str(rootfs), "update-ca-certificates"], check=True,
                       capture_output=True)
    # python:*-slim lets pip install into the system interpreter; the substitute must too.
    for marker in rootfs.glob("usr/lib/python3*/EXTERNALLY-MANAGED"):
        marker.unlink()
    for cache in ("var/cache/apt/archives", "var/lib/apt/lists"):
        for entry in (rootfs / cache).glob("*"):
            if entry.is_file():
                entry.unlink()
