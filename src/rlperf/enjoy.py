"""``rlperf enjoy``: play a run's checkpoint, print each game's score, record a video.

Works for every algorithm: the network is rebuilt the way training built it (the actor-critic,
RND's two-headed one, DQN's Q-network) and loaded from the checkpoint (safetensors, no
pickle). The game uses the run's own preprocessing and sticky actions, as an evaluation env
(no life-loss episodes, unclipped rewards), so the printed total is the game's score. On
Montezuma's Revenge the rooms visited in each game are printed too, and the union of all of
them, as source 004's ``eval.py`` did.

Videos are the full-size RGB screen at the agent's decision rate (one frame per agent step):
``.mp4`` through OpenCV's video writer, ``.gif`` through Pillow.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rlperf.arguments import ArgumentParser
from rlperf.config.schema import ALGORITHM_FACTS
from rlperf.core.errors import ConfigError, UserInputError
from rlperf.envs.video import ATARI_FPS, VideoWriter


@dataclass
class EpisodeResult:
    """One played game."""

    index: int
    total_reward: float
    """Sum of the game's unclipped rewards (its score)."""
    length: int
    """Agent steps."""
    rooms: list[int] | None = None
    """Montezuma's Revenge: rooms visited in the game (sorted); None for other games."""


@dataclass
class Agent:
    """A checkpoint's acting rule: observation (one env's) -> action."""

    algo: str
    act: Callable[[np.ndarray, bool], int]
    checkpoint: Path
    iteration: int | None = None
    env_steps: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def load_agent(run_dir: Path, cfg: Any, checkpoint: Path | None, obs_shape: tuple[int, ...],
               num_actions: int) -> Agent:  # fmt: skip
    """The acting rule of ``checkpoint`` (default: the run's latest) for ``cfg.algo``."""
    from rlperf.algos.dqn import QNetwork
    from rlperf.core.checkpoint import load_policy
    from rlperf.models.catalog import build_model
    from rlperf.training.registry import ALGORITHMS, acting_policy

    if cfg.algo not in ALGORITHMS:
        raise ConfigError(f"run uses algorithm {cfg.algo!r}; enjoy plays {', '.join(ALGORITHMS)}")
    if cfg.algo == "dqn":
        network: torch.nn.Module = QNetwork.from_actor_critic(
            build_model(cfg.model, obs_shape, num_actions)
        )
    else:
        network = acting_policy(cfg, obs_shape, num_actions)
    q_learning = ALGORITHM_FACTS[cfg.algo].q_values
    state = load_policy(
        network, run_dir, checkpoint, f"the run's {cfg.algo} network ({cfg.model.name})"
    )
    network.eval()
    generator = torch.Generator().manual_seed(cfg.seed)

    if q_learning:
        epsilon = getattr(cfg, cfg.algo).end_e

        @torch.no_grad()
        def act(obs: np.ndarray, greedy: bool) -> int:
            # Stochastic Q-learning play is epsilon-greedy at the schedule's final epsilon.
            if not greedy and torch.rand((), generator=generator) < epsilon:
                return int(torch.randint(num_actions, (), generator=generator))
            return int(network(torch.from_numpy(obs).unsqueeze(0)).argmax(-1))
    else:

        @torch.no_grad()
        def act(obs: np.ndarray, greedy: bool) -> int:
            logits, _ = network(torch.from_numpy(obs).unsqueeze(0))
            if greedy:
                return int(logits.argmax(-1))
            probs = logits.float().softmax(-1)
            return int(torch.multinomial(probs, 1, generator=generator))

    counters = state.get("counters") or {}
    return Agent(
        algo=cfg.algo,
        act=act,
        checkpoint=Path(state["_checkpoint_path"]),
        iteration=counters.get("iteration"),
        env_steps=counters.get("env_steps"),
    )


def play(
    run_dir: Path,
    *,
    episodes: int = 1,
    video: Path | None = None,
    greedy: bool | None = None,
    checkpoint: Path | None = None,
    seed: int | None = None,
    report: Callable[[str], None] = print,
) -> list[EpisodeResult]:
    """Play ``episodes`` games with a run's checkpoint; print and return each game's result.

    ``greedy=None`` picks the run's natural mode: greedy for DQN and PQN, sampling for the
    actor-critics (trained stochastic policies can loop forever when made greedy).
    """
    from rlperf.config.validate import load_valid_config
    from rlperf.deploy.policy import CONFIG_FILE, resolve_policy_source
    from rlperf.envs.make import is_atari, make_env, validate_env_id
    from rlperf.envs.montezuma import MontezumaEnv, is_montezuma
    from rlperf.models.catalog import frame_dim

    if episodes < 1:
        raise UserInputError(f"--episodes must be >= 1, got {episodes}")
    run_dir = resolve_policy_source(str(run_dir))
    cfg = load_valid_config(run_dir / CONFIG_FILE)
    validate_env_id(cfg.env.id)
    atari = is_atari(cfg.env.id)
    if video is not None and not atari:
        raise UserInputError(f"video recording needs an Atari game; {cfg.env.id} has no screen")
    dim = frame_dim(cfg.env, cfg.model)
    seed = cfg.seed + 10_000 if seed is None else seed
    montezuma = atari and is_montezuma(cfg.env.id)
    env: Any = (
        MontezumaEnv(cfg.env, dim, seed, training=False)
        if montezuma
        else make_env(cfg.env, dim, seed, training=False)
    )
    writer = VideoWriter(video, ATARI_FPS / cfg.env.mean_frameskip) if video is not None else None
    results: list[EpisodeResult] = []
    try:
        obs_shape = tuple(env.observation_space.shape or ())
        agent = load_agent(run_dir, cfg, checkpoint, obs_shape, int(env.action_space.n))
        mode = greedy if greedy is not None else ALGORITHM_FACTS[agent.algo].q_values
        report(
            f"checkpoint {agent.checkpoint} (iteration {agent.iteration}, env steps "
            f"{agent.env_steps}); {'greedy' if mode else 'stochastic'} play, sticky actions "
            f"{cfg.env.repeat_action_probability}"
        )
        for index in range(1, episodes + 1):
            results.append(_play_game(env, agent, mode, index, writer, montezuma))
            r = results[-1]
            rooms = f", visited rooms: {_set_text(r.rooms)}" if r.rooms is not None else ""
            report(f"episode {index}: total reward {r.total_reward:g}, {r.length} steps{rooms}")
    finally:
        if writer is not None:
            writer.close()
        env.close()
    if montezuma:
        every = sorted({room for r in results for room in r.rooms or []})
        report(f"All visited rooms: {_set_text(every)}")
    if writer is not None:
        report(f"video: {writer.path} ({writer.frames} frames at {writer.fps:g} fps)")
    return results


def _set_text(rooms: Sequence[int] | None) -> str:
    return "{" + ", ".join(str(r) for r in rooms or []) + "}"


def _play_game(
    env: Any, agent: Agent, greedy: bool, index: int, writer: VideoWriter | None, montezuma: bool
) -> EpisodeResult:
    """One true game; lives are not episodes here (the env is built for evaluation)."""
    obs = env.reset()
    if writer is not None:
        writer.add(env.screen_rgb())
    while True:
        obs, _reward, terminated, truncated, game_end = env.step(agent.act(obs, greedy))
        if writer is not None:
            writer.add(env.screen_rgb())
        if game_end is not None:
            rooms = sorted(env.last_game_rooms) if montezuma else None
            return EpisodeResult(index, float(game_end[0]), int(game_end[1]), rooms)
        if terminated or truncated:  # an episode that is not a true game end: keep playing
            obs = env.reset()


def cmd_enjoy(argv: Sequence[str]) -> int:
    """``rlperf enjoy RUN_DIR [--episodes N] [--video out.mp4|out.gif] [--greedy|--stochastic]``."""
    p = ArgumentParser(
        prog="rlperf enjoy",
        description="Play a run's checkpoint with the run's preprocessing and sticky actions: "
        "prints the total reward of each game (and on Montezuma's Revenge the rooms visited), "
        "optionally records a video.",
    )
    p.add_argument(
        "run_dir",
        metavar="RUN_DIR",
        help="a run directory written by rlperf train, or shipped:pong (shipped with rlperf)",
    )
    p.add_argument("--episodes", type=int, default=1, help="games to play (default 1)")
    p.add_argument("--video", metavar="PATH", help="record the games to PATH (.mp4 or .gif)")
    p.add_argument("--checkpoint", metavar="PATH", help="a checkpoint of the run (default: latest)")
    p.add_argument("--seed", type=int, help="env seed (default: the run's seed + 10000)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--greedy", dest="greedy", action="store_true", default=None,
                      help="always the most likely action (default for dqn)")  # fmt: skip
    mode.add_argument("--stochastic", dest="greedy", action="store_false",
                      help="sample actions (default for the actor-critics; dqn: epsilon-greedy)")  # fmt: skip
    args = p.parse_args(list(argv))
    play(
        Path(args.run_dir),
        episodes=args.episodes,
        video=Path(args.video) if args.video else None,
        greedy=args.greedy,
        checkpoint=Path(args.checkpoint) if args.checkpoint else None,
        seed=args.seed,
    )
    return 0
