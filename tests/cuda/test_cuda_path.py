"""The CUDA path, on a real GPU (the whole module skips without one).

Every branch that exists only for CUDA: the explicit device index, the learner's step
recorded as a CUDA graph (runner.cuda_graph), pinned rollout buffers
and non-blocking copies to a GPU learner, one network when acting and learning share the
GPU, bf16 autocast on CUDA, the phase timers' device synchronisation, NVML's utilisation,
memory, power and energy in a run's records, precision=auto timed on the GPU, a checkpoint
written on the GPU resumed on the CPU, actor processes acting on the GPU (APPO with
V-trace, decoupled runner), and PQN's recorded step (RAdam) with its actors on the GPU. benchmarks/gpu/check.sh runs this module on the GPU machine.
"""

import json
import time

import pytest
import torch

from rlperf.algos.ppo import PPO
from rlperf.algos.pqn import PQN, QPolicy
from rlperf.cli import main
from rlperf.config.schema import EnvConfig, ModelConfig, PPOConfig, PQNConfig, RunnerConfig
from rlperf.core.autoprecision import choose_precision
from rlperf.core.devices import resolve_device
from rlperf.core.optim import LocalGradientStep
from rlperf.core.types import Progress, Rollout
from rlperf.envs.make import make_vector_env
from rlperf.models.catalog import build_model
from rlperf.runners.collector import RolloutCollector
from rlperf.runners.inproc import InProcRunner
from rlperf.telemetry.timers import PhaseTimer
from tests.conftest import read_metrics

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

PONG = ["--env", "ALE/Pong-v5", "--preset", "atari-fast-gpu", "--no-progress"]


def _runner(actor_device: str) -> tuple[InProcRunner, PPO]:
    torch.manual_seed(0)
    envs = make_vector_env(EnvConfig(id="CartPole-v1", num_envs=4), dim=84, seed=0)
    policy = build_model(ModelConfig(name="mlp"), (4,), 2)
    algo = PPO(PPOConfig(num_steps=32, num_minibatches=2, update_epochs=1), policy, seed=0)
    cfg = RunnerConfig(learner_device="cuda", actor_device=actor_device)
    return InProcRunner(cfg, envs, algo, seed=0), algo


def test_cuda_without_an_index_is_the_current_device():
    assert resolve_device("cuda") == torch.device("cuda", torch.cuda.current_device())
    assert resolve_device("cuda") == resolve_device("cuda:0")


def test_gpu_learner_with_cpu_actors_pins_the_rollout_and_copies_it_asynchronously():
    runner, algo = _runner("cpu")
    try:
        assert runner.actor is not runner.learner
        assert next(runner.learner.parameters()).is_cuda
        assert not next(runner.actor.parameters()).is_cuda
        assert runner.rollout.obs_TN.is_pinned() and runner.rollout.rewards_TN.is_pinned()
        assert runner.collector.next_obs_N.is_pinned()
        host, _ = runner.collect(PhaseTimer())
        batch = runner.load(host)
        assert batch.obs_TN.is_cuda and batch.next_obs_N.is_cuda
        torch.cuda.synchronize()
        torch.testing.assert_close(batch.obs_TN.cpu(), host.obs_TN)
        torch.testing.assert_close(batch.logprobs_TN.cpu(), host.logprobs_TN)
        metrics = algo.update(batch, runner.make_gradient_step(algo), Progress(0, 128, 1.0))
        assert all(torch.isfinite(torch.tensor(v)) for v in metrics.values())
        runner.sync_weights()
        for a, b in zip(runner.actor.parameters(), runner.learner.parameters(), strict=True):
            torch.testing.assert_close(a, b.cpu(), rtol=0, atol=0)
    finally:
        runner.close()


def test_actor_and_learner_on_the_gpu_share_one_network_and_the_rollout_lives_there():
    runner, algo = _runner("cuda:0")
    try:
        assert runner.actor is runner.learner
        batch, episodes = runner.collect(PhaseTimer())
        assert batch.obs_TN.is_cuda and batch.actions_TN.is_cuda
        assert runner.load(batch).obs_TN.data_ptr() == batch.obs_TN.data_ptr()  # no copy
        assert int(batch.dones_TN.sum()) == len(episodes) > 0
    finally:
        runner.close()


def test_bf16_autocast_on_cuda_keeps_fp32_weights():
    runner, algo = _runner("cuda:0")
    try:
        step = runner.make_gradient_step(algo)
        batch, _ = runner.collect(PhaseTimer())
        bf16 = type(step)(algo.policy, algo.optimizer_spec(), device=step.device, precision="bf16")
        with bf16.autocast():
            out = torch.nn.functional.linear(
                batch.obs_TN[0].float(), torch.ones(3, 4, device="cuda")
            )
        assert out.dtype == torch.bfloat16
        metrics = algo.update(batch, bf16, Progress(0, 128, 1.0))
        assert all(torch.isfinite(torch.tensor(v)) for v in metrics.values())
        assert all(p.dtype == torch.float32 for p in algo.policy.parameters())
    finally:
        runner.close()


def _pong_rollout() -> Rollout:
    """16 steps of 8 envs of random 64x64 frames and rewards, on the GPU, from a fixed seed."""
    g = torch.Generator().manual_seed(1)
    T, N = 16, 8
    return Rollout(
        obs_TN=torch.randint(0, 255, (T, N, 4, 64, 64), dtype=torch.uint8, generator=g),
        actions_TN=torch.randint(0, 6, (T, N), generator=g),
        logprobs_TN=torch.full((T, N), -1.79),
        values_TN=torch.randn(T, N, generator=g),
        rewards_TN=torch.randn(T, N, generator=g),
        dones_TN=torch.zeros(T, N),
        next_obs_N=torch.randint(0, 255, (N, 4, 64, 64), dtype=torch.uint8, generator=g),
        truncation_values_TN=torch.zeros(T, N),
    ).to(torch.device("cuda", 0))


def _recorded_or_eager(graphs: bool, precision: str):
    torch.manual_seed(0)
    policy = build_model(ModelConfig(name="nips"), (4, 64, 64), 6).cuda()
    cfg = PPOConfig(num_steps=16, num_minibatches=4, update_epochs=3, max_grad_norm=0.5)
    algo = PPO(cfg, policy, seed=0)
    step = LocalGradientStep(
        policy, algo.optimizer_spec(), device=torch.device("cuda", 0), precision=precision,
        graphs=graphs,
    )  # fmt: skip
    batch = _pong_rollout()
    metrics = [
        algo.update(batch, step, Progress(i, 128 * (i + 1), 1.0 - 0.3 * i)) for i in range(2)
    ]
    return policy, metrics


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_recorded_learner_step_is_captured_and_learns_as_the_eager_one(precision):
    deterministic = torch.backends.cudnn.deterministic
    torch.backends.cudnn.deterministic = True  # the two runs differ by the graph alone
    try:
        eager, eager_metrics = _recorded_or_eager(False, precision)
        recorded, metrics = _recorded_or_eager(True, precision)
    finally:
        torch.backends.cudnn.deterministic = deterministic
    assert [m["perf/learner_graphed"] for m in metrics] == [1.0, 1.0]  # 12 minibatches each
    assert "perf/learner_graphed" not in eager_metrics[0]
    for e, r in zip(eager_metrics, metrics, strict=True):
        for key in (
            "losses/policy_loss",
            "losses/approx_kl",
            "losses/value_loss",
            "losses/grad_norm",
        ):
            assert r[key] == pytest.approx(e[key], rel=1e-2, abs=1e-5), key
    # bf16 rounds the gradients differently with and without the graph; where a gradient is
    # near zero its sign may flip, and Adam moves such a weight by about the learning rate
    # a step either way (measured on an H100: 5.4e-4 apart after 24 steps of 2.5e-4)
    atol = 1e-4 if precision == "fp32" else 8 * PPOConfig().learning_rate
    for a, b in zip(eager.parameters(), recorded.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-3, atol=atol)


def test_recorded_acting_is_captured_samples_afresh_and_agrees_with_the_policy():
    runner, algo = _runner("cuda:0")
    try:
        collector = RolloutCollector(
            runner.envs, runner.actor, runner.actor_device, "fp32",
            runner.envs.reset(1), graphed=True,
        )  # fmt: skip
        batch = Rollout.allocate(32, 4, (4,), torch.float32, device="cuda")
        collector.collect(batch, PhaseTimer())
        assert collector.recorded is not None and collector.recorded.call.graphed
        # the replays draw new actions (the generator advances) ...
        assert len({tuple(a.tolist()) for a in batch.actions_TN}) > 1
        # ... and report the policy's own log-probs and values for them
        with torch.no_grad():
            obs = batch.obs_TN.reshape(-1, 4)
            logprob, _, value = algo.policy.evaluate(obs, batch.actions_TN.reshape(-1))
        torch.testing.assert_close(batch.logprobs_TN.reshape(-1), logprob, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(batch.values_TN.reshape(-1), value, rtol=1e-5, atol=1e-5)
    finally:
        runner.close()


def test_phase_timer_synchronises_so_gpu_work_is_charged_to_its_phase():
    x = torch.randn(8192, 8192, device="cuda")

    def gpu_work() -> None:
        y = x
        for _ in range(10):
            y = y @ x / 8192.0  # queued asynchronously: launching takes microseconds

    gpu_work()  # warm-up (kernel selection)
    torch.cuda.synchronize()
    start = time.perf_counter()
    gpu_work()
    torch.cuda.synchronize()
    on_the_gpu = time.perf_counter() - start
    timer = PhaseTimer(sync=torch.cuda.synchronize)
    with timer.phase("learn"):
        gpu_work()
    # Without the sync at the phase's end, "learn" would hold only the launches.
    assert timer.lap()["learn"] > 0.5 * on_the_gpu


def test_precision_auto_times_every_variant_on_the_gpu(tmp_path):
    model = build_model(ModelConfig(name="nips"), (4, 64, 64), 6).cuda()
    obs = torch.randint(0, 255, (256, 4, 64, 64), dtype=torch.uint8, device="cuda")
    machine = {"cpu": "test", "gpu": torch.cuda.get_device_name(0)}
    choice = choose_precision(
        model, obs, torch.device("cuda", 0), machine, seconds=0.6, cache=tmp_path / "c.json"
    )
    assert set(choice.samples_per_s) == {"fp32", "fp32-cl", "bf16", "bf16-cl"}
    assert all(v > 0 for v in choice.samples_per_s.values())


def test_pong_on_the_gpu_records_nvml_and_resumes_on_the_cpu(runs_root):
    run = runs_root / "pong"
    assert (
        main(
            [
                "train",
                *PONG,
                "stop.iterations=4",
                "runner.precision=bf16",
                "--runs-root",
                str(runs_root),
                "-s",
                "pong",
            ]
        )
        == 0
    )
    rows = read_metrics(run)
    assert len(rows) == 4 and all(r["learn_time_ms"] > 0 for r in rows)
    # the preset records the learner's step as a CUDA graph (24 minibatches an iteration)
    assert [r["perf/learner_graphed"] for r in rows] == [1.0] * 4
    last = rows[-1]
    # NVML: utilisation, memory, power and energy of the GPU in every record
    assert 0 <= last["sys/gpu0_util_percent"] <= 100
    assert last["sys/gpu0_mem_mb"] > 100  # at least this process's CUDA context
    assert last["sys/gpu0_power_w"] > 0 and last["energy/gpu0_joules"] > 0
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "completed" and manifest["gpus"]
    # The checkpoint written on the GPU resumes with a CPU learner.
    assert (
        main(
            [
                "train",
                "--resume",
                str(run),
                "stop.iterations=5",
                "runner.learner_device=cpu",
                "runner.actor_device=cpu",
                "--no-progress",
            ]
        )
        == 0
    )
    rows = read_metrics(run)
    assert len(rows) == 5 and rows[-1]["perf/learner_graphed"] == 0.0  # nothing to capture


def test_appo_actor_processes_act_on_the_gpu(runs_root):
    argv = [
        "train",
        "--algo",
        "appo",
        "--runner",
        "decoupled",
        "--env",
        "CartPole-v1",
        "--num-workers",
        "2",
        "env.num_envs=4",
        "runner.learner_device=cuda",
        "runner.actor_device=cuda",
        "stop.iterations=6",
        "--no-progress",
        "--runs-root",
        str(runs_root),
        "-s",
        "appo",
    ]
    assert main(argv) == 0
    rows = read_metrics(runs_root / "appo")
    assert len(rows) == 6 and rows[-1]["perf/actor_steps_per_s"] > 0
    assert max(r["sys/gpu0_mem_mb"] for r in rows) > 100


def _pqn_recorded_or_eager(graphs: bool):
    torch.manual_seed(0)
    actor_critic = build_model(ModelConfig(name="nips", layer_norm=True), (4, 64, 64), 6)
    policy = QPolicy.from_actor_critic(actor_critic).cuda()
    algo = PQN(PQNConfig(num_steps=16, num_minibatches=4, update_epochs=2), policy, seed=0)
    step = LocalGradientStep(
        policy, algo.optimizer_spec(), device=torch.device("cuda", 0), graphs=graphs
    )
    batch = _pong_rollout()  # PQN reads no log-probabilities
    metrics = [algo.update(batch, step, Progress(i, 128 * (i + 1), 1.0)) for i in range(2)]
    return policy, metrics


def test_pqn_recorded_step_with_radam_is_captured_and_learns_as_the_eager_one():
    deterministic = torch.backends.cudnn.deterministic
    torch.backends.cudnn.deterministic = True
    try:
        eager, eager_metrics = _pqn_recorded_or_eager(False)
        recorded, metrics = _pqn_recorded_or_eager(True)
    finally:
        torch.backends.cudnn.deterministic = deterministic
    assert [m["perf/learner_graphed"] for m in metrics] == [1.0, 1.0]  # 8 minibatches each
    for e, r in zip(eager_metrics, metrics, strict=True):
        for key in ("losses/td_loss", "losses/q_values", "losses/grad_norm"):
            assert r[key] == pytest.approx(e[key], rel=1e-2, abs=1e-5), key
    for a, b in zip(eager.parameters(), recorded.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-3, atol=1e-4)


def test_pqn_actors_act_on_the_gpu_with_a_recorded_learner(runs_root):
    argv = [
        "train", "--preset", "pqn-cartpole", "--runner", "decoupled", "--num-workers", "2",
        "env.num_envs=4", "runner.learner_device=cuda", "runner.actor_device=cuda",
        "runner.cuda_graph=true", "stop.iterations=6", "--no-progress",
        "--runs-root", str(runs_root), "-s", "pqn",
    ]  # fmt: skip
    assert main(argv) == 0
    rows = read_metrics(runs_root / "pqn")
    assert len(rows) == 6 and rows[-1]["perf/learner_graphed"] == 1.0
    assert rows[-1]["losses/epsilon"] < 1.0
