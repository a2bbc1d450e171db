"""Fixtures for the deploy tests: a real Pong run whose policy acts on what it sees.

A freshly initialised network has near-uniform logits (the logits layer starts at gain
0.01) and picks the same action on every Pong frame, which would make "the backends agree
on 99.9% of actions" meaningless. So the session fixture

1. trains a real run with ``rlperf train`` (thesis model 1 on ALE/Pong-v5, one tiny
   iteration: the run directory, config and checkpoint format are the real ones), then
2. fits its policy in a few seconds (least squares, then a short behaviour cloning on real
   frames) to choose among
   three actions from where its own paddle is, read from the emulator's RAM while recording,
   and saves that as the run's latest checkpoint.

The fitted policy spreads its greedy actions over three actions and its decisions hinge on a
few pixels of the paddle, a fair test of whether an export keeps a policy's decisions.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("onnxruntime")
pytest.importorskip("ai_edge_litert")

from rlperf.core.checkpoint import checkpoint_name, load_checkpoint, save_checkpoint  # noqa: E402
from tests.conftest import rlperf_subprocess  # noqa: E402

PADDLE_Y_RAM = 51  # Pong's RAM byte holding the agent's paddle position
ACTIONS = (3, 0, 2)  # paddle high / middle / low -> LEFT (down), NOOP, RIGHT (up)


def _record_with_labels(cfg, dim: int, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    from rlperf.envs.make import make_env

    env = make_env(cfg.env, dim, seed, training=False)
    rng = np.random.default_rng(seed)
    obs = env.reset(seed=seed)
    frames, paddle = [], []
    for _ in range(n):
        frames.append(obs.copy())
        paddle.append(int(env._ale.getRAM()[PADDLE_Y_RAM]))  # test-only peek at the emulator
        obs, _, terminated, truncated, _ = env.step(int(rng.choice([0, 2, 3, 4, 5])))
        if terminated or truncated:
            obs = env.reset()
    paddle_y = np.asarray(paddle)
    thirds = np.digitize(paddle_y, np.percentile(paddle_y, [33.3, 66.7]))
    return np.stack(frames), np.asarray(ACTIONS)[thirds]


def fit_policy(run_dir: Path, seed: int = 0, steps: int = 60, lr: float = 3e-4) -> None:
    """Fit the paddle-position policy into the run's latest checkpoint: a least-squares
    logits layer on the network's own features (instant), then ``steps`` Adam steps on the
    whole network (a few seconds) so the torso's features carry the decision too."""
    from rlperf.deploy.policy import load_run_policy
    from rlperf.models.policy import network_input

    policy = load_run_policy(run_dir)
    frames, labels = _record_with_labels(policy.cfg, policy.dim, 1000, seed)
    x, y = torch.from_numpy(frames), torch.from_numpy(labels)
    model = policy.model
    with torch.no_grad():
        hidden = model.policy_torso(network_input(x)).double()
        features = torch.cat([hidden, torch.ones(len(hidden), 1, dtype=hidden.dtype)], 1)
        targets = torch.nn.functional.one_hot(y, policy.num_actions).double() * 4 - 2
        gram = features.T @ features + 0.1 * torch.eye(features.shape[1], dtype=hidden.dtype)
        solution = torch.linalg.solve(gram, features.T @ targets)
        model.logits_head.weight.copy_(solution[:-1].T.float())
        model.logits_head.bias.copy_(solution[-1].float())
    torch.manual_seed(seed)
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    generator = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        idx = torch.randint(0, len(x), (64,), generator=generator)
        loss = torch.nn.functional.cross_entropy(model(x[idx])[0], y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
    state = load_checkpoint(run_dir)
    state.pop("_checkpoint_path")
    state["algorithm"]["policy"] = {k: v.detach().clone() for k, v in model.state_dict().items()}
    save_checkpoint(run_dir / "checkpoints", checkpoint_name(2, 64), state, keep=3)


@pytest.fixture(scope="session")
def pong_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real Pong run (thesis model 1) whose latest checkpoint holds the fitted policy."""
    root = tmp_path_factory.mktemp("deploy")
    proc = rlperf_subprocess(
        "train", "--env", "ALE/Pong-v5", "-m", "1", "--runs-root", str(root), "-s", "pong",
        "--no-progress", "env.num_envs=1", "ppo.num_steps=32", "ppo.num_minibatches=1",
        "ppo.update_epochs=1", "stop.iterations=1",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    run_dir = root / "pong"
    fit_policy(run_dir)
    return run_dir


@pytest.fixture(scope="session")
def pong_obs(pong_run: Path) -> dict[str, np.ndarray]:
    """Real Pong observations: a calibration set and a separate evaluation set (other seed)."""
    from rlperf.deploy.dataset import record_observations
    from rlperf.deploy.policy import load_run_policy

    policy = load_run_policy(pong_run)
    calib, _ = record_observations(policy.cfg, policy.dim, 300, seed=11)
    evaluation, _ = record_observations(policy.cfg, policy.dim, 1000, seed=22)
    return {"calib": calib, "eval": evaluation}


@pytest.fixture(scope="session")
def deployed_run(pong_run: Path, pong_obs: dict[str, np.ndarray]) -> Path:
    """``pong_run`` with every export: policy.onnx, policy.tflite and both int8 files."""
    from rlperf.deploy.export import export_run
    from rlperf.deploy.policy import load_run_policy
    from rlperf.deploy.quantize import quantize_run

    policy = load_run_policy(pong_run)
    export_run(pong_run, "onnx", policy=policy)
    export_run(pong_run, "tflite", policy=policy)
    quantize_run(policy, pong_obs["calib"])
    return pong_run


@pytest.fixture
def run_copy(deployed_run: Path, tmp_path: Path) -> Path:
    """A private copy of the deployed run, for tests that write into it."""
    return Path(shutil.copytree(deployed_run, tmp_path / "run"))
