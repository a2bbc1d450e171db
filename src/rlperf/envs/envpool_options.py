"""EnvPool's Atari options for rlperf's env config: every knob set explicitly, because
EnvPool's defaults are not DeepMind's. Apart from the engine (``envpool_env``) so that a
config can be translated, and refused, without EnvPool installed."""

from __future__ import annotations

from typing import Any

from rlperf.config.schema import EnvConfig
from rlperf.envs.ale_vector import NO_STEP_LIMIT


def envpool_options(cfg: EnvConfig, dim: int, training: bool) -> dict[str, Any]:
    """EnvPool's Atari options for an :class:`EnvConfig` (every knob set explicitly, because
    EnvPool's defaults are not DeepMind's: fire reset on, episodic life and clipping off).

    What EnvPool cannot honour (``ENGINE_FACTS["envpool"]``) the config checks refused
    before anything was built.
    """
    return {
        "stack_num": cfg.frame_stack,
        "frame_skip": cfg.frameskip,
        # EnvPool draws its no-ops from uniform(0, noop_max - 1) and crashes on 0; 1 gives
        # zero no-ops with fire reset (one without), the closest to "no no-ops".
        "noop_max": max(cfg.noop_max, 1),
        "use_fire_reset": cfg.fire_reset,
        "episodic_life": cfg.episodic_life and training,
        "zero_discount_on_life_loss": False,
        "reward_clip": cfg.clip_rewards and training,
        "img_height": dim,
        "img_width": dim,
        "gray_scale": cfg.grayscale,
        # cv2.INTER_AREA as AtariEnv's default; otherwise EnvPool's cv2.INTER_LINEAR.
        "use_inter_area_resize": cfg.resize_interpolation == "area",
        "repeat_action_probability": float(cfg.repeat_action_probability),
        "full_action_space": cfg.full_action_space,
        # Counted in agent steps over the whole game (not reset by a soft reset), like AtariEnv.
        "max_episode_steps": cfg.max_episode_steps or NO_STEP_LIMIT,
    }
