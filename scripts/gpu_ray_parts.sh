#!/usr/bin/env bash
# Ray for the GPU machine, small enough to travel. The machine's image has no Ray, and its
# cp312 wheel (~79 MB) alone is over the 64 MiB that one call may carry. rlperf uses Ray's
# core alone (tasks, actors, placement, a local cluster), so the wheel is rebuilt without
# the parts it never imports: the Java jars (32 MB) and the libraries on top of the core
# (rllib, tune, train, data, serve, llm); its RECORD is rewritten to match. What is left
# (~42 MB) is split into parts of PART_MB (default 60: one part) that travel with a call;
# benchmarks/gpu/check.sh joins them, checks the SHA-256 and installs the wheel
# (RLPERF_RAY_PARTS).
#
#   scripts/gpu_ray_parts.sh [DIR]      # here, once: DIR (default .gpu-ray/) holds
#                                       #   deps/*.whl (Ray's needs the image lacks, small)
#                                       #   ray.whl.part-aa[, -ab ...] and ray.whl.sha256
# On the GPU machine (carry .gpu-ray and .gpu-wheels; the working tree must leave room,
# see docs/benchmarks.md):
#   RLPERF_RAY_PARTS=.gpu-ray benchmarks/gpu/check.sh ... OUT
set -euo pipefail
dir=${1:-.gpu-ray}
python=${PYTHON:-python3}
part_mb=${PART_MB:-60}
ray_version=${RAY_VERSION:-2.60.0}
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
full=$(ls "$dir"/whole/ray-*.whl)
"$python" - "$full" <<'PY'
"""Rewrite the wheel in place without the packages rlperf never imports."""
import sys
import zipfile
from pathlib import Path

DROPPED = ("ray/jars/", "ray/rllib/", "ray/tune/", "ray/train/", "ray/data/", "ray/serve/",
           "ray/llm/")
path = Path(sys.argv[1])
pruned = path.with_suffix(".pruned")
with zipfile.ZipFile(path) as src, zipfile.ZipFile(pruned, "w", zipfile.ZIP_DEFLATED,
                                                   compresslevel=9) as out:
    for info in src.infolist():
        if info.filename.startswith(DROPPED):
            continue
        data = src.read(info)
        if info.filename.endswith(".dist-info/RECORD"):
            kept = [row for row in data.decode().splitlines()
                    if not row.startswith(DROPPED)]
            data = ("\n".join(kept) + "\n").encode()
        out.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED, compresslevel=9)
pruned.replace(path)
PY
(cd "$dir/whole" && sha256sum "$(basename "$full")") > "$dir/ray.whl.sha256"
split -b "${part_mb}M" "$full" "$dir/ray.whl.part-"
rm -rf "$dir/whole"
ls -l "$dir" "$dir/deps"
