#!/usr/bin/env bash
# Create (or refresh) the isolated virtual environment used to run peer baselines
# (Stable-Baselines3) next to rlperf. Idempotent: re-running only installs what is missing.
#
# Usage: bash benchmarks/peers/setup.sh
#
# Why a separate venv: SB3 pins its own gymnasium/numpy ranges and we do not want it to
# perturb rlperf's environment. The pins below are the versions the harness was tested with;
# gymnasium, ale-py and opencv match rlperf's own venv so both sides use the same emulator
# and the same resize code.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="${PEERS_VENV:-$(dirname "$HERE")/.venv-peers}"
PYTHON="${PYTHON:-python3}"

TORCH_VERSION="2.13.0"
SB3_VERSION="2.9.2"
GYMNASIUM_VERSION="1.4.0"
ALE_PY_VERSION="0.12.1"
OPENCV_VERSION="5.0.0.93"

if [[ ! -x "$VENV/bin/python" ]]; then
    echo "creating venv at $VENV"
    "$PYTHON" -m venv "$VENV"
fi

PIP=("$VENV/bin/python" -m pip install --quiet)

# torch first and pinned: an unpinned resolve (e.g. pulled in by stable-baselines3) would
# fetch a multi-GB CUDA build; once torch==2.13.0 (local CPU wheel) is present, pip keeps it.
"${PIP[@]}" "torch==$TORCH_VERSION"
"${PIP[@]}" \
    "torch==$TORCH_VERSION" \
    "stable-baselines3==$SB3_VERSION" \
    "gymnasium==$GYMNASIUM_VERSION" \
    "ale-py==$ALE_PY_VERSION" \
    "opencv-python-headless==$OPENCV_VERSION"

"$VENV/bin/python" - <<'PY'
import importlib.metadata as md
import sys

print(f"python {sys.version.split()[0]}")
for name in ("torch", "stable-baselines3", "gymnasium", "ale-py", "opencv-python-headless", "numpy"):
    print(f"{name} {md.version(name)}")
PY
