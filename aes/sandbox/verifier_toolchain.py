"""A verifier toolchain the agent never had write access to.

The agent is root in its container and may replace anything there: bash, python3,
pytest, the C library, ``/etc/ld.so.preload``. So the tests do not run with the
container's tools. The base image's root file system is copied once to the host, every
dynamic executable in it is re-linked (patchelf) to load its own copies of the loader
and libraries from ``/opt/aes-verifier``, and that tree is mounted read-only into every
trial container. The verifier then runs ``/tests/test.sh`` with that bash, that python3
and that pytest, in a cleared environment, after every process the agent left behind has
been killed (the container is restarted: its files stay, its processes go).

What this does not cover: tests that import or execute the agent's own code (a module
the task asked it to write) run that code in the verifier's process, which can then do
anything the tests can. Tasks that need a service the agent started still running at
verification time do not work (set ``sandbox.trusted_verifier=false`` for Harbor's
semantics, where the verifier trusts the container).
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import tarfile
import tempfile
import threading
from pathlib import Path

log = logging.getLogger(__name__)

MOUNT = "/opt/aes-verifier"
PRELOAD_GUARD = "no-preload"
"""An empty file mounted read-only over the container's /etc/ld.so.preload."""
_LOCK = threading.Lock()


def _safe(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo | None:
    if member.isdev() or member.ischr() or member.isblk() or member.isfifo():
        return None
    try:
        return tarfile.tar_filter(member, dest)
    except tarfile.FilterError:
        return None


def _is_dynamic_executable(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            head = fh.read(4)
    except OSError:
        return False
    if head != b"\x7fELF" or not path.stat().st_mode & 0o111:
        return False
    out = subprocess.run(["patchelf", "--print-interpreter", str(path)], capture_output=True, text=True)
    return out.returncode == 0 and bool(out.stdout.strip())


def build_toolchain(client, base_image: str, root: Path) -> Path:
    """The toolchain dir for ``base_image`` under ``root`` (built once per base image id)."""
    image = client.images.get(base_image)
    target = root / image.id.split(":")[-1][:16]
    if (target / "ready").exists():
        return target
    with _LOCK:
        if (target / "ready").exists():
            return target
        if shutil.which("patchelf") is None:
            raise RuntimeError("patchelf is not installed: run `apt-get install -y patchelf` "
                               "(or set sandbox.trusted_verifier=false)")
        log.info("building the verifier toolchain from %s in %s (once per base image)", base_image, target)
        root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".toolchain-", dir=root))
        container = client.containers.create(image.id, ["true"])
        try:
            with tempfile.TemporaryFile() as archive:
                for chunk in container.export():
                    archive.write(chunk)
                archive.seek(0)
                with tarfile.open(fileobj=archive) as tar:
                    tar.extractall(tmp, filter=_safe)
        finally:
            container.remove(force=True)
        _relink(tmp)
        (tmp / PRELOAD_GUARD).write_bytes(b"")
        (tmp / "ready").write_text(image.id + "\n")
        if target.exists():
            shutil.rmtree(target)
        tmp.rename(target)
    return target


def _relink(tree: Path) -> None:
    """Point every dynamic executable at the loader and libraries inside the mount."""
    loader = next((p for p in (tree / "usr/lib64").glob("ld-linux*.so*")), None) or next(
        (p for p in (tree / "usr/lib/x86_64-linux-gnu").glob("ld-linux*.so*")), None)
    if loader is None:
        raise RuntimeError(f"no dynamic loader found in the base image copy at {tree}")
    interp = f"{MOUNT}/{loader.relative_to(tree)}"
    libdirs = [f"{MOUNT}/{d}" for d in ("usr/lib/x86_64-linux-gnu", "usr/lib", "usr/lib64")
               if (tree / d).is_dir()]
    patched = 0
    for folder in ("usr/bin", "usr/sbin", "usr/lib/python3.11/lib-dynload"):
        for path in sorted((tree / folder).glob("*")) if (tree / folder).is_dir() else []:
            if path.is_symlink() or not path.is_file() or not _is_dynamic_executable(path):
                continue
            subprocess.run(["patchelf", "--set-interpreter", interp, "--force-rpath", "--set-rpath",
                            ":".join(libdirs), str(path)], check=True, capture_output=True)
            patched += 1
    log.info("re-linked %d executables to %s", patched, interp)


def verify_command(script: str = "/tests/test.sh", env: dict[str, str] | None = None) -> list[str]:
    """Run ``script`` with the toolchain's bash in a cleared, trusted environment."""
    path = f"{MOUNT}/usr/local/bin:{MOUNT}/usr/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    clean = {
        "PATH": path, "HOME": "/root", "LANG": "C.UTF-8", "PYTHONNOUSERSITE": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        # ignore pytest.ini / conftest.py the agent could plant above /tests
        "PYTEST_ADDOPTS": "-c /dev/null --confcutdir=/tests -p no:cacheprovider",
        **(env or {}),
    }
    return [f"{MOUNT}/usr/bin/env", "-i", *(f"{k}={v}" for k, v in clean.items()), f"{MOUNT}/usr/bin/bash", script]
