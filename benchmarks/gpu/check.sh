#!/usr/bin/env bash
# The prepared GPU check (benchmarks/gpu/check.py says what each step measures).
#
#   scripts/gpu_wheels.sh                  # here, once: the wheels that travel (.gpu-wheels/)
#   benchmarks/gpu/check.sh OUT            # on the GPU machine: steps 1-4 and 6 (~9 min)
#   benchmarks/gpu/check.sh --skip ppo,compiled,placements OUT   # ~5.5 min (15 lent)
#   benchmarks/gpu/check.sh --pong OUT     # on the GPU machine: step 5, Pong seeds 1-3 (<= 7 min)
#   benchmarks/gpu/check.sh --pong --set runner.num_workers=4 OUT   # the seeds with a variant's keys
#   benchmarks/gpu/check.sh --pong --preset pqn-fast-gpu OUT   # the seeds of another preset
#   benchmarks/gpu/check.sh --dry-run OUT  # any CPU: the same steps, tiny budgets
#   RLPERF_RAY_PARTS=/tmp/ray-parts benchmarks/gpu/check.sh --skip env_ceiling,train,eager,ppo,workers4,all_cores,compiled OUT
#                                          # the thesis's GPU half with its workers (scripts/gpu_ray_parts.sh)
#
# Runs from a source checkout with the machine's own python3 (PYTHON=... to choose one);
# rlperf is imported from src/, nothing is installed outside a temporary folder.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
exec "${PYTHON:-python3}" "$root/benchmarks/gpu/check.py" "$@"
