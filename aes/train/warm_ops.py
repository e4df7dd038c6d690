"""Compile (or load from the cache) the DeepSpeed ops the training path uses, ahead of time.

    python -m aes.train.warm_ops            # what the default CPU path needs: shm_comm
    python -m aes.train.warm_ops --all      # also cpu_adam (offload_optimizer) and fused_adam (torch_adam=false)

Ops are cached in ``TORCH_EXTENSIONS_DIR`` (default ``~/.cache/torch_extensions``); a cold
build takes minutes on 2 cores, a cached load ~1 s. Run it in CI's setup (and cache that
directory) so the first test does not pay the build.
"""

from __future__ import annotations

import argparse
import sys
import time

BUILDERS = {"shm_comm": "ShareMemCommBuilder", "cpu_adam": "CPUAdamBuilder", "fused_adam": "FusedAdamBuilder"}
DEFAULT = ("shm_comm",)


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
    for name, seconds in warm(ops).items():
        print(f"{name}: " + ("not available on this accelerator" if seconds is None else f"ready in {seconds:.1f} s"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
