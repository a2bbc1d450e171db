"""A run's trained policy, and the graph that every exporter converts.

The exported graph is the whole network, as the thesis exported it: raw observation in
(uint8 frames for Atari, float32 features otherwise), the scaling to [0, 1] inside,
``logits`` and ``value`` out. Acting needs only the logits, but the fidelity check compares
the value head too (the thesis's ``output[1]``), and every backend then runs the same graph.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from rlperf.config.schema import ALGORITHM_FACTS, RunConfig
from rlperf.core.errors import UserInputError
from rlperf.models.policy import ActorCritic, network_input

CONFIG_FILE = "config.yaml"
SHIPPED_PREFIX = "shipped:"
"""``infer.run`` (and :func:`resolve_policy_source`) spelling of a policy shipped with rlperf."""
SHIPPED_DIR = Path(__file__).resolve().parent / "policies"
"""Run directories of policies trained by rlperf and shipped inside the package (each with a
``provenance.json`` saying how it was made)."""


@dataclass
class RunPolicy:
    """The policy of one checkpoint of a run, on the CPU in eval mode."""

    run_dir: Path
    cfg: RunConfig
    model: ActorCritic
    obs_shape: tuple[int, ...]
    obs_dtype: np.dtype
    num_actions: int
    dim: int
    """Atari frame size the run was trained with (ignored for feature observations)."""
    checkpoint: Path

    def example(self, batch: int = 1) -> torch.Tensor:
        """A zero observation batch of the run's shape and dtype (for tracing)."""
        return torch.from_numpy(np.zeros((batch, *self.obs_shape), self.obs_dtype))


def check_run_dir(path: Path) -> Path:
    """``path`` if it is a run directory (holds config.yaml), else a one-line UserInputError."""
    if not path.exists():
        raise UserInputError(
            f"run directory {path} does not exist; pass the run_dir that `rlperf train` printed"
        )
    if not (path / CONFIG_FILE).is_file():
        raise UserInputError(
            f"{path} is not a run directory (no {CONFIG_FILE}); pass the run_dir that `rlperf train` printed"
        )
    return path


def shipped_policies() -> list[str]:
    """Names of the policies shipped with rlperf (``shipped:NAME``)."""
    if not SHIPPED_DIR.is_dir():
        return []
    return sorted(p.name for p in SHIPPED_DIR.iterdir() if (p / CONFIG_FILE).is_file())


def resolve_policy_source(value: str) -> Path:
    """The run directory that ``value`` names: ``shipped:NAME`` or a path.

    A shipped policy lives inside the installed package: callers that write exports next to
    the policy copy it first (see :mod:`rlperf.sweep.infer_point`)."""
    if not value.startswith(SHIPPED_PREFIX):
        return check_run_dir(Path(value))
    name = value.removeprefix(SHIPPED_PREFIX)
    if name not in shipped_policies():
        valid = ", ".join(SHIPPED_PREFIX + n for n in shipped_policies()) or "none installed"
        raise UserInputError(f"no shipped policy {value!r}; valid: {valid}")
    return SHIPPED_DIR / name


def env_spec(cfg: RunConfig) -> tuple[int, tuple[int, ...], np.dtype, int]:
    """(frame size, observation shape, observation dtype, number of actions) of ``cfg``'s game.

    Read from an evaluation env built with the run's preprocessing, so they are exactly what
    the policy saw in training.
    """
    from rlperf.envs.make import make_env, validate_env_id
    from rlperf.models.catalog import frame_dim

    validate_env_id(cfg.env.id)
    dim = frame_dim(cfg.env, cfg.model)
    env = make_env(cfg.env, dim, cfg.seed, training=False)
    try:
        space = env.observation_space
        return dim, tuple(space.shape or ()), np.dtype(space.dtype), int(env.action_space.n)
    finally:
        close = getattr(env, "close", None)
        if close is not None:
            close()


def load_run_policy(run_dir: Path, checkpoint: Path | None = None) -> RunPolicy:
    """The policy of ``checkpoint`` (default: the run's latest) of the run in ``run_dir``.

    Raises :class:`UserInputError` (one line) for a missing run directory or checkpoint.
    """
    from rlperf.config.validate import load_valid_config
    from rlperf.core.checkpoint import load_policy
    from rlperf.models.catalog import build_model

    run_dir = check_run_dir(Path(run_dir))
    cfg = load_valid_config(run_dir / CONFIG_FILE)
    if ALGORITHM_FACTS[cfg.algo].q_values:
        # Its network outputs Q-values, not the (logits, value) every backend serves.
        served = ", ".join(a for a, f in ALGORITHM_FACTS.items() if not f.q_values)
        raise UserInputError(
            f"{run_dir} is a {cfg.algo} run; export, infer and deploy serve the actor-critic "
            f"algorithms ({served}); play it with rlperf enjoy"
        )
    dim, obs_shape, obs_dtype, num_actions = env_spec(cfg)
    model = build_model(cfg.model, obs_shape, num_actions)
    state = load_policy(model, run_dir, checkpoint, f"the run's model {cfg.model.name}")
    return RunPolicy(
        run_dir=run_dir,
        cfg=cfg,
        model=model.eval(),
        obs_shape=obs_shape,
        obs_dtype=obs_dtype,
        num_actions=num_actions,
        dim=dim,
        checkpoint=Path(state["_checkpoint_path"]),
    )


class PolicyGraph(nn.Module):
    """What gets exported: observation -> ``logits`` (and ``value`` with ``with_value``).

    The input may be the raw uint8 frame or the same values as float32 (0..255): the
    network's own input scaling (in its first conv) is applied either way. The
    float form exists only for TFLite's int8 calibrator, which needs a float input to give it
    a quantized uint8 one.
    """

    def __init__(self, model: ActorCritic, with_value: bool = False, named: bool = False) -> None:
        super().__init__()
        self.model = model
        self.with_value = with_value
        self.named = named
        """Return a dict {name: tensor} (LiteRT names signature outputs after its keys)."""

    @property
    def output_names(self) -> list[str]:
        return ["logits", "value"] if self.with_value else ["logits"]

    def forward(self, obs: torch.Tensor):  # noqa: ANN201 - a tensor, a tuple or a dict
        m = self.model
        x = network_input(obs)
        hidden = m.policy_torso(x)
        logits = m.logits_head(hidden)
        outputs = (logits,)
        if self.with_value:
            outputs = (logits, m.value_head(m.value_features(x, hidden)).squeeze(-1))
        if self.named:
            return dict(zip(self.output_names, outputs, strict=True))
        return outputs if self.with_value else logits


@torch.no_grad()
def torch_outputs(
    model: ActorCritic, obs: np.ndarray, batch: int = 256
) -> tuple[np.ndarray, np.ndarray]:
    """Reference fp32 (logits (N, A), value (N,)) of ``model`` on ``obs`` (N, ...), in
    batches, as float32."""
    logits, values = [], []
    for i in range(0, len(obs), batch):
        lg, v = model(torch.from_numpy(np.ascontiguousarray(obs[i : i + batch])))
        logits.append(lg.float().numpy())
        values.append(v.float().numpy())
    if not logits:
        return np.zeros((0, model.logits_head.out_features), np.float32), np.zeros(0, np.float32)
    return np.concatenate(logits), np.concatenate(values)


def torch_logits(model: ActorCritic, obs: np.ndarray, batch: int = 256) -> np.ndarray:
    """Reference fp32 logits of ``model`` on ``obs`` (N, ...), in batches, as float32."""
    return torch_outputs(model, obs, batch)[0]
