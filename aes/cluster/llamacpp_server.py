"""llama.cpp's OpenAI-compatible HTTP server on a GGUF file, as a process of its own (``xllamacpp``).

    python -m aes.cluster.llamacpp_server --model FILE.gguf --port 8000 [--host 127.0.0.1]
        [--alias NAME] [--ctx 4096] [--parallel 2] [--threads N] [--gpu-layers N]

What ``cluster.backend=llamacpp`` starts: a real model server for the ``openai_compatible``
backend without a GPU (the stand-in for vLLM in the CPU tests, or a CPU cluster's rollout
server). It serves ``/v1/chat/completions``, ``/v1/completions``, ``/v1/models``, ``/health``,
``/props``, ``/apply-template`` and ``/tokenize``; ``--ctx`` tokens per slot, ``--parallel``
slots. ``--model`` is a GGUF path or the embedded model's name (``smollm2-135m-instruct``).
It runs until SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m aes.cluster.llamacpp_server",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="GGUF file (or smollm2-135m-instruct)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--alias", default=None, help="model name /v1/models lists (default: the file)")
    parser.add_argument("--ctx", type=int, default=4096, help="context tokens per slot")
    parser.add_argument("--parallel", type=int, default=2, help="concurrent generation slots")
    parser.add_argument("--threads", type=int, default=None, help="CPU threads (default: every core)")
    parser.add_argument("--gpu-layers", type=int, default=None, help="layers offloaded to a GPU build")
    parser.add_argument("--verbose", action="store_true", help="llama.cpp's own log")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    import xllamacpp

    from aes.models.local import resolve_gguf

    path = resolve_gguf(args.model)
    params = xllamacpp.CommonParams()
    params.model.path = str(path)
    params.hostnames = [args.host]
    params.port = int(args.port)
    params.n_parallel = max(1, args.parallel)
    params.n_ctx = int(args.ctx) * params.n_parallel  # split evenly: every slot holds --ctx tokens
    params.kv_unified = False
    threads = int(args.threads or os.cpu_count() or 1)
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.n_threads_http = max(2, params.n_parallel + 1)
    params.verbosity = 3 if args.verbose else -1
    if args.alias:
        params.model_alias = {args.alias}
    if args.gpu_layers is not None:
        params.n_gpu_layers = int(args.gpu_layers)
    # SIGTERM and SIGINT are blocked before llama.cpp starts its threads (they inherit the mask, so
    # no signal interrupts their system calls) and are taken synchronously by the main thread below.
    # A Python handler that sets an Event can deadlock against the main thread's own Event.wait.
    stop_signals = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals)
    try:
        server = xllamacpp.Server(params)
    except Exception as exc:  # xllamacpp raises without detail: say what was asked
        print(f"llama.cpp could not serve {path} on {args.host}:{args.port}: {exc} (port taken? run with "
              "--verbose for llama.cpp's log)", file=sys.stderr, flush=True)
        return 1
    print(f"serving {path} at {server.listening_address} ({params.n_parallel} slots x {args.ctx} tokens, "
          f"{threads} threads)", flush=True)
    signal.sigwait(stop_signals)
    print("stopping", flush=True)
    del server  # the destructor stops llama.cpp's loop and its HTTP listener
    return 0


if __name__ == "__main__":
    sys.exit(main())
