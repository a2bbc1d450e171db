#!/usr/bin/env bash
# Create (or refresh) the isolated venv for the CleanRL peer: benchmarks/.venv-cleanrl.
# Idempotent: re-running only installs what is missing.
#
# Usage: bash benchmarks/peers/setup_cleanrl.sh
#
# The `cleanrl` wheel declares Requires-Python <3.11 and pins an old dependency set
# (gym 0.23.1 + ale-py 0.7.4 + stable-baselines3 1.2.0, ...) that has no Python 3.11 wheels.
# It is a pure-Python bundle of single-file scripts, so it is installed with --no-deps
# --ignore-requires-python, next to the runtime dependencies of ppo_atari_envpool.py only.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="${CLEANRL_VENV:-$(dirname "$HERE")/.venv-cleanrl}"
PYTHON="${PYTHON:-python3}"

TORCH_VERSION="2.13.0"
CLEANRL_VERSION="1.2.0"
ENVPOOL_VERSION="1.2.5"
GYM_VERSION="0.23.1"
TENSORBOARD_VERSION="2.21.0"

if [[ ! -x "$VENV/bin/python" ]]; then
    echo "creating venv at $VENV"
    "$PYTHON" -m venv "$VENV"
fi

PIP=("$VENV/bin/python" -m pip install --quiet)

# torch first and pinned, so that nothing below can resolve to a multi-GB CUDA build.
"${PIP[@]}" "torch==$TORCH_VERSION"
"${PIP[@]}" \
    "torch==$TORCH_VERSION" \
    "envpool==$ENVPOOL_VERSION" \
    "gym==$GYM_VERSION" \
    "tensorboard==$TENSORBOARD_VERSION"
"${PIP[@]}" --no-deps --ignore-requires-python "cleanrl==$CLEANRL_VERSION"

"$VENV/bin/python" - <<'PY'
import importlib.metadata as md
import sys

print(f"python {sys.version.split()[0]}")
for name in ("torch", "cleanrl", "envpool", "gym", "gymnasium", "numpy", "tensorboard"):
    print(f"{name} {md.version(name)}")
PY
