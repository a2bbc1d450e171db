"""Widen the fully connected layer of a ``nips``-model run's checkpoint, keeping what it computes.

A fork that asks whether a stalled run lacks capacity cannot change ``model.*`` on resume
(``rlperf train --resume`` refuses it: the checkpoint's tensors would not fit). This writes a
copy of a run whose fully connected layer has ``--hidden`` units instead of the checkpoint's:
the old units keep their weights, the new ones get freshly initialised incoming weights (the
model's own initialisation, from ``--init-seed``) and zero outgoing weights in the policy and
value heads, so the widened network computes exactly what the checkpoint's did until its
first update. Adam's first moments of the new weights start at 0 and their second moments at
the mean of their tensor's old ones (so their first steps are neither tiny nor, with the old
step count's bias correction, too large). The copy's ``config.yaml`` gets
``model.hidden_sizes``; its metrics are cut at the checkpoint and only that checkpoint is kept:

    python benchmarks/widen_fork.py runs/gym2-s12-to1024000 ckpt_00000600_000000614400 \
        runs/wide-s12-101 --hidden 512
    rlperf train --resume runs/wide-s12-101 --seed 101 ...

(a change made to ``config.yaml`` directly: the fork's ``branches`` entry does not list it).
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import torch
import yaml

from rlperf.config.load import load_config_file
from rlperf.core.checkpoint import load_checkpoint, save_checkpoint
from rlperf.models.catalog import build_model

FC = "policy_torso.net.5"
"""The nips model's fully connected layer (after conv, ReLU, conv, ReLU, flatten)."""
HEADS = ("logits_head", "value_head")
PARAM_ORDER = [f"policy_torso.net.{i}.{p}" for i in (0, 2, 5) for p in ("weight", "bias")] + [
    f"{h}.{p}" for h in HEADS for p in ("weight", "bias")
]
"""The optimizer's parameter indices, in the model's registration order."""


def widen(state: dict, fresh: dict[str, torch.Tensor], hidden: int) -> None:
    """Widen ``state`` (a loaded checkpoint) in place to ``hidden`` units, new incoming
    weights from ``fresh`` (a newly built model's state dict of that width)."""
    policy = state["algorithm"]["policy"]
    old = policy[f"{FC}.weight"].shape[0]
    if hidden <= old:
        raise SystemExit(f"--hidden {hidden} is not wider than the checkpoint's {old} units")
    new_rows = slice(old, hidden)
    widened: dict[str, torch.Tensor] = {}
    for p in ("weight", "bias"):
        key = f"{FC}.{p}"
        widened[key] = torch.cat([policy[key], fresh[key][new_rows]])
    for head in HEADS:
        key = f"{head}.weight"
        zeros = torch.zeros(policy[key].shape[0], hidden - old, dtype=policy[key].dtype)
        widened[key] = torch.cat([policy[key], zeros], dim=1)
    moments = state["optimizer"]["state"]
    for key, tensor in widened.items():
        before = policy[key]
        policy[key] = tensor
        slot = moments[str(PARAM_ORDER.index(key))]
        dim = 1 if key.endswith("head.weight") else 0
        extra = list(tensor.shape)
        extra[dim] -= before.shape[dim]
        slot["exp_avg"] = torch.cat([slot["exp_avg"], torch.zeros(extra)], dim=dim)
        mean_sq = slot["exp_avg_sq"].mean()
        slot["exp_avg_sq"] = torch.cat([slot["exp_avg_sq"], torch.full(extra, mean_sq)], dim=dim)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("checkpoint")
    parser.add_argument("out", type=Path)
    parser.add_argument("--hidden", type=int, required=True)
    parser.add_argument("--init-seed", type=int, default=0)
    args = parser.parse_args()
    if args.out.exists():
        raise SystemExit(f"{args.out} exists: choose another folder")
    cfg = load_config_file(args.run / "config.yaml")
    if cfg.model.name != "nips" or cfg.model.hidden_sizes:
        raise SystemExit(f"{args.run} is not a run of the nips model at its own width")
    state = load_checkpoint(args.run / "checkpoints" / args.checkpoint)
    state.pop("_checkpoint_path", None)
    iteration = int(state["counters"]["iteration"])
    torch.manual_seed(args.init_seed)
    cfg.model.hidden_sizes = [args.hidden]
    channels = cfg.env.frame_stack * (1 if cfg.env.grayscale else 3)
    obs_shape = (channels, cfg.env.dim, cfg.env.dim)
    actions = state["algorithm"]["policy"]["logits_head.bias"].shape[0]
    fresh = build_model(cfg.model, obs_shape, actions).state_dict()
    widen(state, fresh, args.hidden)

    args.out.mkdir(parents=True)
    shutil.copy(args.run / "manifest.json", args.out / "manifest.json")
    config = yaml.safe_load((args.run / "config.yaml").read_text())
    config["model"]["hidden_sizes"] = [args.hidden]
    (args.out / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    with open(args.run / "metrics.jsonl") as src, open(args.out / "metrics.jsonl", "w") as dst:
        dst.writelines(line for line in src if json.loads(line)["iteration"] <= iteration)
    save_checkpoint(args.out / "checkpoints", args.checkpoint, state, keep=1)
    print(f"{args.out}: {args.checkpoint} with {args.hidden} units")


if __name__ == "__main__":
    main()
