"""The run configuration: nested dataclasses, one per concern.

Every field carries a one-line docstring right under it; ``rlperf train --help`` is built
from those docstrings, so they are the user documentation of each knob. Hyperparameter
names follow the community (CleanRL / Stable-Baselines3 / RLlib): ``num_envs``,
``num_steps``, ``gamma``, ``gae_lambda``, ``clip_coef``, ...

Long by nature: one field per knob, each with its documentation.
"""

from __future__ import annotations

import copy
import typing
from dataclasses import FrozenInstanceError, dataclass, field, fields, is_dataclass
from typing import ClassVar, Literal

# The enumerations: each is declared once, here; parsing (config.load.coerce), validation,
# `rlperf train --help` and the error messages all read the values from these.
Engine = Literal["gymnasium", "envpool", "ale-vector"]
ResizeInterpolation = Literal["area", "linear", "nearest"]
FaultSite = Literal["step", "reset", "both"]
Precision = Literal["fp32", "bf16", "auto"]
Optimizer = Literal["rmsprop", "adam"]
QOptimizer = Literal["radam", "adam"]
DqnLoss = Literal["mse", "huber"]
RewardMetric = Literal["mean100", "ema", "mean100+ema"]
ScheduleBudget = Literal["total_timesteps", "wall_time_s", "wall_time_steps"]
Activation = Literal["relu", "elu", "leaky_relu"]
NanPolicy = Literal["raise", "skip_update", "warn", "none"]

FAULT_SITES: tuple[str, ...] = typing.get_args(FaultSite)
"""Where ``env.fault_at`` injects crashes: in ``step``, in ``reset`` or in both."""


class Section:
    """A part of the run configuration: assignable while a config is being put together
    (defaults, presets, files, flags), read-only once :func:`freeze` has marked it resolved.

    Not a frozen dataclass: presets, sweeps and the CLI build a config key by key, and only
    the resolved config that a run starts from must never change again."""

    _frozen: ClassVar[bool] = False

    def __setattr__(self, name: str, value: object) -> None:
        if self._frozen:
            raise FrozenInstanceError(
                f"cannot set {type(self).__name__}.{name}: a resolved config is read-only "
                "(build a new one with config.schema.thawed_copy)"
            )
        super().__setattr__(name, value)


def _sections(cfg: Section) -> list[Section]:
    found = [cfg]
    for f in fields(cfg):  # type: ignore[arg-type]
        value = getattr(cfg, f.name)
        if is_dataclass(value) and isinstance(value, Section):
            found += _sections(value)
    return found


def freeze(cfg: RunConfig) -> RunConfig:
    """Mark ``cfg`` and every section of it read-only; returns ``cfg``."""
    for section in _sections(cfg):
        object.__setattr__(section, "_frozen", True)
    return cfg


def is_frozen(cfg: RunConfig) -> bool:
    """Whether ``cfg`` is a resolved, read-only config."""
    return cfg._frozen


def thawed_copy(cfg: RunConfig) -> RunConfig:
    """An independent, assignable copy of ``cfg`` (frozen or not)."""
    new = copy.deepcopy(cfg)
    for section in _sections(new):
        section.__dict__.pop("_frozen", None)
    return new


@dataclass
class EnvConfig(Section):
    """The game and its preprocessing."""

    id: str = "ALE/Pong-v5"
    """Gymnasium environment id (Atari games as ALE/<Game>-v5; any registered id such as CartPole-v1)."""
    engine: Engine = "gymnasium"
    """What steps the games: gymnasium (rlperf's own preprocessing, exact snapshots), envpool or ale-vector (C++ thread pools, Atari only)."""
    num_envs: int = 8
    """Number of environment copies stepped together (the batch of the acting forward pass)."""
    num_threads: int | None = None
    """C++ engines (envpool, ale-vector): the worker threads that step one process's envs; unset = one per usable core, at most num_envs. With the decoupled runner every actor process runs its own pool of this many threads; unset there, the actors share the usable cores (cores / runner.num_workers each)."""
    dim: int | None = None
    """Atari frame size after resizing (dim x dim); unset = the model's input size (84, 168 or 252)."""
    frame_stack: int = 4
    """Atari: number of consecutive frames stacked into one observation."""
    frameskip: int = 4
    """Atari: emulator frames per agent step (the action is repeated)."""
    frameskip_max: int | None = None
    """Atari: each step repeats its action a uniformly drawn frameskip..frameskip_max frames (Pong-v0's random 2 to 4: frameskip=2, frameskip_max=4); gymnasium engine only; unset = always frameskip."""
    max_pool: bool = True
    """Atari: max-pool the last two frames of each skip (removes sprite flicker)."""
    resize_interpolation: ResizeInterpolation = "area"
    """Atari: how frames are shrunk to dim x dim: area (OpenCV INTER_AREA, smoothest), linear (about 7x faster) or nearest; engine envpool takes area or linear, ale-vector only its built-in area."""
    noop_max: int = 30
    """Atari: up to this many random no-op actions after each reset (0 disables)."""
    fire_reset: bool = True
    """Atari: press FIRE after reset in games that need it to start."""
    episodic_life: bool = True
    """Atari: a lost life ends the training episode (the true game continues; returns are per game)."""
    clip_rewards: bool = True
    """Clip training rewards to their sign (-1, 0, +1); reported returns stay unclipped."""
    grayscale: bool = True
    """Atari: convert frames to grayscale (otherwise RGB, 3 channels per stacked frame)."""
    repeat_action_probability: float = 0.0
    """Atari sticky actions: probability the emulator repeats the previous action (0.25 in Pong-v0 / v5 default)."""
    full_action_space: bool = False
    """Atari: use all 18 actions instead of the game's minimal set."""
    max_episode_steps: int | None = 27000
    """Truncate a game after this many agent steps (27000 x frameskip 4 = 108000 frames); unset = no limit."""
    fault_p_crash: float = 0.0
    """Fault injection (gymnasium engine): probability that an env step/reset raises (tests a run's restarts and clean stops)."""
    fault_p_stall: float = 0.0
    """Fault injection: probability that an env step/reset hangs for fault_stall_time_s."""
    fault_stall_time_s: float = 60.0
    """Fault injection: how long an injected stall lasts."""
    fault_at: FaultSite = "step"
    """Fault injection: where faults strike: step, reset or both."""
    fault_envs: list[int] | None = None
    """Fault injection: only these envs fault (env i of the run; a runner with k envs per worker gives worker w envs w*k .. w*k+k-1), e.g. 0 or 2,3; unset = every env."""

    @property
    def mean_frameskip(self) -> float:
        """Emulator frames per agent step on average (frameskip..frameskip_max uniformly)."""
        return (self.frameskip + (self.frameskip_max or self.frameskip)) / 2


@dataclass
class ModelConfig(Section):
    """The policy network."""

    name: str = "auto"
    """Built-in model: nature, nips, thesis-1 ... thesis-6 (or 1..6), mlp, football-mlp, football-lstm (see `rlperf models`); auto = nature for Atari games, football-mlp for the football games, mlp for other feature observations."""
    vf_share_layers: bool | None = None
    """Share the torso between policy and value heads; unset = the model's default (thesis models: separate towers)."""
    hidden_sizes: list[int] | None = None
    """MLP hidden layer sizes; unset = the model's default (mlp: 64, 64)."""
    activation: Activation = "relu"
    """Activation of the image models' layers (nature, nips, thesis-N): relu; elu (rl_games' Atari choice) or leaky_relu (slope 0.01), whose negative sides keep a gradient so that a unit pushed below zero on every frame can come back (on Pong only ELU's did; feature models use tanh)."""
    zero_sum_first_layer: bool = False
    """Image models: constrain each first-layer filter to weights that sum to zero (its weight minus their mean, in the forward pass), so that a uniform background answers with the bias alone, whatever its brightness; keeps ReLU's first-layer filters alive on bright uniform backgrounds such as Pong's (models.conv.InputScaledConv2d)."""
    layer_norm: bool = False
    """LayerNorm after every hidden layer, before its activation (over channels and positions after a conv): what keeps PQN's Q-learning stable without a target network; nature, nips and mlp models."""


@dataclass
class PPOConfig(Section):
    """Proximal Policy Optimization hyperparameters."""

    num_steps: int = 128
    """Steps collected per env per iteration (rollout length T); a batch is num_envs x num_steps."""
    num_minibatches: int | None = 4
    """Minibatches per epoch (CleanRL); or set this to null and minibatch_size instead (RLlib)."""
    minibatch_size: int | None = None
    """Samples per minibatch (RLlib's sgd_minibatch_size); set exactly one of the two."""
    update_epochs: int = 4
    """Passes over the batch per iteration (RLlib's num_sgd_iter)."""
    learning_rate: float = 2.5e-4
    """Adam learning rate."""
    anneal_lr: bool = True
    """Anneal the learning rate linearly to 0 over the run's budget (stop.anneal_over: env steps or training seconds)."""
    lr_kl_target: float | None = None
    """Adapt the learning rate to the policy's change (rl_games' adaptive schedule): after each iteration, divided by 1.5 when the mean approx KL exceeds 2x this target and multiplied by 1.5 below half of it, within [lr_min, lr_max]; learning_rate is where it starts. Unset = off."""
    lr_min: float = 1e-6
    """Lower bound of the adaptive learning rate (lr_kl_target)."""
    lr_max: float = 1e-2
    """Upper bound of the adaptive learning rate (lr_kl_target)."""
    adam_eps: float = 1e-5
    """Adam epsilon."""
    gamma: float = 0.99
    """Discount factor."""
    gae_lambda: float = 0.95
    """GAE lambda (1.0 = Monte-Carlo advantages)."""
    clip_coef: float = 0.1
    """Surrogate clipping coefficient epsilon."""
    vf_clip_coef: float | None = 0.1
    """Clip the new value prediction to old value +- this (CleanRL's clip_vloss); unset = off."""
    vf_loss_clip: float | None = None
    """Clamp the squared value error at this value (RLlib's vf_clip_param); unset = off."""
    ent_coef: float = 0.01
    """Entropy bonus coefficient."""
    anneal_ent_coef: bool = False
    """Anneal the entropy coefficient linearly to 0 over the run's budget (stop.anneal_over), like anneal_lr: exploration early, a sharper policy at the end."""
    vf_coef: float = 0.5
    """Value loss coefficient."""
    max_grad_norm: float | None = 0.5
    """Clip the global gradient norm to this value; unset = no clipping."""
    norm_adv: bool = True
    """Normalise advantages per minibatch."""
    kl_coeff: float = 0.0
    """Initial coefficient of the adaptive KL penalty (RLlib's kl_coeff; 0 = off)."""
    kl_penalty_target: float = 0.01
    """KL target of the adaptive penalty (RLlib's kl_target; that spelling is accepted): the coefficient x1.5 above 2x target, x0.5 below target/2."""
    target_kl: float | None = None
    """Stop the epochs of an iteration early once approx KL exceeds this; unset = never."""


@dataclass
class IMPALAConfig(Section):
    """IMPALA hyperparameters: V-trace actor-critic (Espeholt et al. 2018); defaults after the paper's Atari runs."""

    num_steps: int = 20
    """Steps per env per unroll (the paper's Atari unroll length); a batch is num_envs x num_steps."""
    num_minibatches: int = 1
    """Gradient steps per batch, each on a slice of whole env trajectories (1 = the paper's one step per batch)."""
    learning_rate: float = 6e-4
    """Learning rate (the paper's Atari value)."""
    anneal_lr: bool = True
    """Anneal the learning rate linearly to 0 over the run's step budget (as the paper does)."""
    optimizer: Optimizer = "rmsprop"
    """Optimizer: rmsprop (the paper's) or adam (RLlib's default for IMPALA)."""
    rmsprop_alpha: float = 0.99
    """RMSprop smoothing constant of the squared-gradient average (the paper's decay 0.99)."""
    optimizer_eps: float = 1e-5
    """Optimizer epsilon (impala.eps is accepted); torch adds it outside the square root, to a mean (not summed) loss's gradients."""
    gamma: float = 0.99
    """Discount factor."""
    rho_bar: float = 1.0
    """V-trace truncation of the importance weights rho (rho_bar); sets the policy whose value is learned."""
    c_bar: float = 1.0
    """V-trace truncation of the trace coefficients c (c_bar, at most rho_bar); trades contraction speed for variance."""
    vf_coef: float = 0.5
    """Value loss coefficient (the paper's baseline loss scaling)."""
    ent_coef: float = 0.01
    """Entropy bonus coefficient (the paper's Atari entropy cost)."""
    max_grad_norm: float | None = 0.5
    """Clip the global gradient norm to this value; unset = no clipping (the paper's 40 is on a summed loss)."""
    max_policy_lag: int = 4
    """Learner updates by which the behaviour policy may trail the learner (V-trace corrects the lag)."""


@dataclass
class APPOConfig(Section):
    """Asynchronous PPO (RLlib's APPO): PPO's clipped surrogate on V-trace advantages and value targets."""

    num_steps: int = 128
    """Steps collected per env per iteration (rollout length T); a batch is num_envs x num_steps."""
    num_minibatches: int = 4
    """Minibatches per epoch."""
    update_epochs: int = 4
    """Passes over the batch per iteration (RLlib's num_sgd_iter)."""
    learning_rate: float = 2.5e-4
    """Adam learning rate."""
    anneal_lr: bool = True
    """Anneal the learning rate linearly to 0 over the run's budget (stop.anneal_over: env steps or training seconds)."""
    adam_eps: float = 1e-5
    """Adam epsilon."""
    gamma: float = 0.99
    """Discount factor."""
    clip_coef: float = 0.1
    """Surrogate clipping coefficient epsilon (RLlib's clip_param), around the policy at the start of the iteration."""
    rho_bar: float = 1.0
    """V-trace truncation of the importance weights rho (RLlib's vtrace_clip_rho_threshold)."""
    c_bar: float = 1.0
    """V-trace truncation of the trace coefficients c (at most rho_bar)."""
    vf_coef: float = 0.5
    """Value loss coefficient."""
    ent_coef: float = 0.01
    """Entropy bonus coefficient."""
    max_grad_norm: float | None = 0.5
    """Clip the global gradient norm to this value; unset = no clipping."""
    norm_adv: bool = True
    """Normalise advantages per minibatch."""
    max_policy_lag: int = 2
    """Learner updates by which the behaviour policy may trail the learner (V-trace corrects the lag)."""


@dataclass
class RNDConfig(Section):
    """Random Network Distillation (Burda et al. 2018) on PPO with two value heads; defaults after the paper and source 004."""

    num_steps: int = 128
    """Steps collected per env per iteration (rollout length T; 004's RolloutSteps)."""
    num_minibatches: int | None = 4
    """Minibatches per epoch; or set this to null and minibatch_size instead (004's BatchSize)."""
    minibatch_size: int | None = None
    """Samples per minibatch (004's BatchSize); set exactly one of the two."""
    update_epochs: int = 4
    """Passes over the batch per iteration (004's EpochSteps)."""
    learning_rate: float = 1e-4
    """Adam learning rate of policy, value heads and predictor together."""
    anneal_lr: bool = False
    """Anneal the learning rate linearly to 0 over the run's step budget (the paper keeps it constant)."""
    adam_eps: float = 1e-8
    """Adam epsilon."""
    gamma: float = 0.999
    """Discount of extrinsic rewards (004's ExtRewardDiscount)."""
    int_gamma: float = 0.99
    """Discount of intrinsic rewards (004's IntRewardDiscount); the intrinsic stream ignores episode ends."""
    gae_lambda: float = 0.95
    """GAE lambda of both streams (004's PPOAdvLambda); also the trace lambda of V-trace."""
    ext_coef: float = 2.0
    """Weight of the extrinsic advantage (004's ExtCoeff; 0 = intrinsic-only agent)."""
    int_coef: float = 1.0
    """Weight of the intrinsic advantage (004's IntCoeff)."""
    clip_coef: float = 0.1
    """Surrogate clipping coefficient epsilon (004's PPORewardEps)."""
    ent_coef: float = 0.001
    """Entropy bonus coefficient (004's PPOEntropyCoeff)."""
    vf_coef: float = 0.5
    """Value loss coefficient (both heads)."""
    max_grad_norm: float | None = 0.5
    """Clip the global gradient norm to this value (004's ClipGradNorm); unset = no clipping."""
    norm_adv: bool = True
    """Normalise the combined advantages per minibatch."""
    vf_clip_coef: float | None = None
    """Clip both heads' new values to old +/- this before the squared error, as PPO's vf_clip_coef; unset = off (004)."""
    target_kl: float | None = None
    """Stop the epochs of an iteration early once approx KL exceeds this, as PPO's target_kl; unset = never (004)."""
    update_proportion: float = 0.25
    """Share of each minibatch the predictor trains on (004's RNDUpdateProportion), so it does not learn faster than the policy explores."""
    num_init_steps: int = 128
    """Env steps per env that only initialise the observation normaliser before learning starts (004's NumInitSteps); the untrained policy acts almost uniformly at random meanwhile."""
    obs_clip: float = 5.0
    """Clip normalised observations of the RND networks to +- this."""
    vtrace: bool | None = None
    """Correct for policy lag with V-trace on both advantage streams; unset = on exactly when the runner acts with a lagged policy (decoupled)."""
    rho_bar: float = 1.0
    """V-trace truncation of the importance weights rho."""
    c_bar: float = 1.0
    """V-trace truncation of the trace coefficients c (at most rho_bar)."""
    max_policy_lag: int = 2
    """Learner updates by which the behaviour policy may trail the learner (decoupled runner)."""


@dataclass
class PQNConfig(Section):
    """Parallelised Q-Network (Gallici et al. 2024): Q(lambda) regression on rollouts of many envs, no replay buffer, no target network; defaults are the paper's Atari settings."""

    num_steps: int = 32
    """Steps collected per env per iteration (rollout length T; the paper's NUM_STEPS)."""
    num_minibatches: int = 32
    """Minibatches per epoch."""
    update_epochs: int = 2
    """Passes over the batch per iteration (the paper's NUM_EPOCHS)."""
    learning_rate: float = 2.5e-4
    """Learning rate."""
    anneal_lr: bool = False
    """Anneal the learning rate linearly to 0 over the run's budget (stop.anneal_over); the paper keeps it constant on Atari."""
    optimizer: QOptimizer = "radam"
    """radam (the paper's RAdam) or adam."""
    optimizer_eps: float = 1e-8
    """Optimizer epsilon."""
    gamma: float = 0.99
    """Discount factor."""
    q_lambda: float = 0.65
    """Lambda of the Q(lambda) returns (0 = one-step Q-learning targets, 1 = Monte Carlo within the rollout)."""
    start_e: float = 1.0
    """Exploration: epsilon at the start."""
    end_e: float = 0.001
    """Exploration: epsilon after the decay."""
    exploration_fraction: float = 0.1
    """Exploration: share of the run's budget (stop.anneal_over) over which epsilon decays linearly."""
    max_grad_norm: float | None = 10.0
    """Clip the global gradient norm to this value; unset = no clipping."""
    reward_scale: float = 1.0
    """Multiply rewards by this before the returns (the paper uses 0.1 on CartPole)."""
    max_policy_lag: int = 2
    """Learner updates by which the acting network may trail the learner on the decoupled runner (Q(lambda) learns off-policy; the lag only biases its traces)."""


@dataclass
class DQNConfig(Section):
    """DQN hyperparameters (Mnih et al. 2015); defaults are source 003's Pong baseline (Deep RL Hands-On, ch. 8-9)."""

    buffer_size: int = 100_000
    """Replay capacity in transitions (frames stored once, uint8: 100k Atari transitions take about 0.7 GB)."""
    learning_starts: int = 10_000
    """Transitions in the replay before the first gradient step (003: 10k initial transitions)."""
    batch_size: int = 32
    """Transitions sampled from the replay per gradient step."""
    train_frequency: int = 1
    """Env steps (all envs together) per gradient step; batch_size / train_frequency samples are replayed per new transition."""
    steps_per_iteration: int = 1000
    """Env steps (all envs together) per iteration, i.e. per metrics record; rounded up to whole vector steps or play chunks."""
    learning_rate: float = 1e-4
    """Adam learning rate."""
    adam_eps: float = 1e-8
    """Adam epsilon."""
    gamma: float = 0.99
    """Discount factor."""
    target_network_frequency: int = 1000
    """Env steps between two copies of the online network into the target network."""
    start_e: float = 1.0
    """Exploration: epsilon at the start of the run."""
    end_e: float = 0.02
    """Exploration: epsilon after the linear decay."""
    exploration_fraction: float = 0.1
    """Exploration: share of stop.total_timesteps over which epsilon decays linearly (ignored when exploration_steps is set)."""
    exploration_steps: int | None = None
    """Exploration: env steps over which epsilon decays linearly (003: 100000); unset = exploration_fraction x stop.total_timesteps."""
    loss: DqnLoss = "mse"
    """TD loss: mse (003's) or huber (smooth L1, the Nature paper's error clipping)."""
    double_q: bool = False
    """Double DQN (van Hasselt et al. 2016): the online network picks the next action, the target network values it."""
    max_grad_norm: float | None = None
    """Clip the global gradient norm to this value; unset = no clipping (003)."""
    no_grad: bool = True
    """Act and compute targets under torch.no_grad(); false reproduces 003's 00_slow_grads rung (autograd graphs built and thrown away)."""


@dataclass
class A3CConfig(Section):
    """A3C hyperparameters (Mnih et al. 2016); defaults are source 002's football run (n-step advantages with GAE parameter tau, losses summed over each segment)."""

    num_local_steps: int = 50
    """Steps per env in one update segment: a worker syncs from the shared model, plays this many steps, then applies one gradient step."""
    learning_rate: float = 1e-4
    """Learning rate of the shared optimizer."""
    optimizer: Optimizer = "rmsprop"
    """Shared optimizer: rmsprop (002's GlobalRMSprop) or adam (002's GlobalAdam); statistics live in shared memory."""
    optimizer_eps: float = 1e-8
    """Optimizer epsilon (a3c.eps is accepted)."""
    gamma: float = 0.99
    """Discount factor."""
    gae_lambda: float = 1.0
    """GAE lambda of the actor's advantages (002's tau; a3c.tau is accepted; 1.0 = n-step advantages)."""
    ent_coef: float = 0.01
    """Entropy bonus coefficient (002's beta)."""
    vf_coef: float = 1.0
    """Critic loss coefficient (002: 1, the critic's squared error halved)."""
    max_grad_norm: float | None = None
    """Clip each segment's gradient norm to this value before it is applied; unset = no clipping (002)."""
    value_clip: float | None = None
    """Clamp the critic's error (n-step return - value) to +- this in the critic loss; unset = off (one of 002's experiments)."""
    standardize_rewards: bool = False
    """Standardise the rewards of each segment to zero mean and unit variance before the returns (one of 002's experiments; off)."""
    time_penalty: float = 0.0
    """Subtract this from every training reward (002 found a per-step penalty slows learning; 0 = off). Reported returns stay the game's."""
    lr_drop_steps: int | None = None
    """Env steps after which the learning rate is multiplied by lr_drop_factor (002 dropped 1e-4 to 1e-5 by hand after about 500 episodes); unset = constant."""
    lr_drop_factor: float = 0.1
    """Factor applied to the learning rate at lr_drop_steps."""
    init_weights: str | None = None
    """Start from these weights: a .safetensors file or a run's checkpoint directory; only tensors whose names and shapes match are loaded, and a report names the rest."""


@dataclass
class RunnerConfig(Section):
    """Who steps the envs, where the networks live, and which CPU resources are used."""

    name: str = "inproc"
    """Execution architecture: inproc (envs and learner in one process), subprocess (envs in worker processes, shared memory), decoupled (actor processes acting while the learner learns; needs appo or impala), play-train (DQN: a play process feeds transitions to the training process), ray (Ray actors on a local Ray or a cluster: runner.ray_*), rllib (RLlib 1.1's rollout workers, the thesis's -w: Ray actors with their own policy copies, weights pushed to each after every update) or hogwild (A3C: worker processes learning into a shared model and optimizer)."""
    num_workers: int = 1
    """Env worker processes (subprocess), actor processes (decoupled), Ray actors (ray, rllib) or learning processes (hogwild); num_envs must divide evenly among them (inproc: no effect)."""
    num_learners: int = 1
    """Data-parallel learner processes, each with its own envs, averaging gradients every step (torch.distributed: gloo on CPU, nccl on GPUs, one GPU per learner); the batch per update grows with them."""
    learner_device: str = "cpu"
    """Device of the learner's network: cpu, cuda, cuda:N."""
    actor_device: str = "cpu"
    """Device of the acting copy of the network: cpu, cuda, cuda:N."""
    torch_threads: int | None = None
    """torch intra-op threads of the learner process; unset = torch's default (all cores), or with the decoupled runner the cores its actors leave (at least 1)."""
    act_threads: int | None = None
    """torch intra-op threads while the learner's process acts (inproc and subprocess runners); unset = torch_threads. 1 keeps the acting forward off the cores a C++ engine's threads step on; on 2 vCPUs it did not pay (0.92x-1.10x on Pong, docs/benchmarks.md)."""
    cpu_affinity: list[int] | None = None
    """Pin the process to these CPU ids (os.sched_setaffinity), e.g. 0,1 or 0-3; unset = no pinning."""
    actor_threads: int = 1
    """torch intra-op threads of each actor process (decoupled runner); 1 avoids oversubscribing the cores."""
    actor_cpu_affinity: list[int] | None = None
    """Pin the actor processes (decoupled runner) to these CPU ids; unset = no pinning."""
    slots_per_actor: int = 2
    """Rollout slots in shared memory per actor (decoupled runner): 2 = double buffering; more lets actors run further ahead (more lag)."""
    precision: Precision = "fp32"
    """Learner compute precision: fp32, bf16 (autocast; fast on CPUs with AMX and on recent GPUs, slower on some CPUs with only AVX512-BF16) or auto (a few seconds of the real learner step timed in every precision and layout on this machine, the fastest chosen, cached per machine and model, figures in the manifest)."""
    channels_last: bool = True
    """Keep conv weights and activations in channels-last layout (same results, usually faster oneDNN kernels); with precision=auto the timing chooses it too."""
    compile: bool = False
    """torch.compile the network where it learns and acts (inproc and subprocess runners; seconds to minutes of compiling first). Off: 0.98x end to end on Pong with a bf16 CPU learner (docs/benchmarks.md)."""
    cuda_graph: bool = False
    """Record as CUDA graphs, once, and replay: the learner's minibatch step (forward, loss, backward, clipping, Adam; ppo and appo) and the acting forward (inproc and decoupled runners). One launch instead of hundreds, for small networks whose GPU waits on Python. The losses are checked once per update instead of every step; on a CPU the same code runs without graphs."""
    retain_freed_memory: bool = True
    """Linux/glibc: keep freed memory mapped for reuse, so minibatches do not page-fault fresh memory."""
    restart_failed_workers: bool = True
    """Restart an env worker that raised, died or hung, up to max_worker_restarts times in the run; otherwise the run stops cleanly."""
    max_worker_restarts: int = 3
    """Worker restarts allowed over the whole run before a failure stops it."""
    worker_timeout_s: float | None = None
    """Seconds without a reply before workers count as hung: an env worker's step (subprocess runner, default 60) or any rollout from the actors or play process (decoupled and play-train runners, default 300)."""
    play_chunk_steps: int = 4
    """play-train runner: vector steps the play process writes into one shared-memory chunk (one pipe message per chunk)."""
    play_queue_chunks: int = 8
    """play-train runner: chunks in the bounded queue; the play process waits when the trainer has not taken them (at most this x play_chunk_steps vector steps ahead)."""
    ignore_worker_failures: bool = False
    """ray runner: when an actor fails and may not be restarted, continue with the actors left (smaller batches) instead of stopping."""
    ray_address: str | None = None
    """ray runner: the cluster to join: auto, HOST:PORT (ray start --head's address) or ray://HOST:PORT (Ray Client); unset = a private local Ray for this run."""
    ray_num_cpus: int | None = None
    """ray runner: the CPUs declared to the private local Ray (ray.init(num_cpus=N), the thesis's -c); unset = this machine's count. A declaration to Ray's scheduler, not a limit: pin with runner.cpu_affinity."""
    ray_num_cpus_per_actor: float = 1.0
    """ray runner: CPUs Ray reserves for each rollout actor (fractions allowed, e.g. 0.5)."""
    ray_num_gpus_per_actor: float = 0.0
    """ray runner: GPUs Ray reserves for each rollout actor (fractions allowed); needs runner.actor_device=cuda."""
    ray_dashboard: bool = False
    """ray runner: start Ray's dashboard with a local Ray (listening on 127.0.0.1 only)."""
    eval_interval_s: float = 5.0
    """hogwild runner: seconds between two greedy evaluation episodes of the shared model in a separate process (002's local_test); 0 = no evaluation process."""


@dataclass
class StopConfig(Section):
    """When training stops (the first criterion met wins); at least one must be set."""

    total_timesteps: int | None = 10_000_000
    """Stop after this many env steps (agent decisions, not frames)."""
    iterations: int | None = None
    """Stop after this many iterations (collect + update)."""
    wall_time_s: float | None = None
    """Stop after this many seconds of training."""
    target_reward: float | None = None
    """Stop once the reward criterion below reaches this value."""
    target_reward_metric: RewardMetric = "mean100"
    """Reward criterion: mean100 (mean of the last 100 true episodes), ema (003's moving average, alpha 0.98) or mean100+ema (both reach the target)."""
    anneal_over: ScheduleBudget = "total_timesteps"
    """The budget that linear schedules (anneal_lr, anneal_ent_coef) run down: total_timesteps (CleanRL; stop.iterations when no step budget is set), wall_time_s (seconds of training: the schedule ends at the deadline on any machine, but no run replays) or wall_time_steps (the env steps stop.wall_time_s buys at the rate measured over the first iterations, held at the start value meanwhile; recorded in the manifest, replayable with stop.anneal_steps)."""
    anneal_steps: int | None = None
    """With anneal_over=wall_time_steps: the env steps the schedules run down over, instead of measuring them; give a run's manifest schedule.anneal_steps to replay it step for step."""


@dataclass
class CheckpointConfig(Section):
    """Checkpoints: atomic, safetensors + JSON, the last few kept."""

    every: int = 50
    """Write a checkpoint every this many iterations (and always at the end); 0 = none by count."""
    every_s: float = 120.0
    """Also write one once this many seconds of training passed since the last, whichever of the two comes first, so a kill loses at most about this much of a run with long iterations; 0 = none by time."""
    keep: int = 3
    """Number of most recent checkpoints kept on disk."""


@dataclass
class TelemetryConfig(Section):
    """What is measured and where it goes."""

    progress: bool = True
    """Live console display of SPS, ETA and the phase split (off automatically without a TTY or in CI)."""
    tensorboard: bool = True
    """Write TensorBoard event files into the run directory."""
    sysmon: bool = True
    """Sample CPU, RAM, GPU and energy use in a background thread."""
    sysmon_interval_s: float = 0.5
    """Seconds between two system samples."""
    warmup_iterations: int = 1
    """First iterations marked as warm-up (allocator, kernel selection) and left out of summaries."""


@dataclass
class RunConfig(Section):
    """A complete training run."""

    algo: str = "ppo"
    """Learning algorithm: ppo, appo, impala, dqn, pqn, rnd or a3c."""
    seed: int = 1
    """Seed of every random generator (envs get seed + index)."""
    runs_root: str = "runs"
    """Directory under which run directories are created."""
    run_name: str | None = None
    """Run directory name under runs_root; unset = <env>__<algo>__<runner>__s<seed>__<utc time>."""
    nan_policy: NanPolicy = "raise"
    """A NaN/inf in a batch, loss, gradient or logged loss: raise (stop, save the batch), skip_update, warn, or none (no checks)."""
    env: EnvConfig = field(default_factory=EnvConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    ppo: PPOConfig = field(default_factory=PPOConfig)
    impala: IMPALAConfig = field(default_factory=IMPALAConfig)
    appo: APPOConfig = field(default_factory=APPOConfig)
    dqn: DQNConfig = field(default_factory=DQNConfig)
    pqn: PQNConfig = field(default_factory=PQNConfig)
    rnd: RNDConfig = field(default_factory=RNDConfig)
    a3c: A3CConfig = field(default_factory=A3CConfig)
    runner: RunnerConfig = field(default_factory=RunnerConfig)
    stop: StopConfig = field(default_factory=StopConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    telemetry: TelemetryConfig = field(default_factory=TelemetryConfig)
