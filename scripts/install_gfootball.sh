#!/usr/bin/env bash
# Build Google Research Football (gfootball 2.10.2) from its source package into its own
# virtual environment, headless (no display needed with render=False).
#
# gfootball ships only a source package that compiles a C++ engine (Boost.Python, SDL2,
# EGL/OpenGL) and speaks the old gym API: it needs gym 0.25 and numpy < 2, so it gets a
# venv of its own rather than rlperf's. The compile takes about 7 minutes on 2 cores; pip
# caches the built wheel, so a second venv on the same machine installs in seconds.
#
# Usage: scripts/install_gfootball.sh [VENV_DIR]      (default: .venv-gfootball)
# Environment: PYTHON (default python3), JOBS (parallel compile jobs, default: all CPUs),
#              SKIP_APT=1 to skip the Debian packages (already installed).
set -euo pipefail

VENV_DIR="${1:-.venv-gfootball}"
PYTHON="${PYTHON:-python3}"
JOBS="${JOBS:-$(nproc)}"

if [[ "${SKIP_APT:-0}" != "1" ]]; then
    SUDO=""
    if [[ "$(id -u)" != "0" ]]; then SUDO="sudo"; fi
    # libgl1-mesa-dev is required: without it CMake cannot find EGL's OpenGL library.
    $SUDO apt-get update
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        cmake build-essential python3-dev python3-venv libgl1-mesa-dev \
        libsdl2-dev libsdl2-image-dev libsdl2-ttf-dev libsdl2-gfx-dev \
        libboost-python-dev libboost-system-dev libboost-filesystem-dev libboost-thread-dev
fi

"$PYTHON" -m venv "$VENV_DIR"
# Activated, not just called by path: gfootball's build script runs the bare `python3`.
# shellcheck disable=SC1091
source "$VENV_DIR/bin/activate"
pip install --upgrade pip
pip install psutil wheel setuptools 'numpy<2' 'gym==0.25.2'
# --no-build-isolation: the engine build must see this venv's numpy and gym. The opencv pin
# keeps numpy < 2 (opencv 5 pulls numpy 2, which old gym breaks on); six is used by
# gfootball but not declared.
MAKEFLAGS="-j${JOBS}" pip install --no-build-isolation gfootball==2.10.2 'numpy<2' \
    'opencv-python<4.12' six

python - <<'PY'
import gfootball.env as football_env

env = football_env.create_environment(
    env_name="academy_empty_goal_close", representation="simple115v2",
    rewards="scoring", stacked=False, render=False,
)
obs = env.reset()
obs, reward, done, info = env.step(12)
print("gfootball works:", obs.shape, env.action_space)
env.close()
PY
echo "gfootball installed in $VENV_DIR (activate it to use rlperf/GFootballEmptyGoalClose-v0)"
