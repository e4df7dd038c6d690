"""Copies of tasks that Harbor's own runner can execute on this machine.

Harbor pulls ``FROM`` images itself and enforces ``no-network`` with a sidecar whose image
it must pull; with no registry reachable it can do neither. The copy builds from the image
aes itself would use (the local substitute of an unpullable base) and has a public
network, so Harbor runs the very same environment aes runs (for compatibility checks and
side-by-side benchmarks). Its image also stops on SIGKILL: Harbor keeps each container alive with
``sh -c "sleep infinity"``, which as PID 1 ignores the SIGTERM of ``docker compose down``, so every
trial's teardown waited out Docker's 10-second stop timeout (the reward is written before that).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import tomlkit

from aes.sandbox.images import ImageBuilder


class CopyError(RuntimeError):
    """A base image of the task cannot be resolved on this machine."""


def _make_public(table: Any) -> None:
    """Set every ``network_mode`` (task-wide and per phase) to public, recursively."""
    if isinstance(table, dict):
        if "network_mode" in table:
            table["network_mode"] = "public"
            table.pop("allowed_hosts", None)
        if "allow_internet" in table:  # Harbor's deprecated spelling
            table["allow_internet"] = True
        for value in list(table.values()):
            _make_public(value)
    elif isinstance(table, list):
        for value in table:
            _make_public(value)


def harbor_copy(src: Path, dst: Path, builder: ImageBuilder) -> None:
    """Copy task ``src`` to ``dst`` with aes's base images and a public network."""
    shutil.copytree(src, dst, symlinks=True)
    dockerfile = dst / "environment" / "Dockerfile"
    if dockerfile.is_file():
        text, _, _, failure = builder.rewrite_from(dockerfile.read_text(encoding="utf-8"))
        if failure is not None:
            raise CopyError(f"{src.name}: {failure}")
        dockerfile.write_text(text.rstrip("\n") + "\nSTOPSIGNAL SIGKILL\n", encoding="utf-8")
    doc = tomlkit.parse((dst / "task.toml").read_text(encoding="utf-8"))
    environment = doc.get("environment")
    if environment is not None and environment.get("docker_image"):
        image, _, failure = builder.resolve_base(str(environment["docker_image"]))
        if failure is not None:
            raise CopyError(f"{src.name}: {failure}")
        environment["docker_image"] = image
    _make_public(doc)
    (dst / "task.toml").write_text(tomlkit.dumps(doc), encoding="utf-8")
