"""The thesis's inference command, read by ``rlperf infer``.

The thesis timed inference with ``rollout_with_time.py`` (RLlib's ``rollout.py`` with each
``compute_action`` timed). Its Table 3.4 commands can be typed here as written, with the
checkpoint of an rlperf run in place of RLlib's::

    rlperf infer RUN_DIR/checkpoints/ckpt_... --run=PPO --env=Pong-v0 --no-render \\
        --episodes=10 --gpu=gpu0 --time-output=model1_8_workers_gpu0 \\
        --config='{"num_gpus":0.0001, "num_gpus_per_worker":0.1249875, "num_workers":8}'

What each flag becomes:

- ``CHECKPOINT`` (first argument): a checkpoint directory of a run, or the run directory;
- ``--run ALGO``: the algorithm the agent was trained with; must be the run's;
- ``--env ID``: the game played. The run's own id, or a registered id of the same game
  whose dynamics are then played with the run's preprocessing (``Pong-v0``: sticky actions
  0.25 and a random frameskip of 2-4 frames, the thesis's game);
- ``--gpu gpu0|gpu1|both|none``: the GPUs the command sees (``CUDA_VISIBLE_DEVICES``, as
  the thesis's script set it); the model runs on cuda unless ``none``;
- ``--config JSON``: RLlib's resource keys. ``num_gpus`` is the driver's share of a GPU
  (0 keeps the model on the CPU). ``num_workers`` and ``num_gpus_per_worker`` size
  RLlib's rollout workers, which took no part in the timed rollout (it ran on the
  driver, thesis finding 20): rlperf starts none and says so;
- ``--save-info``: the per-step records (model and env time, action, reward) beside the
  ``--time-output`` file, as ``NAME.steps.csv``, unless ``--step-output`` names the file;
- ``--video-dir DIR``: a video of each game of the first env, ``DIR/game-NNN.mp4``;
- ``--no-render``: accepted; rlperf infer never opens a window.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlperf.config.thesis_options import GPU_VISIBILITY
from rlperf.core.errors import UserInputError

if TYPE_CHECKING:  # the policy module imports torch: `rlperf infer --help` stays quick
    from rlperf.deploy.policy import RunPolicy

RESOURCE_KEYS = ("num_gpus", "num_workers", "num_gpus_per_worker")
"""The RLlib keys that Table 3.4's ``--config`` sets."""


def add_rollout_flags(parser: argparse.ArgumentParser) -> None:
    """The thesis's flags, in their own group of ``rlperf infer --help``."""
    group = parser.add_argument_group(
        "the thesis's rollout_with_time.py flags (Table 3.4's commands run as written)"
    )
    group.add_argument("--run", metavar="ALGO", help="the algorithm of the run, e.g. PPO")
    group.add_argument("--env", metavar="ID", help="the game: the run's id or e.g. Pong-v0")
    group.add_argument("--gpu", choices=list(GPU_VISIBILITY), help="the GPUs this command sees")
    group.add_argument(
        "--config",
        metavar="JSON",
        help=f"RLlib's resource keys ({', '.join(RESOURCE_KEYS)}); num_gpus 0 plays on the CPU",
    )
    group.add_argument(
        "--save-info", action="store_true", help="per-step records beside --time-output"
    )
    group.add_argument("--video-dir", metavar="DIR", help="a video of each game in DIR")
    group.add_argument("--no-render", action="store_true", help="accepted (nothing is shown)")


@dataclass
class RolloutSetup:
    """What the thesis's flags decided: the device, the files, what was left aside."""

    device: str
    step_output: Path | None
    video_dir: Path | None
    notes: list[str] = field(default_factory=list)


def split_checkpoint(value: str) -> tuple[str, Path | None]:
    """``(run directory, checkpoint)`` for a path that names a checkpoint of a run (the
    thesis's first argument); a run directory (or ``shipped:NAME``) is returned as is."""
    from rlperf.deploy.policy import CONFIG_FILE

    path = Path(value)
    if value.startswith("shipped:") or (path / CONFIG_FILE).is_file() or not path.exists():
        return value, None
    for parent in list(path.parents)[:3]:  # RUN/checkpoints/ckpt_x[/file]
        if (parent / CONFIG_FILE).is_file():
            return str(parent), path
    return value, None


def apply_rollout_flags(args: argparse.Namespace, policy: RunPolicy) -> RolloutSetup:
    """Check the thesis's flags against the run and turn them into rlperf's settings;
    ``policy.cfg.env`` becomes the game ``--env`` names. Raises UserInputError (one line)."""
    if args.run is not None and args.run.lower() != policy.cfg.algo:
        raise UserInputError(
            f"--run {args.run}: this run was trained with {policy.cfg.algo.upper()}; "
            f"valid: {policy.cfg.algo.upper()}"
        )
    if args.env is not None:
        policy.cfg = dataclasses.replace(policy.cfg, env=_env_config(args.env, policy))
    resources = _resources(args.config)
    notes = []
    workers = resources.get("num_workers", 0)
    if workers:
        per_worker = resources.get("num_gpus_per_worker", 0)
        notes.append(
            f"num_workers {workers:g} (num_gpus_per_worker {per_worker:g}): RLlib's rollout "
            "ran on the driver and its workers took no part; rlperf starts none"
        )
    return RolloutSetup(
        device=_device(args, resources),
        step_output=_step_output(args),
        video_dir=_video_dir(args.video_dir, policy, args.force),
        notes=notes,
    )


def _env_config(env_id: str, policy: RunPolicy) -> Any:
    """The run's env config playing ``env_id``'s dynamics (same game, same preprocessing)."""
    from rlperf.envs.make import is_atari, validate_env_id

    env = policy.cfg.env
    if env_id == env.id:
        return env
    validate_env_id(env_id)
    own = _ale_kwargs(env.id) if is_atari(env.id) else None
    other = _ale_kwargs(env_id) if is_atari(env_id) else None
    if own is None or other is None or own.get("game") != other.get("game"):
        raise UserInputError(
            f"--env {env_id}: this run was trained on {env.id}; valid: {env.id} or another "
            "registered id of the same game (e.g. Pong-v0 for ALE/Pong-v5)"
        )
    skip = other.get("frameskip", env.frameskip)
    low, high = (skip[0], skip[1] - 1) if isinstance(skip, tuple) else (skip, None)
    sticky = other.get("repeat_action_probability", env.repeat_action_probability)
    return dataclasses.replace(
        env, frameskip=low, frameskip_max=high, repeat_action_probability=sticky
    )


def _ale_kwargs(env_id: str) -> dict[str, Any]:
    import gymnasium

    return dict(gymnasium.spec(env_id).kwargs)


def _resources(text: str | None) -> dict[str, float]:
    if text is None:
        return {}
    try:
        given = json.loads(text)
    except ValueError as exc:
        raise UserInputError(f"--config is not JSON ({exc}); e.g. '{{\"num_gpus\": 0}}'") from None
    if not isinstance(given, dict):
        raise UserInputError(f"--config must be a JSON object, got {type(given).__name__}")
    unknown = sorted(set(given) - set(RESOURCE_KEYS))
    if unknown:
        raise UserInputError(f"--config: unknown keys {unknown}; valid: {', '.join(RESOURCE_KEYS)}")
    for key, value in given.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise UserInputError(f"--config {key} must be a number >= 0, got {value!r}")
    return {key: float(value) for key, value in given.items()}


def _device(args: argparse.Namespace, resources: dict[str, float]) -> str:
    """cuda or cpu from ``--gpu`` and the driver's ``num_gpus``; the mask is set here,
    before torch first asks CUDA for its devices."""
    driver_gpus = resources.get("num_gpus")
    if args.gpu is None:
        wanted = args.device or ("cpu" if not driver_gpus else "cuda")
        if driver_gpus and wanted == "cpu":
            raise UserInputError(f"--config num_gpus {driver_gpus:g} asks for a GPU; --device cpu")
        return wanted
    if args.gpu == "none" and driver_gpus:
        raise UserInputError(
            f"--config num_gpus {driver_gpus:g} asks for a GPU but --gpu none hides them; "
            "valid: num_gpus 0 with --gpu none"
        )
    device = "cpu" if args.gpu == "none" or driver_gpus == 0 else "cuda"
    if args.device is not None and args.device != device:
        raise UserInputError(f"--device {args.device} contradicts --gpu {args.gpu} ({device})")
    os.environ["CUDA_VISIBLE_DEVICES"] = GPU_VISIBILITY[args.gpu]
    if device == "cuda":
        import torch

        needed = len(GPU_VISIBILITY[args.gpu].split(","))
        seen = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if seen < needed:
            raise UserInputError(
                f"--gpu {args.gpu}: CUDA sees {seen} of the {needed} GPU(s) it names; valid on "
                "this machine: none, or the GPUs nvidia-smi lists (gpu0, gpu1, both)"
            )
    return device


def _step_output(args: argparse.Namespace) -> Path | None:
    if args.step_output:
        return Path(args.step_output)
    if not args.save_info:
        return None
    if not args.time_output:
        raise UserInputError("--save-info writes beside --time-output: give --time-output F")
    out = Path(args.time_output)
    return out.with_name(out.name.removesuffix(".csv") + ".steps.csv")


def _video_dir(value: str | None, policy: RunPolicy, force: bool) -> Path | None:
    if value is None:
        return None
    from rlperf.envs.make import is_atari

    if not is_atari(policy.cfg.env.id):
        raise UserInputError(f"--video-dir needs an Atari game; {policy.cfg.env.id} has no screen")
    path = Path(value)
    if not path.is_dir():
        raise UserInputError(f"--video-dir {path}: not a directory; create it first")
    if not force and any(path.glob("game-*.mp4")):
        raise UserInputError(
            f"--video-dir {path} holds videos already; pass --force to replace them"
        )
    return path
