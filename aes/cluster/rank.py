"""One extra trainer rank of a node, started by the job's session (``python -m aes.cluster.rank``).

    python -m aes.cluster.rank --config RUN_DIR/cluster/config-<session>-node<n>.yaml --run-dir RUN_DIR
        --finished RUN_DIR/cluster/finished-<session>

RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT and CUDA_VISIBLE_DEVICES come from the
session; the rank joins the process group and follows rank 0's updates until it says stop.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m aes.cluster.rank", description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--run-dir", required=True)
    parser.add_argument("--finished", default=None)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s][%(name)s][%(levelname)s] - %(message)s")
    from omegaconf import OmegaConf

    from aes.cluster import distributed
    from aes.config import load_config

    cfg = load_config(OmegaConf.load(args.config))
    distributed.init(cfg.cluster.dist_timeout_min)
    try:
        ok = distributed.follow(cfg, Path(args.run_dir), Path(args.finished) if args.finished else None)
    finally:
        distributed.shutdown()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
