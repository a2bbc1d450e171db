"""The run configuration: nested dataclasses, one per concern.

Every field carries a one-line docstring right under it; ``rlperf train --help`` is built
from those docstrings, so they are the user documentation of each knob. Hyperparameter
names follow the community (CleanRL / Stable-Baselines3 / RLlib): ``num_envs``,
``num_steps``, ``gamma``, ``gae_lambda``, ``clip_coef``, ...

The sections of the run as a whole are here; each algorithm's is declared in
``config/algorithms/`` with its facts and checks, and read from here as a field of
:class:`RunConfig`.
"""

from __future__ import annotations

import copy
import typing
from dataclasses import dataclass, field, fields, is_dataclass

# Each algorithm's settings are declared with its facts and checks in config/algorithms/.
from rlperf.config.algorithms.a3c import A3CConfig
from rlperf.config.algorithms.appo import APPOConfig
from rlperf.config.algorithms.dqn import DQNConfig
from rlperf.config.algorithms.impala import IMPALAConfig
from rlperf.config.algorithms.ppo import PPOConfig
from rlperf.config.algorithms.pqn import PQNConfig
from rlperf.config.algorithms.rnd import RNDConfig
from rlperf.config.choices import (
    Activation,
    Engine,
    FaultSite,
    FrameParity,
    NanPolicy,
    Precision,
    ResizeInterpolation,
    RewardMetric,
    ScheduleBudget,
)
from rlperf.config.section import (
    AlgorithmFacts,
    AlgorithmSection,
    Fraction,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    Range,
    Section,
)


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


START_PARITY_GAP = 5.0
"""``env.start_parity_gap``'s default: another gap without ``env.start_parity=lagging`` is refused."""


@dataclass
class EnvConfig(Section):
    """The game and its preprocessing."""

    id: str = "ALE/Pong-v5"
    """Gymnasium environment id (Atari games as ALE/<Game>-v5; any registered id such as CartPole-v1)."""
    engine: Engine = "gymnasium"
    """What steps the games: gymnasium (rlperf's own preprocessing, exact snapshots), envpool or ale-vector (C++ thread pools, Atari only)."""
    num_envs: PositiveInt = 8
    """Number of environment copies stepped together (the batch of the acting forward pass)."""
    num_threads: PositiveInt | None = None
    """C++ engines (envpool, ale-vector): the worker threads that step one process's envs; unset = one per usable core, at most num_envs. With the decoupled runner every actor process runs its own pool of this many threads; unset there, the actors share the usable cores (cores / runner.num_workers each)."""
    dim: PositiveInt | None = None
    """Atari frame size after resizing (dim x dim); unset = the model's input size (84, 168 or 252)."""
    frame_stack: PositiveInt = 4
    """Atari: number of consecutive frames stacked into one observation."""
    frameskip: PositiveInt = 4
    """Atari: emulator frames per agent step (the action is repeated)."""
    frameskip_max: PositiveInt | None = None
    """Atari: each step repeats its action a uniformly drawn frameskip..frameskip_max frames (Pong-v0's random 2 to 4: frameskip=2, frameskip_max=4); gymnasium engine only; unset = always frameskip."""
    max_pool: bool = True
    """Atari: max-pool the last two frames of each skip (removes sprite flicker)."""
    max_pool_frames: typing.Annotated[int, Range(2.0, text="at least 2")] = 2
    """Atari: how many of a skip's last frames max_pool takes the max of: 2 (DeepMind's) up to env.frameskip; more than 2 on engine gymnasium only. Pong with 4 frames per step moves the agent's paddle on even frames only, and the max of 3 shows each move on either frame parity, the max of 2 on one parity only."""
    mark_frame_parity: bool = False
    """Atari, a diagnostic: paint the observation's top-left corner (a 4x4 block of each frame) white on a game whose frames are odd, black on even, so the network is told which of Pong's two games (one per frame parity at an even frameskip) it plays; engines gymnasium and ale-vector. Not a standard Atari observation: a policy trained with it needs it when it plays."""
    start_parity: FrameParity = "any"
    """Atari, a diagnostic: start every game on this frame parity, even or odd (one more no-op frame after the random no-ops when the game would start on the other), so that a run at an even frameskip plays one of Pong's two games only; engine gymnasium, an even env.frameskip without frameskip_max. any (the standard): the no-ops set each game's parity at random. Not a standard Atari start: half the games of a standard evaluation are on the other parity. lagging: a curriculum over training starts (tried against Pong's stall and closed as a lever there: docs/benchmarks-pong-cpu.md): while the mean returns of the last 10 games on one parity lead the other's by more than env.start_parity_gap, every new training game starts on the other (lagging) parity, and otherwise as any; runner inproc; evaluation games start as any."""
    start_parity_gap: PositiveFloat = START_PARITY_GAP
    """With env.start_parity=lagging, the lead in mean return (last 10 games of each parity) above which new games start on the lagging parity."""
    start_parity_share: Fraction = 1.0
    """With env.start_parity=lagging, the share of new training games that start on the lagging parity while it lags, 0.5 to 1 (the others as the no-ops fall, so half of them on it too; 0.5 steers nothing). Below 1 the leading game keeps some games, and its mean of the last 10 stays current."""
    resize_interpolation: ResizeInterpolation = "area"
    """Atari: how frames are shrunk to dim x dim: area (OpenCV INTER_AREA, smoothest), linear (about 7x faster) or nearest; engine envpool takes area or linear, ale-vector only its built-in area."""
    noop_max: NonNegativeInt = 30
    """Atari: up to this many random no-op actions after each reset (0 disables)."""
    fire_reset: bool = True
    """Atari: press FIRE after reset in games that need it to start."""
    episodic_life: bool = True
    """Atari: a lost life ends the training episode (the true game continues; returns are per game)."""
    clip_rewards: bool = True
    """Clip training rewards to their sign (-1, 0, +1); reported returns stay unclipped."""
    grayscale: bool = True
    """Atari: convert frames to grayscale (otherwise RGB, 3 channels per stacked frame)."""
    repeat_action_probability: Fraction = 0.0
    """Atari sticky actions: probability the emulator repeats the previous action (0.25 in Pong-v0 / v5 default)."""
    full_action_space: bool = False
    """Atari: use all 18 actions instead of the game's minimal set."""
    max_episode_steps: PositiveInt | None = 27000
    """Truncate a game after this many agent steps (27000 x frameskip 4 = 108000 frames); unset = no limit."""
    fault_p_crash: Fraction = 0.0
    """Fault injection (gymnasium engine): probability that an env step/reset raises (tests a run's restarts and clean stops)."""
    fault_p_stall: Fraction = 0.0
    """Fault injection: probability that an env step/reset hangs for fault_stall_time_s."""
    fault_stall_time_s: NonNegativeFloat = 60.0
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
    vf_torso_grad_scale: Fraction = 1.0
    """With a shared torso, the factor on the value loss's gradient where it enters the torso: 1 = plain sharing; 0 = the value head learns on the policy's features without shaping them (Phasic Policy Gradient's detached value head), at no cost in speed, unlike separate towers; between, a weaker pull. Actor-critic algorithms only."""
    hidden_sizes: list[int] | None = None
    """MLP hidden layer sizes; for nature and nips one size, the dense layer after the convs (SB3's features_dim); unset = the model's default (mlp: 64, 64; nature 512; nips 256). Not for thesis-N."""
    conv_channels: list[int] | None = None
    """nature and nips: the output channels of each conv, kernels and strides kept (nature 3 convs, default 32, 64, 64; nips 2, default 16, 32)."""
    activation: Activation = "relu"
    """Activation of the image models' layers (nature, nips, thesis-N): relu; elu (rl_games' Atari choice) or leaky_relu (slope 0.01), whose negative sides keep a gradient so that a unit pushed below zero on every frame can come back (on Pong only ELU's did; feature models use tanh)."""
    zero_sum_first_layer: bool = False
    """Image models: constrain each first-layer filter to weights that sum to zero (its weight minus their mean, in the forward pass), so that a uniform background answers with the bias alone, whatever its brightness; keeps ReLU's first-layer filters alive on bright uniform backgrounds such as Pong's (models.conv.InputScaledConv2d)."""
    layer_norm: bool = False
    """LayerNorm after every hidden layer, before its activation (over channels and positions after a conv): what keeps PQN's Q-learning stable without a target network; nature, nips and mlp models."""


@dataclass
class RunnerConfig(Section):
    """Who steps the envs, where the networks live, and which CPU resources are used."""

    name: str = "inproc"
    """Execution architecture: inproc (envs and learner in one process), subprocess (envs in worker processes, shared memory), decoupled (actor processes acting while the learner learns; needs appo or impala), play-train (DQN: a play process feeds transitions to the training process), ray (Ray actors on a local Ray or a cluster: runner.ray_*), rllib (RLlib 1.1's rollout workers, the thesis's -w: Ray actors with their own policy copies, weights pushed to each after every update) or hogwild (A3C: worker processes learning into a shared model and optimizer)."""
    num_workers: PositiveInt = 1
    """Env worker processes (subprocess), actor processes (decoupled), Ray actors (ray, rllib) or learning processes (hogwild); num_envs must divide evenly among them (inproc: no effect)."""
    num_learners: PositiveInt = 1
    """Data-parallel learner processes, each with its own envs, averaging gradients every step (torch.distributed: gloo on CPU, nccl on GPUs, one GPU per learner); the batch per update grows with them."""
    learner_device: str = "cpu"
    """Device of the learner's network: cpu, cuda, cuda:N."""
    actor_device: str = "cpu"
    """Device of the acting copy of the network: cpu, cuda, cuda:N."""
    torch_threads: PositiveInt | None = None
    """torch intra-op threads of the learner process; unset = torch's default (all cores), or with the decoupled runner the cores its actors leave (at least 1)."""
    act_threads: PositiveInt | None = None
    """torch intra-op threads while the learner's process acts (inproc and subprocess runners); unset = torch_threads. 1 keeps the acting forward off the cores a C++ engine's threads step on; on 2 vCPUs it did not pay (0.92x-1.10x on Pong, docs/benchmarks.md)."""
    cpu_affinity: list[int] | None = None
    """Pin the process to these CPU ids (os.sched_setaffinity), e.g. 0,1 or 0-3; unset = no pinning."""
    actor_threads: PositiveInt = 1
    """torch intra-op threads of each actor process (decoupled runner); 1 avoids oversubscribing the cores."""
    actor_cpu_affinity: list[int] | None = None
    """Pin the actor processes (decoupled runner) to these CPU ids; unset = no pinning."""
    slots_per_actor: PositiveInt = 2
    """Rollout slots in shared memory per actor (decoupled runner): 2 = double buffering; more lets actors run further ahead (more lag)."""
    precision: Precision = "fp32"
    """Learner compute precision: fp32, bf16 (autocast; fast on CPUs with AMX and on recent GPUs, slower on some CPUs with only AVX512-BF16) or auto (a few seconds of the real learner step timed in every precision and layout on this machine, the fastest chosen, cached per machine and model, figures in the manifest)."""
    channels_last: bool = True
    """Keep conv weights and activations in channels-last layout (same results, usually faster oneDNN kernels); with precision=auto the timing chooses it too."""
    compile: bool = False
    """torch.compile the network where it learns and acts (inproc and subprocess runners; seconds to minutes of compiling first). Off: 0.98x end to end on Pong with a bf16 CPU learner (docs/benchmarks.md)."""
    cuda_graph: bool = False
    """Record as CUDA graphs, once, and replay: the learner's minibatch step (forward, loss, backward, clipping, Adam or RAdam; ppo, appo and pqn) and the acting forward (inproc and decoupled runners). One launch instead of hundreds, for small networks whose GPU waits on Python. The losses are checked once per update instead of every step; on a CPU the same code runs without graphs."""
    retain_freed_memory: bool = True
    """Linux/glibc: keep freed memory mapped for reuse, so minibatches do not page-fault fresh memory."""
    restart_failed_workers: bool = True
    """Restart an env worker that raised, died or hung, up to max_worker_restarts times in the run; otherwise the run stops cleanly."""
    max_worker_restarts: NonNegativeInt = 3
    """Worker restarts allowed over the whole run before a failure stops it."""
    worker_timeout_s: PositiveFloat | None = None
    """Seconds without a reply before workers count as hung: an env worker's step (subprocess runner, default 60) or any rollout from the actors or play process (decoupled and play-train runners, default 300)."""
    play_chunk_steps: PositiveInt = 4
    """play-train runner: vector steps the play process writes into one shared-memory chunk (one pipe message per chunk)."""
    play_queue_chunks: PositiveInt = 8
    """play-train runner: chunks in the bounded queue; the play process waits when the trainer has not taken them (at most this x play_chunk_steps vector steps ahead)."""
    ignore_worker_failures: bool = False
    """ray runner: when an actor fails and may not be restarted, continue with the actors left (smaller batches) instead of stopping."""
    ray_address: str | None = None
    """ray runner: the cluster to join: auto, HOST:PORT (ray start --head's address) or ray://HOST:PORT (Ray Client); unset = a private local Ray for this run."""
    ray_num_cpus: PositiveInt | None = None
    """ray runner: the CPUs declared to the private local Ray (ray.init(num_cpus=N), the thesis's -c); unset = this machine's count. A declaration to Ray's scheduler, not a limit: pin with runner.cpu_affinity."""
    ray_num_cpus_per_actor: PositiveFloat = 1.0
    """ray runner: CPUs Ray reserves for each rollout actor (fractions allowed, e.g. 0.5)."""
    ray_num_gpus_per_actor: float = 0.0
    """ray runner: GPUs Ray reserves for each rollout actor (fractions allowed); needs runner.actor_device=cuda."""
    ray_dashboard: bool = False
    """ray runner: start Ray's dashboard with a local Ray (listening on 127.0.0.1 only)."""
    eval_interval_s: NonNegativeFloat = 5.0
    """hogwild runner: seconds between two greedy evaluation episodes of the shared model in a separate process (002's local_test); 0 = no evaluation process."""


@dataclass
class StopConfig(Section):
    """When training stops (the first criterion met wins); at least one must be set."""

    total_timesteps: PositiveInt | None = 10_000_000
    """Stop after this many env steps (agent decisions, not frames)."""
    iterations: PositiveInt | None = None
    """Stop after this many iterations (collect + update)."""
    wall_time_s: PositiveFloat | None = None
    """Stop after this many seconds of training."""
    target_reward: float | None = None
    """Stop once the reward criterion below reaches this value."""
    target_reward_metric: RewardMetric = "mean100"
    """Reward criterion: mean100 (mean of the last 100 true episodes), ema (003's moving average, alpha 0.98) or mean100+ema (both reach the target)."""
    anneal_over: ScheduleBudget = "total_timesteps"
    """The budget that linear schedules (anneal_lr, anneal_ent_coef) run down: total_timesteps (CleanRL; stop.iterations when no step budget is set), wall_time_s (seconds of training: the schedule ends at the deadline on any machine, but no run replays) or wall_time_steps (the env steps stop.wall_time_s buys at the rate measured over the first iterations, held at the start value meanwhile; recorded in the manifest, replayable with stop.anneal_steps)."""
    anneal_steps: PositiveInt | None = None
    """With anneal_over=wall_time_steps: the env steps the schedules run down over, instead of measuring them; give a run's manifest schedule.anneal_steps to replay it step for step."""
    anneal_min_sps: PositiveFloat | None = None
    """With anneal_over=wall_time_steps: the lowest env-steps-per-second rate the measured step budget is computed from (budget = stop.wall_time_s x max(measured rate, this)), so a slow machine or day does not shorten the schedule below what the budget buys at this rate; the schedule may then end after the deadline. Every run slower than this gets the same budget, so there a seed replays without stop.anneal_steps."""


@dataclass
class CheckpointConfig(Section):
    """Checkpoints: atomic, safetensors + JSON, the last few kept."""

    every: NonNegativeInt = 50
    """Write a checkpoint every this many iterations (and always at the end); 0 = none by count."""
    every_s: NonNegativeFloat = 120.0
    """Also write one once this many seconds of training passed since the last, whichever of the two comes first, so a kill loses at most about this much of a run with long iterations; 0 = none by time."""
    keep: PositiveInt = 3
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
    sysmon_interval_s: PositiveFloat = 0.5
    """Seconds between two system samples."""
    warmup_iterations: NonNegativeInt = 1
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


_RUN_HINTS = typing.get_type_hints(RunConfig)
ALGORITHM_SECTIONS: tuple[str, ...] = tuple(
    name
    for name, hint in _RUN_HINTS.items()
    if isinstance(hint, type) and issubclass(hint, AlgorithmSection)
)
"""The config sections that belong to one algorithm each, named after it (``ppo``, ...)."""

ALGORITHM_FACTS: dict[str, AlgorithmFacts] = {
    name: _RUN_HINTS[name].facts for name in ALGORITHM_SECTIONS
}
"""What each algorithm's section declares it needs (data kind, lag bound, learners), read by
the config checks before anything is built."""


def algorithm_sections(cfg: RunConfig) -> list[AlgorithmSection]:
    """Every algorithm's settings in ``cfg`` (the active one and the others)."""
    return [getattr(cfg, name) for name in ALGORITHM_SECTIONS]
