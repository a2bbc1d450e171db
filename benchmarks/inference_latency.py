"""Per-step inference latency of thesis models 1, 3 and 4 on every available backend.

For each model a scratch run directory is made (the model as built, random weights: timing
does not depend on the values), exported to ONNX and TFLite and quantized to int8 on 200
real Pong observations of the model's frame size. Each backend is then called on real
frames, untimed warm-up first, and every call is timed alone (``perf_counter_ns`` around the
backend call: input copy and (de)quantization included, env step excluded).

Cases: batch 1 with 1 and 2 threads (the thesis's Table 4.1 is batch 1), and batch 8 with
1 thread. TFLite graphs have a fixed batch: batch 8 uses a separate fp32 export; the int8
TFLite file is calibrated at batch 1, so its batch-8 cell is n/a.

    python benchmarks/inference_latency.py --calls 2000
"""

from __future__ import annotations

import argparse
import platform
import tempfile
import time
from pathlib import Path

import numpy as np

from rlperf.config.load import dump_config
from rlperf.config.schema import RunConfig
from rlperf.core.checkpoint import save_checkpoint
from rlperf.deploy.backends import backend_status, make_backend
from rlperf.deploy.dataset import record_observations
from rlperf.deploy.export import export_run
from rlperf.deploy.policy import env_spec, load_run_policy
from rlperf.deploy.quantize import quantize_run
from rlperf.models.catalog import build_model

MODELS = ("thesis-1", "thesis-3", "thesis-4")


def scratch_run(root: Path, model: str) -> Path:
    """A run directory holding ``model`` (random weights) for ALE/Pong-v5."""
    cfg = RunConfig()
    cfg.model.name = model
    run = root / model
    run.mkdir(parents=True)
    (run / "config.yaml").write_text(dump_config(cfg))
    _, shape, _, actions = env_spec(cfg)
    net = build_model(cfg.model, shape, actions)
    save_checkpoint(
        run / "checkpoints",
        "ckpt_00000000_000000000000",
        {"algorithm": {"policy": net.state_dict()}},
        keep=1,
    )
    return run


def time_calls(backend, frames: np.ndarray, batch: int, calls: int, warmup: int = 50) -> np.ndarray:
    """Milliseconds of ``calls`` backend calls on batches of ``frames``."""
    batches = [
        np.ascontiguousarray(frames[i : i + batch])
        for i in range(0, len(frames) - batch + 1, batch)
    ]
    for i in range(warmup):
        backend(batches[i % len(batches)])
    out = np.empty(calls)
    clock = time.perf_counter_ns
    for i in range(calls):
        x = batches[i % len(batches)]
        start = clock()
        backend(x)
        out[i] = clock() - start
    return out / 1e6


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--calls", type=int, default=2000, help="timed calls per batch-1 case")
    p.add_argument("--calls-batch8", type=int, default=300, help="timed calls per batch-8 case")
    args = p.parse_args()
    names = [n for n, reason in backend_status() if reason is None]
    cases = [(1, 1), (1, 2), (8, 1)]  # (batch, threads)
    rows: dict[tuple[str, str, int, int], tuple[float, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for model in MODELS:
            run = scratch_run(Path(tmp), model)
            policy = load_run_policy(run)
            frames, _ = record_observations(policy.cfg, policy.dim, 200, seed=0)
            export_run(run, "onnx", policy=policy)
            export_run(run, "tflite", policy=policy)
            quantize_run(policy, frames)
            run8 = scratch_run(Path(tmp) / "b8", model)
            export_run(run8, "tflite", policy=load_run_policy(run8), batch_size=8)
            for name in names:
                for batch, threads in cases:
                    if name.startswith("tflite") and batch != 1:
                        if name == "tflite-int8":
                            continue
                        target = load_run_policy(run8)
                    else:
                        target = policy
                    backend = make_backend(name, target, threads=threads, batch_size=batch)
                    calls = args.calls if batch == 1 else args.calls_batch8
                    ms = time_calls(backend, frames, batch, calls)
                    rows[(model, name, batch, threads)] = (
                        np.percentile(ms, 50),
                        np.percentile(ms, 99),
                    )
                    print(
                        f"{model} {name} batch {batch} threads {threads}: p50 {rows[(model, name, batch, threads)][0]:.3f} ms",
                        flush=True,
                    )
    import onnxruntime
    import torch

    print(
        f"\nmachine: {cpu_model()}, {len(__import__('os').sched_getaffinity(0))} vCPUs; torch {torch.__version__}, onnxruntime {onnxruntime.__version__}"
    )
    for batch, threads in cases:
        print(f"\nbatch {batch}, {threads} thread(s): p50 / p99 ms per call")
        print("| model | " + " | ".join(names) + " |")
        print("| --- |" + " --- |" * len(names))
        for model in MODELS:
            cells = []
            for name in names:
                value = rows.get((model, name, batch, threads))
                cells.append("n/a" if value is None else f"{value[0]:.3f} / {value[1]:.3f}")
            print(f"| {model} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
