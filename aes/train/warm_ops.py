"""Compile (or load from the cache) the DeepSpeed ops the training path uses, ahead of time.

    python -m aes.train.warm_ops            # what the default CPU path needs: shm_comm
    python -m aes.train.warm_ops --all      # also cpu_adam (offload_optimizer) and fused_adam (torch_adam=false)

Ops are cached in ``TORCH_EXTENSIONS_DIR`` (default: this checkout's ``.aes-cache/torch_extensions``,
set by :mod:`aes.train`); a cold
build takes minutes on 2 cores, a cached load ~1 s. Run it in CI's setup (and cache that
directory) so the first test does not pay the build.

DeepSpeed also probes every op's compatibility on first use — compiling and linking a test
program for some of them — in every process that trains. The probe's answers are stored here
(:data:`PROBE_CACHE`) and :func:`load_probe` hands them to DeepSpeed, so no compiler runs
during a run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

BUILDERS = {"shm_comm": "ShareMemCommBuilder", "cpu_adam": "CPUAdamBuilder", "fused_adam": "FusedAdamBuilder"}
DEFAULT = ("shm_comm",)


def _probe_cache() -> Path:
    import deepspeed
    from deepspeed.accelerator import get_accelerator

    root = Path(os.environ["TORCH_EXTENSIONS_DIR"])  # set by aes.train
    return root / f"aes-compatible-ops-{deepspeed.__version__}-{get_accelerator().device_name()}.json"


def save_probe() -> Path:
    """Run DeepSpeed's compatibility probe once and store its answers."""
    import deepspeed.ops

    path = _probe_cache()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(deepspeed.ops.__compatible_ops__))
    return path


def load_probe() -> bool:
    """Give DeepSpeed the stored probe (no compiler runs); False when there is none."""
    import deepspeed.ops

    if "__compatible_ops__" in vars(deepspeed.ops):
        return True
    try:
        stored = json.loads(_probe_cache().read_text())
    except (OSError, ValueError):
        return False
    deepspeed.ops.__compatible_ops__ = stored
    return True


def warm(ops: tuple[str, ...] = DEFAULT) -> dict[str, float | None]:
    """Build or load each op; returns seconds per op (None: not available on this accelerator)."""
    import deepspeed.ops
    from deepspeed.accelerator import get_accelerator

    times: dict[str, float | None] = {}
    for name in ops:
        builder = get_accelerator().create_op_builder(BUILDERS[name])
        if builder is None or not deepspeed.ops.__compatible_ops__.get(builder.NAME, False):
            times[name] = None
            continue
        start = time.perf_counter()
        builder.load(verbose=False)
        times[name] = time.perf_counter() - start
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="also build cpu_adam and fused_adam")
    args = parser.parse_args(argv)
    ops = tuple(BUILDERS) if args.all else DEFAULT
    print(f"op compatibility probe stored in {save_probe()}")
    for name, seconds in warm(ops).items():
        print(f"{name}: " + ("not available on this accelerator" if seconds is None else f"ready in {seconds:.1f} s"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
