"""Widen a ``nips``-model run's checkpoint (its convs, its dense layer), keeping what it computes.

A fork that asks whether a stalled run lacks capacity cannot change ``model.*`` on resume
(``rlperf train --resume`` refuses it: the checkpoint's tensors would not fit). This writes a
copy of a run whose convs have ``--conv-channels`` output channels and whose dense layer has
``--hidden`` units (either or both wider than the checkpoint's). Every old unit keeps its
weights, with zero weights from the new units below it; every new unit gets the model's own
initialisation (from ``--init-seed``) and feeds the layer above through zero weights, so the
widened network computes exactly what the checkpoint's did until its first update. Adam's
first moments of the new weights start at 0 and their second moments at the mean of their
tensor's old ones (so their first steps are neither tiny nor, with the old step count's bias
correction, too large). The copy's ``config.yaml`` gets ``model.hidden_sizes`` and
``model.conv_channels``; its metrics are cut at the checkpoint and only that checkpoint is kept:

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


def grow(old: torch.Tensor, fresh: torch.Tensor, fill: float | None = None) -> torch.Tensor:
    """``old`` in the leading corner of a tensor shaped like ``fresh``: new output units
    (rows past ``old``'s) take ``fresh``'s values (or ``fill``), and old units take 0 from new
    inputs (columns past ``old``'s), so that nothing new reaches what the old units compute."""
    if fill is None:
        grown = fresh.clone()
        if old.dim() > 1:
            grown[: old.shape[0], old.shape[1] :] = 0
    else:  # an optimizer moment: every new entry alike
        grown = torch.full_like(fresh, fill)
    grown[tuple(slice(0, n) for n in old.shape)] = old
    return grown


def widen(state: dict, fresh: dict[str, torch.Tensor]) -> list[str]:
    """Widen ``state`` (a loaded checkpoint) in place to the shapes of ``fresh`` (a newly
    built model's state dict); returns the names of the tensors that grew."""
    policy = state["algorithm"]["policy"]
    moments = state["optimizer"]["state"]
    grown = []
    for index, (key, template) in enumerate(fresh.items()):
        old = policy[key]
        if old.shape == template.shape:
            continue
        if any(n < o for n, o in zip(template.shape, old.shape, strict=True)):
            raise SystemExit(f"{key}: {tuple(template.shape)} is narrower than {tuple(old.shape)}")
        policy[key] = grow(old, template)
        slot = moments[str(index)]  # the optimizer holds the parameters in the model's order
        slot["exp_avg"] = grow(slot["exp_avg"], template, fill=0.0)
        slot["exp_avg_sq"] = grow(
            slot["exp_avg_sq"], template, fill=slot["exp_avg_sq"].mean().item()
        )
        grown.append(key)
    return grown


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("checkpoint")
    parser.add_argument("out", type=Path)
    parser.add_argument("--hidden", type=int, help="units of the dense layer")
    parser.add_argument("--conv-channels", type=int, nargs="+", help="output channels per conv")
    parser.add_argument("--init-seed", type=int, default=0)
    args = parser.parse_args()
    if args.out.exists():
        raise SystemExit(f"{args.out} exists: choose another folder")
    cfg = load_config_file(args.run / "config.yaml")
    if cfg.model.name != "nips":
        raise SystemExit(f"{args.run} is not a run of the nips model")
    widths = {}
    if args.hidden:
        widths["hidden_sizes"] = [args.hidden]
    if args.conv_channels:
        widths["conv_channels"] = args.conv_channels
    for key, value in widths.items():
        setattr(cfg.model, key, value)
    state = load_checkpoint(args.run / "checkpoints" / args.checkpoint)
    state.pop("_checkpoint_path", None)
    iteration = int(state["counters"]["iteration"])
    torch.manual_seed(args.init_seed)
    channels = cfg.env.frame_stack * (1 if cfg.env.grayscale else 3)
    obs_shape = (channels, cfg.env.dim, cfg.env.dim)
    actions = state["algorithm"]["policy"]["logits_head.bias"].shape[0]
    fresh = build_model(cfg.model, obs_shape, actions).state_dict()
    grown = widen(state, fresh)
    if not grown:
        raise SystemExit("nothing to widen: give --hidden or --conv-channels wider than the run's")

    args.out.mkdir(parents=True)
    shutil.copy(args.run / "manifest.json", args.out / "manifest.json")
    config = yaml.safe_load((args.run / "config.yaml").read_text())
    config["model"].update(widths)
    (args.out / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    with open(args.run / "metrics.jsonl") as src, open(args.out / "metrics.jsonl", "w") as dst:
        dst.writelines(line for line in src if json.loads(line)["iteration"] <= iteration)
    save_checkpoint(args.out / "checkpoints", args.checkpoint, state, keep=1)
    print(f"{args.out}: {args.checkpoint} widened ({', '.join(grown)})")


if __name__ == "__main__":
    main()
