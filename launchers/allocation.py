"""Job-side glue for one SLURM allocation: vLLM for the solver, then the aes run, then teardown.

    python launchers/allocation.py --model Qwen/Qwen3-8B --serve-gpus 0,1 -- \\
        python -m aes.run experiment=paper_frontier

Starts ``vllm serve`` on ``--serve-gpus`` (tensor parallel over them), waits until it answers
``/health``, runs the command with the other GPUs visible and ``solver.base_url`` pointing at
the server, and on exit (or SIGTERM from SLURM) stops the server's whole process group. The
command's exit status is returned, so a failed run fails the job.
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.request


def parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    if "--" not in argv:
        raise SystemExit("usage: allocation.py [options] -- COMMAND ...")
    cut = argv.index("--")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="model the vLLM server serves (solver.model)")
    parser.add_argument("--serve-gpus", default="0", help="GPU ids for vLLM, e.g. 0,1 (tensor parallel)")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--health-timeout", type=float, default=1800, help="seconds to wait for the server")
    parser.add_argument("--server-cmd", default=None,
                        help="server command (default: vllm serve MODEL --port PORT --tensor-parallel-size N)")
    parser.add_argument("--vllm-args", default="", help="extra arguments for vllm serve")
    return parser.parse_args(argv[:cut]), argv[cut + 1:]


def all_gpus() -> list[str]:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible:
        return [g for g in visible.split(",") if g]
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"],
                             capture_output=True, text=True, check=True).stdout
        return [line.strip() for line in out.splitlines() if line.strip()]
    except (OSError, subprocess.CalledProcessError):
        return []


def wait_healthy(url: str, server: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"the model server exited with {server.returncode} before it was healthy")
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(2)
    raise SystemExit(f"the model server did not answer {url} within {timeout:.0f} s")


def stop(server: subprocess.Popen, grace: float = 30.0) -> None:
    """SIGTERM the server's process group, SIGKILL it after ``grace`` seconds."""
    if server.poll() is not None:
        return
    os.killpg(server.pid, signal.SIGTERM)
    try:
        server.wait(grace)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()


def main(argv: list[str]) -> int:
    args, command = parse(argv)
    serve = [g for g in args.serve_gpus.split(",") if g]
    rest = [g for g in all_gpus() if g not in serve]
    host = socket.gethostname()
    # Weight transfer over NCCL lets the trainer push new weights without a restart; processed
    # log-probs are those of the distribution actually sampled (after temperature), i.e. mu.
    server_cmd = shlex.split(args.server_cmd) if args.server_cmd else [
        "vllm", "serve", args.model, "--port", str(args.port), "--tensor-parallel-size", str(len(serve)),
        "--weight-transfer-config", '{"backend": "nccl"}', "--logprobs-mode", "processed_logprobs",
        *shlex.split(args.vllm_args)]
    server = subprocess.Popen(server_cmd, start_new_session=True,
                              env={**os.environ, "CUDA_VISIBLE_DEVICES": ",".join(serve),
                                   "VLLM_SERVER_DEV_MODE": "1"})
    signal.signal(signal.SIGTERM, lambda *_: (stop(server), sys.exit(143)))
    try:
        wait_healthy(f"http://127.0.0.1:{args.port}/health", server, args.health_timeout)
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": ",".join(rest)}
        run = subprocess.run([*command, f"solver.base_url=http://{host}:{args.port}/v1"], env=env)
        return run.returncode
    finally:
        stop(server)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
