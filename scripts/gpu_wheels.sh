#!/usr/bin/env bash
# Downloads the wheels that rlperf needs on a GPU machine with no internet, whose Python
# (3.12, x86-64) already holds torch, numpy, onnxruntime, tensorboard, psutil, pyyaml,
# safetensors, nvidia-ml-py, matplotlib, opencv-python-headless, rich and pytest: only the
# Atari stack is missing. The wheels go to a git-ignored folder (default .gpu-wheels/) that
# travels with the working tree; benchmarks/gpu/check.sh installs them there.
#
#   scripts/gpu_wheels.sh [DIR]
#
# The versions are the ones the test suite runs with. EnvPool is left out on purpose: its
# cp312 wheel (64 MB) alone fills the 64 MiB that may travel, and ale-py's own C++ vector
# env (engine ale-vector) is the faster engine of the two in docs/benchmarks.md.
set -euo pipefail
dir=${1:-.gpu-wheels}
python=${PYTHON:-python3}
wheels=(gymnasium==1.4.0 farama-notifications==0.0.6 ale-py==0.12.1)
mkdir -p "$dir"
"$python" -m pip download --quiet --no-deps --only-binary=:all: \
  --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d "$dir" "${wheels[@]}"
ls -l "$dir"
du -sh "$dir"
