#!/usr/bin/env bash
# Create (or refresh) the isolated venv for the RLlib peer: benchmarks/.venv-rllib.
# Idempotent: re-running only installs what is missing.
#
# Usage: bash benchmarks/peers/setup_rllib.sh
#
# ray[rllib] 2.60 pins gymnasium 1.2.2 (rlperf uses 1.4.0), which is why it gets its own
# venv. ale-py and opencv match rlperf's venv, so the emulator and resize code are the same.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="${RLLIB_VENV:-$(dirname "$HERE")/.venv-rllib}"
PYTHON="${PYTHON:-python3}"

TORCH_VERSION="2.13.0"
RAY_VERSION="2.60.0"
ALE_PY_VERSION="0.12.1"
OPENCV_VERSION="5.0.0.93"

if [[ ! -x "$VENV/bin/python" ]]; then
    echo "creating venv at $VENV"
    "$PYTHON" -m venv "$VENV"
fi

PIP=("$VENV/bin/python" -m pip install --quiet)

# torch first and pinned, so that ray[rllib] cannot pull a multi-GB CUDA build.
"${PIP[@]}" "torch==$TORCH_VERSION"
"${PIP[@]}" \
    "torch==$TORCH_VERSION" \
    "ray[rllib]==$RAY_VERSION" \
    "ale-py==$ALE_PY_VERSION" \
    "opencv-python-headless==$OPENCV_VERSION"

"$VENV/bin/python" - <<'PY'
import importlib.metadata as md
import sys

print(f"python {sys.version.split()[0]}")
for name in ("torch", "ray", "gymnasium", "ale-py", "opencv-python-headless", "numpy"):
    print(f"{name} {md.version(name)}")
PY
