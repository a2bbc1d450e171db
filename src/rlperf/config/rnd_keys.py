"""Source 004's ``config.yaml`` keys (RND on Montezuma's Revenge), read as rlperf config.

A preset or a user's YAML file may use 004's CamelCase keys next to rlperf's own; each is
translated to the rlperf key it means. Keys that only made sense in 004's code (where to save,
TPU use) are accepted and ignored: rlperf writes checkpoints into the run directory.
"""

from __future__ import annotations

import difflib
import re
from typing import Any

from rlperf.core.errors import ConfigError

# 004 key -> rlperf dotted key
KEY_MAP: dict[str, str] = {
    "EnvName": "env.id",
    "MaxStepsPerEpisode": "env.max_episode_steps",
    "NumWorkers": "env.num_envs",
    "RolloutSteps": "rnd.num_steps",
    "NumInitSteps": "rnd.num_init_steps",
    "ExtRewardDiscount": "rnd.gamma",
    "IntRewardDiscount": "rnd.int_gamma",
    "ExtCoeff": "rnd.ext_coef",
    "IntCoeff": "rnd.int_coef",
    "LearningRate": "rnd.learning_rate",
    "ClipGradNorm": "rnd.max_grad_norm",
    "EpochSteps": "rnd.update_epochs",
    "NumEpochs": "stop.iterations",
    "RNDUpdateProportion": "rnd.update_proportion",
    "PPOEntropyCoeff": "rnd.ent_coef",
    "PPORewardEps": "rnd.clip_coef",
    "PPOAdvLambda": "rnd.gae_lambda",
}
# Keys with a translation of their own (below), and keys accepted but without effect.
SPECIAL = ("ImageHeight", "ImageWidth", "UseStickyAction", "StickyActionProb", "BatchSize")
SPECIAL += ("UseVTraceCorrection",)
IGNORED = ("SavePath", "UseTPU")
KNOWN = (*KEY_MAP, *SPECIAL, *IGNORED)


def _is_004_key(key: object) -> bool:
    return isinstance(key, str) and key[:1].isupper()


def _env_id(name: Any) -> str:
    """004's gym id to rlperf's: ``MontezumaRevengeNoFrameskip-v4`` -> ``ALE/MontezumaRevenge-v5``
    (rlperf applies frame skip and sticky actions itself, as the v4 NoFrameskip ids expected)."""
    match = re.fullmatch(r"(\w+?)NoFrameskip-v4", str(name))
    return f"ALE/{match.group(1)}-v5" if match else str(name)


def _set(out: dict[str, Any], dotted: str, value: Any) -> None:
    node = out
    *parents, leaf = dotted.split(".")
    for p in parents:
        child = node.setdefault(p, {})
        if not isinstance(child, dict):
            raise ConfigError(f"{p} must be a mapping of config keys, got {child!r}")
        node = child
    node[leaf] = value


def translate_rnd_keys(data: dict[str, Any], source: str) -> dict[str, Any]:
    """``data`` with every top-level 004 key replaced by its rlperf key; unchanged if none.

    Raises a one-line ConfigError for an unknown CamelCase key or inconsistent values.
    """
    if not any(_is_004_key(k) for k in data):
        return data
    out = {k: v for k, v in data.items() if not _is_004_key(k)}
    for key, value in data.items():
        if not _is_004_key(key):
            continue
        if key not in KNOWN:
            close = difflib.get_close_matches(key, KNOWN, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ConfigError(
                f"{source}: unknown key {key!r}{hint}; source 004's keys are {', '.join(KNOWN)}"
            )
        if key in KEY_MAP:
            _set(out, KEY_MAP[key], _env_id(value) if key == "EnvName" else value)
    height, width = data.get("ImageHeight"), data.get("ImageWidth")
    if height is not None or width is not None:
        if height is not None and width is not None and height != width:
            raise ConfigError(
                f"{source}: ImageHeight {height} != ImageWidth {width}; rlperf frames are square"
            )
        _set(out, "env.dim", height if height is not None else width)
    if "UseStickyAction" in data or "StickyActionProb" in data:
        sticky = data.get("UseStickyAction", True)
        if not isinstance(sticky, bool):
            raise ConfigError(f"{source}: UseStickyAction must be true or false, got {sticky!r}")
        _set(
            out,
            "env.repeat_action_probability",
            data.get("StickyActionProb", 0.25) if sticky else 0.0,
        )
    if "BatchSize" in data:
        # 004's BatchSize is the minibatch of each gradient step.
        _set(out, "rnd.minibatch_size", data["BatchSize"])
        _set(out, "rnd.num_minibatches", None)
    if "UseVTraceCorrection" in data:
        use = data["UseVTraceCorrection"]
        if not isinstance(use, bool):
            raise ConfigError(f"{source}: UseVTraceCorrection must be true or false, got {use!r}")
        # true: correct whenever the runner lags (rlperf's default); false: never.
        _set(out, "rnd.vtrace", None if use else False)
    return out
