#!/usr/bin/env bash
# Ray for the GPU machine, in parts that fit the carry limit. The machine's image has no
# Ray, and its cp312 wheel (~79 MB) alone is over the 64 MiB that one call may carry
# beside the working tree, so it travels in parts of PART_MB (default 24) over several
# calls to the same warm machine, each copying its part to /tmp/ray-parts/ there; the last
# call joins them and benchmarks/gpu/check.sh installs the whole (RLPERF_RAY_PARTS).
#
#   scripts/gpu_ray_parts.sh [DIR]      # here, once: DIR (default .gpu-ray/) holds
#                                       #   deps/*.whl (Ray's needs the image lacks, small)
#                                       #   ray.whl.part-aa, -ab, ... and ray.whl.sha256
# On the GPU machine, one call per part (carry .gpu-ray/ray.whl.part-XX and .gpu-ray/deps):
#   mkdir -p /tmp/ray-parts && cp .gpu-ray/ray.whl.part-* .gpu-ray/ray.whl.sha256 /tmp/ray-parts/
# then, in the call that measures (carry .gpu-ray/deps and .gpu-wheels):
#   RLPERF_RAY_PARTS=/tmp/ray-parts benchmarks/gpu/check.sh ... OUT
set -euo pipefail
dir=${1:-.gpu-ray}
python=${PYTHON:-python3}
part_mb=${PART_MB:-24}
ray_version=$("$python" -c "import ray; print(ray.__version__)" 2>/dev/null || echo 2.60.0)
platforms=(--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64
  --platform manylinux2014_x86_64)
download() {
  "$python" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp "${platforms[@]}" -d "$1" "${@:2}"
}
rm -rf "$dir" && mkdir -p "$dir/deps" "$dir/whole"
# jsonschema and its own needs are the only ones of Ray's requirements the image lacks
download "$dir/deps" jsonschema jsonschema-specifications referencing rpds-py
download "$dir/whole" "ray==$ray_version"
wheel=$(ls "$dir"/whole/ray-*.whl)
(cd "$dir/whole" && sha256sum "$(basename "$wheel")") > "$dir/ray.whl.sha256"
split -b "${part_mb}M" "$wheel" "$dir/ray.whl.part-"
rm -rf "$dir/whole"
ls -l "$dir" "$dir/deps"
