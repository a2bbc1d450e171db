"""Dormant units in a checkpoint's torso: has a stalled Pong run lost the units a second game
would need?

A network that learned one task first can lose the ability to learn the next (plasticity
loss; Sokar et al. 2023 count it as *dormant* units: a ReLU unit whose mean absolute output
over the network's own inputs is a small share of its layer's mean). A Pong run of
``atari-fast`` that stalls has learned the game on one frame parity and not the other
(``pong_points.py --by-parity``); if the stall were plasticity lost, its torso would hold more
dormant units than a run's that learned both games at the same env steps.

The script plays a checkpoint's policy (sampled actions, the run's evaluation env, env seed
the run's + 30,000) for a number of agent steps and records each ReLU layer of the torso on
every observation. Per layer it prints the units, the *dead* ones (no positive output on any
observation) and the dormant shares at tau = 0.025 and 0.1 (a unit's mean absolute output,
over observations and, for a conv layer, positions, at or below tau times its layer's mean).

    python benchmarks/dormant_units.py RUN_DIR --checkpoints ckpt_00000300_000000307200 \
        --steps 4096 --json dormant.json
    python benchmarks/dormant_units.py --from-json dormant*.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch
from parity_probe import load_player, recorded

TAUS = (0.025, 0.1)
"""Dormancy thresholds, as shares of the layer's mean absolute output (Sokar et al. use both)."""


def layer_outputs(run: Path, checkpoint: str | None, steps: int) -> dict[str, np.ndarray]:
    """Per ReLU layer of the policy torso: each unit's mean absolute output and its largest
    output, over ``steps`` observations of the checkpoint's own play."""
    from rlperf.config.validate import load_valid_config
    from rlperf.models.policy import network_input

    seed = load_valid_config(run / "config.yaml").seed + 30_000
    env, agent, network = load_player(run, checkpoint, seed)
    relus = [
        (n, m) for n, m in network.policy_torso.named_modules() if isinstance(m, torch.nn.ReLU)
    ]
    seen: dict[str, torch.Tensor] = {}
    sums: dict[str, torch.Tensor] = {}
    peaks: dict[str, torch.Tensor] = {}

    def record(name: str):  # noqa: ANN202
        def hook(_module, _inputs, output: torch.Tensor) -> None:
            seen[name] = output.detach().float()[0].reshape(output.shape[1], -1)

        return hook

    handles = [m.register_forward_hook(record(n)) for n, m in relus]
    try:
        obs = env.reset()
        for _ in range(steps):
            with torch.no_grad():
                network.policy_torso(network_input(torch.from_numpy(obs)[None]))
            for name, out in seen.items():  # (units, positions)
                mean_abs, peak = out.abs().mean(1), out.amax(1)
                sums[name] = sums[name] + mean_abs if name in sums else mean_abs
                peaks[name] = torch.maximum(peaks[name], peak) if name in peaks else peak
            obs, _reward, terminated, truncated, game_end = env.step(agent.act(obs, False))
            if terminated or truncated or game_end is not None:
                obs = env.reset()
    finally:
        for handle in handles:
            handle.remove()
        env.close()
    return {name: np.stack([(sums[name] / steps).numpy(), peaks[name].numpy()]) for name in sums}


def summarise(outputs: dict[str, np.ndarray]) -> dict[str, dict]:
    """Per layer: units, dead units, and the dormant share at each of TAUS."""
    result = {}
    for name, (mean_abs, peak) in outputs.items():
        share = mean_abs / max(float(mean_abs.mean()), 1e-12)
        result[name] = {
            "units": int(len(mean_abs)),
            "dead": int((peak <= 0).sum()),
            **{f"dormant_{tau}": float((share <= tau).mean()) for tau in TAUS},
        }
    return result


def print_rows(records: list[dict]) -> None:
    """One markdown row per record and layer."""
    print("| run | checkpoint | layer | units | dead | dormant (0.025) | dormant (0.1) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in records:
        for layer, s in r["layers"].items():
            print(
                f"| {r['run']} | {r['checkpoint']} | {layer} | {s['units']} | {s['dead']} | "
                f"{s['dormant_0.025']:.3f} | {s['dormant_0.1']:.3f} |"
            )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", type=Path, nargs="?", help="a run directory with checkpoints")
    p.add_argument("--checkpoints", nargs="+", default=[None], help="names (default: latest)")
    p.add_argument("--steps", type=int, default=4096, help="agent steps of play per checkpoint")
    p.add_argument("--json", type=Path, help="write the records here")
    p.add_argument("--from-json", nargs="+", type=Path, help="print recorded results instead")
    args = p.parse_args()
    if args.from_json:
        print_rows(recorded(p, args.from_json, "layers", "checkpoints and layers"))
        return
    if args.run is None:
        p.error("give a run directory, or --from-json")
    records = [
        {
            "run": args.run.name,
            "checkpoint": checkpoint or "latest",
            "steps": args.steps,
            "layers": summarise(layer_outputs(args.run, checkpoint, args.steps)),
        }
        for checkpoint in args.checkpoints
    ]
    print_rows(records)
    if args.json:
        args.json.write_text(json.dumps(records) + "\n")


if __name__ == "__main__":
    main()
