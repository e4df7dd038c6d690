"""Rollout servers around any command, on one node: the cluster session's server code on its own.

    python launchers/allocation.py --model Qwen/Qwen3-8B --servers 2 --gpus-per-server 2 -- \\
        python -m aes.run mode=eval solver=qwen tasks=BENCH k=5

Starts the servers (vLLM by default, or ``--backend llamacpp`` on a GGUF) as the job's
``cluster`` section does (:mod:`aes.cluster.servers`: each on its GPUs and port, logs in
``--log-dir``), waits for their health checks, runs the command with the GPUs no server uses and
``solver.base_url=... solver.base_urls=[...]`` appended, and stops the servers when it ends (or on
SIGTERM). The command's exit status is returned, so a failed run fails the job.

``python -m aes.run`` does all of this itself when its ``cluster`` section asks for servers (and
also restarts llama.cpp servers with new weights and spans several nodes): this wrapper is for
commands that are not an aes run, or for serving by hand.
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aes.cluster.layout import Allocation, plan  # noqa: E402
from aes.cluster.servers import ServerError, ServerGroup  # noqa: E402
from aes.cluster.session import server_specs  # noqa: E402
from aes.config import AesConfig, ClusterConfig, ConfigError, ModelConfig  # noqa: E402


def parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    if "--" not in argv:
        raise SystemExit("usage: allocation.py [options] -- COMMAND ...")
    cut = argv.index("--")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="model the servers serve (solver.model)")
    parser.add_argument("--backend", choices=("vllm", "llamacpp"), default="vllm")
    parser.add_argument("--servers", type=int, default=1)
    parser.add_argument("--gpus-per-server", type=int, default=1, help="tensor-parallel size (0: CPU)")
    parser.add_argument("--port", type=int, default=8000, help="port of server 0 (server i: port + i)")
    parser.add_argument("--health-timeout", type=float, default=1800, help="seconds to wait for the servers")
    parser.add_argument("--server-cmd", default=None,
                        help="server command; placeholders {model} {host} {port} {tp} {gpus} {name} {index}")
    parser.add_argument("--extra-args", default="", help="extra arguments of every server command")
    parser.add_argument("--log-dir", default=None, help="server logs (default: a temporary directory)")
    return parser.parse_args(argv[:cut]), argv[cut + 1:]


def main(argv: list[str]) -> int:
    args, command = parse(argv)
    cluster = ClusterConfig(servers=args.servers, backend=args.backend, gpus_per_server=args.gpus_per_server,
                            port=args.port, health_timeout_sec=args.health_timeout,
                            command=shlex.split(args.server_cmd) if args.server_cmd else [],
                            extra_args=shlex.split(args.extra_args),
                            log_dir=args.log_dir or tempfile.mkdtemp(prefix="aes-servers-"))
    cfg = AesConfig(solver=ModelConfig(name="solver", backend="openai_compatible", model=args.model),
                    cluster=cluster)
    try:
        alloc = Allocation.detect(cluster, {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")})
        layout = plan(cluster, alloc)
        specs = server_specs(cfg, alloc, layout, Path(cluster.log_dir))
    except ConfigError as exc:
        raise SystemExit(f"allocation.py: {exc}") from None
    group = ServerGroup(specs, cluster.stop_timeout_sec, cluster.health_timeout_sec)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        group.start()
        group.wait_healthy()
        env = dict(os.environ)
        rest = [r.gpu for r in layout.ranks if r.gpu is not None]
        if alloc.gpus:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(rest)
        urls = group.base_urls
        run = subprocess.run([*command, f"solver.base_url={urls[0]}", f"solver.base_urls=[{','.join(urls)}]"], env=env)
        return run.returncode
    except ServerError as exc:
        print(f"allocation.py: {exc}", file=sys.stderr)
        return 1
    finally:
        group.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
