"""The built-in models and how to build them for an observation space."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

from torch import nn

from rlperf.config.schema import EnvConfig, ModelConfig
from rlperf.core.errors import ConfigError
from rlperf.envs.facts import EnvFacts, env_facts
from rlperf.models.conv import NATURE_CNN, NIPS_CNN, ConvTorso, NatureTorso
from rlperf.models.policy import ActorCritic


@dataclass(frozen=True)
class ModelSpec:
    """A built-in model's architecture."""

    kind: str
    """conv (RLlib conv_filters), nature (Nature-CNN) or mlp."""
    description: str
    input_dim: int | None = None
    """Image side the model is designed for (None: any)."""
    conv_filters: tuple = ()
    """conv: RLlib conv_filters; nature: its 'valid' convs (empty = Nature-CNN's)."""
    vf_share_layers: bool = False
    hidden_sizes: tuple[int, ...] = ()
    """mlp: hidden layers; nature: the dense layer after the convs (with conv_filters)."""
    lstm_size: int = 0
    """mlp: an LSTM of this many units after the hidden layers (0 = none); such a model acts
    step by step with a state, which only the hogwild runner does."""

    @property
    def image_convs(self) -> tuple | list:
        """nature: the convs it builds (its own ``conv_filters``, else Nature-CNN's)."""
        return self.conv_filters or NATURE_CNN

    @property
    def observation(self) -> str:
        """What it reads: ``features`` (a flat vector, the MLPs) or ``image`` (stacked frames)."""
        return "features" if self.kind == "mlp" else "image"


# The thesis's Table 3.1 (source 001): RLlib VisionNetwork conv_filters, separate policy and
# value towers. Model 1 is RLlib's default for 84x84 inputs.
_THESIS = {
    1: (84, [[16, [8, 8], 4], [32, [4, 4], 2], [256, [11, 11], 1]]),
    2: (168, [[16, [16, 16], 8], [32, [4, 4], 2], [256, [11, 11], 1]]),
    3: (252, [[16, [8, 8], 4], [16, [8, 8], 4], [32, [4, 4], 2], [256, [8, 8], 1]]),
    4: (168, [[16, [8, 8], 4], [32, [4, 4], 2], [32, [4, 4], 2], [256, [11, 11], 1]]),
    5: (252, [[16, [8, 8], 4], [32, [4, 4], 2], [32, [4, 4], 2], [256, [16, 16], 1]]),
    6: (168, [[16, [8, 8], 4], [32, [4, 4], 2], [256, [21, 21], 1]]),
}

MODELS: dict[str, ModelSpec] = {
    "nature": ModelSpec(
        "nature", "Nature-CNN (32-64-64 convs, 512 fc), shared torso", 84, vf_share_layers=True
    ),
    # A third of Nature-CNN's multiply-adds and 2.6x its learner throughput on a 2-core CPU
    # (docs/benchmarks.md, "Time to solve"): the compute lever of the atari-fast preset.
    "nips": ModelSpec(
        "nature",
        "NIPS-DQN CNN (16-32 convs, 256 fc; Mnih et al. 2013), shared torso",
        84,
        conv_filters=tuple(map(tuple, NIPS_CNN)),
        vf_share_layers=True,
        hidden_sizes=(256,),
    ),
    **{
        f"thesis-{n}": ModelSpec(
            "conv",
            f"thesis model {n} (RLlib conv_filters, separate towers)",
            dim,
            conv_filters=tuple(map(tuple, filters)),
        )
        for n, (dim, filters) in _THESIS.items()
    },
    "mlp": ModelSpec(
        "mlp", "MLP for feature observations (tanh), separate towers", None, hidden_sizes=(64, 64)
    ),
    # Source 002's SimpleActorCriticLineal for football's 115 features: two 64-unit layers
    # relate the coordinates, a 256-unit layer where its pixel model had the LSTM, then the
    # actor and critic heads on the shared torso.
    "football-mlp": ModelSpec(
        "mlp",
        "MLP 64-64-256 (tanh), shared torso: source 002's football actor-critic",
        None,
        vf_share_layers=True,
        hidden_sizes=(64, 64, 256),
    ),
    # 002's recurrent variant: the 256-unit layer becomes an LSTM.
    "football-lstm": ModelSpec(
        "mlp",
        "MLP 64-64 then LSTM 256, actor and critic heads: source 002's recurrent variant (hogwild runner)",
        None,
        hidden_sizes=(64, 64),
        lstm_size=256,
    ),
}


AUTO = "auto"
"""The default model name: resolved against the env by :func:`run_model_name`."""


ACTIVATIONS: dict[str, type[nn.Module]] = {
    "relu": nn.ReLU,
    "elu": nn.ELU,
    "leaky_relu": nn.LeakyReLU,  # slope 0.01, torch's default
}
"""model.activation's choices for the image torsos."""


def resolve_model_name(name: str) -> str:
    """Canonical model name: '3' and 'thesis-3' are the same model (``auto`` stays ``auto``)."""
    if name == AUTO:
        return name
    key = f"thesis-{name}" if name.isdigit() else name
    if key not in MODELS:
        hint = difflib.get_close_matches(key, MODELS, n=1)
        more = f" (did you mean {hint[0]}?)" if hint else ""
        raise ConfigError(f"unknown model {name!r}{more}; valid: {', '.join(MODELS)} or 1..6")
    return key


def run_model_name(model: ModelConfig, env_id: str) -> str:
    """The model a run builds, by its canonical name: ``auto`` is the default model of
    ``env_id``'s kind of env (its row of ``ENV_FACTS``)."""
    return _model_name_for(model, env_facts(env_id))


def _model_name_for(model: ModelConfig, facts: EnvFacts) -> str:
    return resolve_model_name(facts.default_model if model.name == AUTO else model.name)


def frame_dim(env: EnvConfig, model: ModelConfig) -> int:
    """The Atari frame size: env.dim, else the model's designed input size, else 84 (a
    thesis model's own size is held to by :func:`check_model`)."""
    return env.dim or MODELS[run_model_name(model, env.id)].input_dim or 84


def shares_torso(cfg: ModelConfig, spec: ModelSpec) -> bool:
    """Whether the policy and value heads of model ``spec`` read one torso under ``cfg``."""
    return spec.vf_share_layers if cfg.vf_share_layers is None else cfg.vf_share_layers


def check_model_settings(cfg: ModelConfig, name: str) -> None:
    """Refuse (one line) a ``model.*`` setting that model ``name`` does not have; the config
    checks call this before anything is built, and :func:`build_model` trusts them."""
    spec = MODELS[name]
    if cfg.layer_norm and (spec.kind == "conv" or spec.lstm_size):
        raise ConfigError(f"model.layer_norm applies to nature, nips and mlp models, not {name}")
    if spec.kind == "mlp" and cfg.activation != "relu":
        raise ConfigError(
            f"model.activation={cfg.activation} applies to the image models; {name} uses tanh"
        )
    if cfg.vf_torso_grad_scale != 1.0 and (spec.lstm_size or not shares_torso(cfg, spec)):
        raise ConfigError(
            f"model.vf_torso_grad_scale applies to a shared convolutional or mlp torso, not to "
            f"{name} as configured; set model.vf_share_layers=true or leave the scale at 1"
        )
    if cfg.hidden_sizes is not None and spec.kind == "conv":
        raise ConfigError(
            f"model.hidden_sizes applies to the mlp, nature and nips models, not {name} "
            "(its layers are the thesis's conv filters)"
        )
    if cfg.hidden_sizes is not None and spec.kind == "nature" and len(cfg.hidden_sizes) != 1:
        raise ConfigError(
            f"model.hidden_sizes for {name} is one size, the dense layer after its convs "
            f"(got {cfg.hidden_sizes})"
        )
    if cfg.conv_channels is not None:
        convs = spec.image_convs
        if spec.kind != "nature":
            raise ConfigError(
                f"model.conv_channels applies to the nature and nips models, not {name}"
            )
        if len(cfg.conv_channels) != len(convs) or min(cfg.conv_channels) < 1:
            raise ConfigError(
                f"model.conv_channels for {name} is {len(convs)} positive channel counts, one per "
                f"conv (got {cfg.conv_channels})"
            )
    if spec.kind == "mlp" and cfg.zero_sum_first_layer:
        raise ConfigError(
            f"model.zero_sum_first_layer applies to the image models; {name} has no conv layer"
        )


def check_model(model: ModelConfig, env: EnvConfig, facts: EnvFacts) -> str:
    """Refuse (one line) a model that cannot serve the env of ``facts`` (:func:`check_env
    <rlperf.envs.facts.check_env>`) or a ``model.*`` setting it lacks; returns the model's
    canonical name."""
    name = _model_name_for(model, facts)
    check_model_settings(model, name)
    spec = MODELS[name]
    if spec.observation != facts.observation:
        fits = ", ".join(n for n, s in MODELS.items() if s.observation == facts.observation)
        raise ConfigError(
            f"model {name} reads {spec.observation} observations but {env.id} gives "
            f"{facts.observation}: use --model {facts.default_model} (models for it: {fits})"
        )
    # The thesis's models are cut for one frame size (their last conv spans the whole map);
    # the Nature and NIPS CNNs adapt to any size.
    if env.dim is not None and spec.kind == "conv" and spec.input_dim != env.dim:
        raise ConfigError(
            f"model {name} is designed for {spec.input_dim}x{spec.input_dim} inputs but env.dim "
            f"is {env.dim}; leave env.dim unset or pick a model for that size (see `rlperf models`)"
        )
    return name


def build_model(cfg: ModelConfig, obs_shape: tuple[int, ...], num_actions: int) -> ActorCritic:
    """The actor-critic for ``cfg`` (checked: :func:`check_model_settings`) on observations
    of ``obs_shape`` (C, H, W) or (features,)."""
    name = resolve_model_name(cfg.name)
    if name == AUTO:
        raise ConfigError("model auto must be resolved against the env first (run_model_name)")
    spec = MODELS[name]
    share = shares_torso(cfg, spec)

    if spec.kind == "mlp":
        if len(obs_shape) != 1:
            raise ConfigError(
                f"model mlp needs flat feature observations, got shape {obs_shape}; use nature or thesis-N for images"
            )
        hidden = tuple(cfg.hidden_sizes or spec.hidden_sizes)
        if spec.lstm_size:
            from rlperf.models.recurrent import RecurrentActorCritic

            return RecurrentActorCritic(obs_shape[0], num_actions, hidden, spec.lstm_size)  # type: ignore[return-value]

        def torso() -> tuple[nn.Module, int]:
            layers: list[nn.Module] = []
            size = obs_shape[0]
            for h in hidden:
                layers.append(nn.Linear(size, h))
                if cfg.layer_norm:
                    layers.append(nn.LayerNorm(h))
                layers.append(nn.Tanh())
                size = h
            return nn.Sequential(*layers), size

    else:
        if len(obs_shape) != 3:
            raise ConfigError(
                f"model {cfg.name} needs image observations (C, H, W), got shape {obs_shape}; use mlp"
            )
        channels, h, w = obs_shape
        activation = ACTIVATIONS[cfg.activation]

        def torso() -> tuple[nn.Module, int]:
            if spec.kind == "nature":
                sizes: dict[str, Any] = (
                    {"convs": spec.conv_filters, "hidden": spec.hidden_sizes[0]}
                    if spec.conv_filters
                    else {}
                )
                if cfg.hidden_sizes:  # one size: check_model_settings holds it to that
                    sizes["hidden"] = cfg.hidden_sizes[0]
                if cfg.conv_channels:  # one per conv: checked likewise
                    sizes["convs"] = [
                        [channels_out, kernel, stride]
                        for channels_out, (_, kernel, stride) in zip(
                            cfg.conv_channels, spec.image_convs, strict=True
                        )
                    ]
                t: nn.Module = NatureTorso(
                    channels,
                    (h, w),
                    input_scale=1.0 / 255.0,
                    activation=activation,
                    zero_sum_first_layer=cfg.zero_sum_first_layer,
                    layer_norm=cfg.layer_norm,
                    **sizes,
                )
            else:
                t = ConvTorso(
                    channels,
                    (h, w),
                    spec.conv_filters,
                    activation,
                    input_scale=1.0 / 255.0,
                    zero_sum_first_layer=cfg.zero_sum_first_layer,
                )
            return t, t.out_features  # type: ignore[return-value]

    try:
        policy_torso, features = torso()
    except ValueError as exc:
        raise ConfigError(f"model {cfg.name}: {exc}") from None
    value_torso = None if share else torso()[0]
    return ActorCritic(policy_torso, value_torso, features, num_actions, cfg.vf_torso_grad_scale)


def count_parameters(module: nn.Module) -> int:
    """Trainable parameters."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad)
