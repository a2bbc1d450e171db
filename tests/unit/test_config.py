"""Configuration: presets, overrides, thesis aliases, and one-line errors with exit code 2."""

import dataclasses
import json
import os
import subprocess
import sys

import pytest
import torch
import yaml

from rlperf.cli import build_train_config, main
from rlperf.config.load import (
    available_presets,
    dump_run_config,
    field_docs,
    load_preset,
    parse_cpu_list,
)
from rlperf.config.schema import PPOConfig, RunConfig
from rlperf.config.validate import validate
from rlperf.core.errors import ConfigError
from rlperf.training.resolve import resolve


def run_cli(capsys, *argv):
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(
    "argv,needle",
    [
        (
            ["ppo.learnin_rate=1e-4"],
            "unknown config key 'ppo.learnin_rate' (did you mean ppo.learning_rate?)",
        ),
        (["--ppo.num-steps", "abc"], "ppo.num_steps must be an integer, got 'abc'"),
        (["env.num_envs=0"], "env.num_envs must be positive and finite, got 0"),
        (["ppo.update_epochs=-3"], "ppo.update_epochs must be positive and finite, got -3"),
        (["-w", "3", "env.num_envs=8"], "-w 3 must divide env.num_envs (8)"),
        (["-w", "2", "--runner", "inproc"], "-w 2: runner inproc has no worker processes"),
        (["-w", "0", "--runner", "decoupled"], "runner decoupled needs -w 1 or more"),
        (["-c", "0"], "-c/--cpus must be a positive integer, got 0"),
        (["--env", "ALE/Pongg-v5"], "ALE/Pongg-v5"),
        (["--preset", "nope"], "unknown preset 'nope'"),
        (["--model", "7"], "unknown model '7'"),
        (["--algo", "ppp"], "unknown algorithm 'ppp' (did you mean ppo?)"),
        (["--runner", "warp"], "unknown runner 'warp'"),
        (["runner.precision=fp8"], "runner.precision must be one of fp32, bf16"),
        (["-a", "1-0"], "invalid CPU range"),
        (["-a", "0,4096"], "runner.cpu_affinity names CPUs [4096]"),
        (["stop.total_timesteps=null"], "no stop criterion"),
        (["stop.anneal_over=wall_time_s"], "stop.anneal_over=wall_time_s needs stop.wall_time_s"),
        (
            ["stop.anneal_over=hours"],
            "stop.anneal_over must be one of total_timesteps, wall_time_s",
        ),
        (["--bogus"], "option --bogus needs a value"),
        (["stray"], "unrecognized argument 'stray'"),
        (
            ["--env", "CartPole-v1", "--model", "nature"],
            "model nature reads image observations but CartPole-v1 gives features",
        ),
        (["--model", "6", "env.dim=84"], "designed for 168x168"),
        (["env.clip_rewards=maybe"], "env.clip_rewards must be true or false"),
        (["--seed", "-1"], "seed must be between 0 and 2**32 - 1"),
        (["model.hidden_sizes=[-3]"], "model.hidden_sizes must be a non-empty list"),
        (["ppo.learning_rate=nan"], "ppo.learning_rate must be positive and finite, got nan"),
        (["ppo.gamma=nan"], "ppo.gamma must be between 0 and 1"),
        (["ppo.late_phase_return=inf"], "ppo.late_phase_return must be a finite number, got inf"),
        pytest.param(
            ["runner.learner_device=cuda"],
            "torch sees no CUDA device",
            marks=pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU"),
        ),
        (
            ["env.num_envs=1", "ppo.num_steps=4", "ppo.num_minibatches=4"],
            "a minibatch must hold 2 to 4 samples",
        ),
        (
            ["ppo.minibatch_size=128"],
            "set exactly one of ppo.num_minibatches and ppo.minibatch_size",
        ),
        # the engines' declared limits (envs/facts.py ENGINE_FACTS), refused before building
        (
            ["--engine", "ale-vector", "env.resize_interpolation=linear"],
            "env.resize_interpolation=linear is not implemented by engine ale-vector",
        ),
        (
            ["--engine", "envpool", "env.resize_interpolation=nearest"],
            "is not implemented by engine envpool; valid: area, linear, or engine gymnasium",
        ),
        (
            ["--engine", "envpool", "env.max_pool=false"],
            "env.max_pool=false is not implemented by engine envpool",
        ),
        (
            ["--engine", "ale-vector", "env.max_pool_frames=3"],
            "env.max_pool_frames=3 is not implemented by engine ale-vector",
        ),
        (
            ["--engine", "envpool", "env.mark_frame_parity=true"],
            "env.mark_frame_parity is not implemented by engine envpool",
        ),
        (
            ["--engine", "ale-vector", "env.start_parity=even"],
            "env.start_parity=even is not implemented by engine ale-vector",
        ),
        (
            ["--engine", "gymnasium", "env.start_parity=odd", "env.frameskip=5"],
            "env.start_parity=odd needs an even env.frameskip without env.frameskip_max",
        ),
        (["env.start_parity=both"], "env.start_parity must be one of"),
        (
            ["--engine", "ale-vector", "env.start_parity=lagging"],
            "env.start_parity=lagging is not implemented by engine ale-vector",
        ),
        (["env.start_parity_share=0.75"], "env.start_parity_share / env.start_parity_gap steer"),
        (
            ["env.start_parity=lagging", "env.start_parity_share=0.25"],
            "env.start_parity_share must be 0.5 to 1, got 0.25",
        ),
        (
            ["--runner", "subprocess", "env.start_parity=lagging"],
            "env.start_parity=lagging needs runner inproc (its envs in the training process), "
            "not subprocess",
        ),
        (
            ["--engine", "envpool", "ppo.parity_balance_gap=5"],
            "ppo.parity_balance_gap needs an engine that tells each game's frame parity "
            "(gymnasium, ale-vector), not envpool",
        ),
        (
            ["--env", "CartPole-v1", "ppo.parity_balance_gap=5"],
            "ppo.parity_balance_gap needs an Atari game, not CartPole-v1",
        ),
        (
            ["ppo.parity_balance_gap=5", "env.frameskip=5"],
            "ppo.parity_balance_gap needs an even env.frameskip without env.frameskip_max",
        ),
        (
            ["--runner", "subprocess", "ppo.parity_balance_gap=5"],
            "ppo.parity_balance_gap needs runner inproc, not subprocess",
        ),
        (
            ["ppo.parity_balance_weight=0.5"],
            "ppo.parity_balance_weight needs ppo.parity_balance_gap",
        ),
        (
            ["ppo.parity_balance_gap=5", "ppo.parity_balance_weight=2"],
            "ppo.parity_balance_weight must be between 0 and 1",
        ),
        (["env.max_pool_frames=5"], "env.max_pool_frames must be 2 to env.frameskip (4), got 5"),
        (["env.max_pool_frames=1"], "env.max_pool_frames must be at least 2, got 1"),
        (
            ["--env", "CartPole-v1", "model.activation=elu"],
            "model.activation=elu applies to the image models; mlp uses tanh",
        ),
        (["--model", "1", "model.layer_norm=true"], "model.layer_norm applies to nature, nips"),
        (
            ["--model", "1", "model.vf_torso_grad_scale=0"],
            "model.vf_torso_grad_scale applies to a shared convolutional or mlp torso",
        ),
        (
            ["--algo", "pqn", "model.vf_torso_grad_scale=0.5"],
            "model.vf_torso_grad_scale weighs a value head, which pqn does not have",
        ),
        (["model.vf_torso_grad_scale=1.5"], "model.vf_torso_grad_scale"),
        (["runner.ray_address=no-port"], "runner.ray_address is set but the runner is inproc"),
        (
            ["--runner", "ray", "runner.ray_address=no-port"],
            "runner.ray_address 'no-port' is not a Ray address",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, tmp_path, argv, needle):
    code, out, err = run_cli(capsys, "train", "--runs-root", str(tmp_path), *argv)
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("rlperf: error: ")
    assert needle in err
    assert "Traceback" not in err + out
    assert not any(tmp_path.iterdir())  # nothing was created


def test_unreadable_preset_file_is_a_clean_error(capsys, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b"\xff\xfe\x00garbage")
    code, _, err = run_cli(capsys, "train", "--preset", str(bad))
    assert code == 2 and "cannot read" in err and "UTF-8" in err


def test_resume_of_a_missing_run_is_a_clean_error(capsys, tmp_path):
    code, _, err = run_cli(capsys, "train", "--resume", str(tmp_path / "nope"))
    assert code == 2 and "is not a run directory" in err


def test_unknown_command(capsys):
    code, _, err = run_cli(capsys, "trian")
    assert code == 2 and "unknown command 'trian'" in err


def test_presets_then_flags_in_order():
    cfg, _ = build_train_config(
        [
            "--preset",
            "cleanrl-atari",
            "--env",
            "ALE/Breakout-v5",
            "--ppo.learning-rate=1e-3",
            "ppo.num_steps=64",
        ]
    )
    assert cfg.env.id == "ALE/Breakout-v5"
    assert cfg.ppo.learning_rate == 1e-3 and cfg.ppo.num_steps == 64
    assert cfg.ppo.clip_coef == 0.1 and cfg.env.num_envs == 8


def test_rllib_preset_is_the_thesis_configuration():
    cfg, _ = build_train_config(["--preset", "rllib-2021"])
    assert cfg.env.num_envs * cfg.ppo.num_steps == 4000
    assert (cfg.ppo.minibatch_size, cfg.ppo.update_epochs, cfg.ppo.learning_rate) == (128, 30, 5e-5)
    assert (cfg.ppo.gae_lambda, cfg.ppo.clip_coef, cfg.ppo.vf_loss_clip, cfg.ppo.vf_coef) == (
        1.0,
        0.3,
        10.0,
        1.0,
    )
    assert (cfg.ppo.ent_coef, cfg.ppo.kl_coeff, cfg.ppo.kl_penalty_target) == (0.0, 0.2, 0.01)


def test_pong_fast_is_the_solved_run_in_one_preset():
    # The settings of the 39-minute run in docs/benchmarks.md, except that the learner's
    # precision (bf16 by hand then) is timed on the machine at hand.
    cfg, _ = build_train_config(["--preset", "pong-fast"])
    solved, _ = build_train_config(
        ["--preset", "cleanrl-atari", "--env", "ALE/Pong-v5", "runner.precision=auto",
         "stop.total_timesteps=2600000", "stop.target_reward=17"]
    )  # fmt: skip
    assert cfg == solved
    assert cfg.stop.target_reward_metric == "mean100" and cfg.env.repeat_action_probability == 0


def test_atari_fast_is_the_documented_recipe():
    # docs/benchmarks-pong-cpu.md, "Time to solve Pong on 2 CPU cores" and "The guard": what
    # the preset changes.
    cfg, _ = build_train_config(["--preset", "atari-fast", "--env", "ALE/Breakout-v5"])
    base, _ = build_train_config(["--preset", "cleanrl-atari", "--env", "ALE/Breakout-v5"])
    changed = {
        "env.engine": "ale-vector",
        "env.num_envs": 16,
        "env.dim": 64,
        "model.name": "nips",
        "model.zero_sum_first_layer": True,
        "ppo.num_steps": 64,
        "ppo.num_minibatches": 16,
        "ppo.update_epochs": 3,
        "ppo.learning_rate": 5e-4,
        "ppo.anneal_lr": True,
        "ppo.ent_coef": 0.01,
        "ppo.anneal_ent_coef": True,
        "ppo.vf_clip_coef": None,
        "ppo.vf_coef": 1.0,
        "ppo.late_phase_target_share": 0.8,
        "ppo.late_phase_ent_coef": 0.003,
        "ppo.late_phase_lr_scale": 0.5,
        "runner.precision": "auto",
        "stop.wall_time_s": 1500,
        "stop.anneal_over": "wall_time_steps",
        "stop.anneal_min_sps": 2400,
        "stop.target_reward_metric": "mean100+ema",
    }
    for key, value in changed.items():
        section, name = key.split(".")
        assert getattr(getattr(cfg, section), name) == value, key
        setattr(getattr(base, section), name, value)
    assert cfg == base  # nothing else differs from CleanRL's recipe, and no game is named
    assert cfg.env.id == "ALE/Breakout-v5" and cfg.stop.target_reward is None


@pytest.mark.parametrize("name", available_presets())
def test_every_shipped_preset_passes_validation(name):
    # A key added to a preset reaches every preset that extends it: atari-fast's rate floor is
    # refused under atari-fast-gpu's schedules over seconds unless that preset drops it.
    validate(build_train_config(["--preset", name])[0])


def test_extends_merges_presets():
    demo = load_preset("demo-pong")
    assert demo["ppo"]["num_steps"] == 128 and demo["stop"]["wall_time_s"] == 180


def test_thesis_aliases_map_onto_rlperf_options():
    cfg, _ = build_train_config(
        ["-m", "3", "-w", "4", "-s", "exp1", "-i", "20", "-c", "2", "-a", "0-1", "-g", "none"]
    )
    assert cfg.model.name == "3"
    assert cfg.run_name == "exp1" and cfg.stop.iterations == 20
    # -w 4: four RLlib rollout workers; -c 2: two CPUs declared, -a 0-1: the pin
    assert (cfg.runner.name, cfg.runner.num_workers) == ("rllib", 4)
    assert cfg.runner.cpu_affinity == [0, 1] and cfg.runner.ray_num_cpus == 2
    assert cfg.runner.learner_device == cfg.runner.actor_device == "cpu"


def test_the_thesis_readme_example_trains_the_thesis_ppo(monkeypatch):
    # 000's own example: model 3 on GPU 0, 0.001 GPUs for the driver, 4 workers sharing the
    # rest of the GPU
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    argv = ["--model=3", "--gpu=gpu0", "--driver-gpus=0.001", "--workers=4", "--iters=1000"]
    cfg, _ = build_train_config(argv)  # no --preset: the thesis's, rllib-2021
    assert (cfg.ppo.learning_rate, cfg.ppo.update_epochs, cfg.ppo.minibatch_size) == (5e-5, 30, 128)
    assert (cfg.runner.name, cfg.runner.num_workers, cfg.stop.iterations) == ("rllib", 4, 1000)
    assert (cfg.runner.learner_device, cfg.runner.actor_device) == ("cuda:0", "cuda:0")
    assert cfg.runner.ray_num_gpus_per_actor == pytest.approx(0.2497)  # 0.999 / 4, Ray's step
    assert (cfg.env.num_envs, cfg.ppo.num_steps) == (4, 1000)  # 4 x 1000 = the batch of 4000
    # a preset given is kept: rlperf's names and presets are not the thesis's
    cfg, _ = build_train_config(["--preset", "cartpole", "-w", "2"])
    assert cfg.ppo.learning_rate != 5e-5 and cfg.runner.name == "rllib"


def test_w_rounds_the_train_batch_up_as_rllib_did_and_w0_samples_in_the_learner(capsys):
    cfg, _ = build_train_config(["--preset", "rllib-2021", "-w", "3"])
    # 3 workers x 200-step fragments = 600 per round; 7 rounds fill 4000: 4200
    assert (cfg.runner.name, cfg.runner.num_workers, cfg.env.num_envs) == ("rllib", 3, 3)
    assert cfg.ppo.num_steps == 1400
    assert "4200 steps per batch (configured 4000" in capsys.readouterr().err
    validate(cfg)
    cfg, _ = build_train_config(["--preset", "rllib-2021", "-w", "2", "--envs-per-worker", "5"])
    assert (cfg.env.num_envs, cfg.ppo.num_steps) == (10, 400)
    cfg, _ = build_train_config(["--preset", "rllib-2021", "-w", "0"])
    assert (cfg.runner.name, cfg.runner.num_workers) == ("inproc", 1)
    assert (cfg.env.num_envs, cfg.ppo.num_steps) == (1, 4000)  # RLlib's local worker alone
    validate(cfg)
    cfg, _ = build_train_config(["--algo", "impala", "--runner", "decoupled", "-w", "2"])
    assert (cfg.runner.name, cfg.runner.num_workers) == ("decoupled", 2)
    # a horizon given is kept
    cfg, _ = build_train_config(["--preset", "rllib-2021", "-w", "8", "ppo.num_steps=100"])
    assert (cfg.env.num_envs, cfg.ppo.num_steps) == (8, 100)
    # -c alone declares (the thesis's Exp14): no pin; N torch threads for the inproc learner
    cfg, _ = build_train_config(["-c", "1"])
    assert cfg.runner.cpu_affinity is None and cfg.runner.ray_num_cpus == 1
    assert cfg.runner.torch_threads == 1


def test_sweeps_and_the_command_line_plan_workers_one_way():
    from rlperf.sweep.machine import Machine
    from rlperf.sweep.plan import plan_points
    from rlperf.sweep.spec import parse_spec

    counts = [0, 1, 3, 8, 16]
    spec = parse_spec(
        {"presets": ["rllib-2021"], "grid": {"workers": counts}}, "workers-one-way.yaml"
    )
    planned = plan_points(spec, [], Machine(cpus=frozenset({0, 1}), gpus=0))
    for n, point in zip(counts, planned, strict=True):
        cli, _ = build_train_config(["--preset", "rllib-2021", "-w", str(n)])
        assert point.cfg == cli, n


@pytest.mark.parametrize(
    "gpu,driver,workers,learner,actor,share",
    [
        ("gpu0", "1", "4", "cuda:0", "cpu", 0.0),
        ("gpu0", "0.001", "4", "cuda:0", "cuda:0", 0.2497),
        ("both", "1", "2", "cuda:0", "cuda:1", 0.5),
        # Fig 4.3: the workers' shares fill both GPUs (Ray places them; 8 x 0.2498 < 2)
        ("both", "0.001", "8", "cuda:0", "cuda:0", 0.2498),
        ("gpu1", "0", "2", "cpu", "cuda:0", 0.5),
    ],
)
def test_gpu_aliases(monkeypatch, gpu, driver, workers, learner, actor, share):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    cfg, _ = build_train_config(["-g", gpu, "-d", driver, "-w", workers])
    assert (cfg.runner.learner_device, cfg.runner.actor_device) == (learner, actor)
    assert cfg.runner.ray_num_gpus_per_actor == pytest.approx(share)
    assert os.environ["CUDA_VISIBLE_DEVICES"] == {"gpu0": "0", "gpu1": "1", "both": "0,1"}[gpu]


def test_cpu_list_parsing():
    assert parse_cpu_list("0,1") == [0, 1]
    assert parse_cpu_list("0-3") == [0, 1, 2, 3]
    assert parse_cpu_list("{0, 2-3}") == [0, 2, 3]
    with pytest.raises(ConfigError):
        parse_cpu_list("a")


def test_every_field_has_a_docstring_for_help():
    docs = field_docs(PPOConfig)
    assert docs["clip_coef"].startswith("Surrogate clipping")
    assert set(docs) == set(PPOConfig.__dataclass_fields__)


def test_help_lists_config_keys(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["train", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "ppo.gae_lambda" in out and "GAE lambda" in out and "--set-affinity" in out
    # every built-in preset appears whole on a line, so it can be copied from the help
    from rlperf.config.load import available_presets

    words = {w.strip(",") for line in out.splitlines() for w in line.split()}
    assert set(available_presets()) <= words


@pytest.mark.parametrize(
    ("env_id", "model"),
    [
        ("ALE/Pong-v5", "nature"),
        ("CartPole-v1", "mlp"),
        ("rlperf/FootballEmptyGoalClose-v0", "football-mlp"),
    ],
)
def test_the_default_model_follows_the_env(env_id: str, model: str) -> None:
    from rlperf.cli import build_train_config

    cfg, _ = build_train_config(["--env", env_id])
    assert cfg.model.name == "auto"
    resolved = resolve(cfg).cfg
    assert resolved.model.name == model and cfg.model.name == "auto"  # a copy is resolved
    with pytest.raises(dataclasses.FrozenInstanceError, match="read-only"):
        resolved.model.name = "mlp"


def test_enumerations_are_declared_once_and_agree_with_the_core() -> None:
    import typing

    from rlperf.config import choices
    from rlperf.core.autoprecision import AUTO
    from rlperf.core.nan_guard import NAN_POLICIES
    from rlperf.core.optim import PRECISIONS
    from rlperf.core.shared_optim import SHARED_OPTIMIZERS
    from rlperf.models.catalog import ACTIVATIONS

    assert typing.get_args(choices.Precision) == (*PRECISIONS, AUTO)
    assert typing.get_args(choices.NanPolicy) == NAN_POLICIES
    assert set(typing.get_args(choices.Optimizer)) == set(SHARED_OPTIMIZERS)
    assert set(typing.get_args(choices.Activation)) == set(ACTIVATIONS)
    help_text = subprocess.run(
        [sys.executable, "-m", "rlperf", "train", "--help"], capture_output=True, text=True
    ).stdout
    assert "runner.precision (fp32|bf16|auto, default 'fp32')" in help_text
    cfg = RunConfig()
    cfg.env.engine = "warp"  # built in code, never parsed: validation still refuses it
    with pytest.raises(ConfigError, match="env.engine must be one of gymnasium, envpool"):
        validate(cfg)


def test_old_spellings_of_renamed_keys_are_accepted(tmp_path) -> None:
    from rlperf.config.load import get_key, load_config_file

    old = tmp_path / "config.yaml"  # a run directory written before the renames
    old.write_text(
        "ppo:\n  kl_target: 0.02\na3c:\n  tau: 0.9\n  eps: 1.0e-6\nimpala:\n  eps: 0.1\n"
    )
    cfg = load_config_file(old)
    assert cfg.ppo.kl_penalty_target == 0.02 and cfg.a3c.gae_lambda == 0.9
    assert cfg.a3c.optimizer_eps == 1e-6 and cfg.impala.optimizer_eps == 0.1
    assert get_key(cfg, "a3c.tau") == 0.9
    cfg2, _ = build_train_config(["--algo", "a3c", "a3c.tau=0.5"])
    assert cfg2.a3c.gae_lambda == 0.5


def test_a_run_directory_keeps_only_its_own_algorithm_section(tmp_path) -> None:
    import yaml

    argv = ["train", "--algo", "appo", "--env", "CartPole-v1", "--runs-root", str(tmp_path)]
    argv += ["-s", "run", "--no-progress", "-i", "1", "telemetry.tensorboard=false"]
    assert main(argv) == 0
    saved = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())
    assert "appo" in saved and not {"ppo", "impala", "dqn", "a3c", "rnd"} & set(saved)
    assert {"env", "model", "runner", "stop", "checkpoint", "telemetry"} <= set(saved)
    run = str(tmp_path / "run")
    # -i with a resume means that many more iterations (the thesis trained in stages)
    assert main(["train", "--resume", run, "--no-progress", "-i", "2"]) == 0
    rows = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(r)["iteration"] for r in rows] == [1, 2, 3]
    # -s names a new run's directory: with --resume it is refused, not ignored
    with pytest.raises(ConfigError, match="a resumed run keeps its directory"):
        build_train_config(["--resume", run, "-s", "elsewhere", "-i", "1"])
    cfg, _ = build_train_config(["--resume", run, "-s", "run", "-i", "1"])
    assert cfg.stop.iterations == 4


def test_a_frameskip_range_is_for_the_gymnasium_engine_only():
    cfg, _ = build_train_config(["--preset", "rllib-2021"])
    assert (cfg.env.frameskip, cfg.env.frameskip_max, cfg.env.engine) == (2, 4, "gymnasium")
    assert cfg.env.mean_frameskip == 3.0
    with pytest.raises(ConfigError, match="needs env.engine=gymnasium; ale-vector repeats"):
        validate(build_train_config(["--preset", "rllib-2021", "--engine", "ale-vector"])[0])
    with pytest.raises(
        ConfigError, match=r"env.frameskip_max \(3\) must be at least env.frameskip \(4\)"
    ):
        validate(build_train_config(["env.frameskip_max=3"])[0])


def test_print_config_checks_and_prints_the_run_config_without_writing(capsys, tmp_path):
    argv = ["train", "--preset", "atari-fast", "--env", "ALE/Breakout-v5", "--runs-root",
            str(tmp_path), "ppo.clip_coef=0.2", "--print-config"]  # fmt: skip
    code, out, _ = run_cli(capsys, *argv)
    assert code == 0
    printed = yaml.safe_load(out)
    expected, _ = build_train_config(argv[1:])
    assert printed["env"]["id"] == "ALE/Breakout-v5" and printed["ppo"]["clip_coef"] == 0.2
    assert printed == yaml.safe_load(dump_run_config(expected))  # what config.yaml would hold
    assert "dqn" not in printed  # only the run's own algorithm, as in a run directory
    assert not any(tmp_path.iterdir())  # nothing trained or written
    # model auto is printed as the model config.yaml will name
    code, out, _ = run_cli(capsys, "train", "--env", "ALE/Pong-v5", "--print-config")
    assert code == 0 and yaml.safe_load(out)["model"]["name"] == "nature"
    # a combination a run would refuse when it starts is refused here too, as one line
    code, out, err = run_cli(capsys, *argv, "--runner", "hogwild")
    assert code == 2 and out == "" and "runner hogwild runs algorithm a3c, not ppo" in err
    assert not any(tmp_path.iterdir())


def test_data_parallel_learners_on_cuda_need_a_device_each(monkeypatch):
    from rlperf.config.schema import RunnerConfig
    from rlperf.training.checks import check_devices

    # a fake machine with one CUDA device (faked: no GPU is needed to check the arithmetic)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    two = RunnerConfig(learner_device="cuda", actor_device="cuda", num_learners=2)
    with pytest.raises(ConfigError, match=r"num_learners=2 .* but 1 CUDA device\(s\)"):
        check_devices(two)
    check_devices(RunnerConfig(learner_device="cuda", num_learners=1))  # one learner fits
    check_devices(RunnerConfig(num_learners=2))  # learners on the CPU need no GPU


def test_the_declarations_import_without_torch() -> None:
    # the schema, its ranges and the algorithms' facts are read by --help, the report and
    # the sweeps' planner: they stay light (docs/architecture.md weighs pydantic on this)
    code = "import sys, rlperf.config.schema, rlperf.config.section; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "False", done.stderr


def test_an_engine_that_is_not_installed_is_refused_before_building(monkeypatch, capsys, tmp_path):
    # the C++ engines are optional: a missing one is a one-line refusal naming the extra
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "envpool" else real(name, *a)
    )
    code, out, err = run_cli(capsys, "train", "--runs-root", str(tmp_path), "--engine", "envpool")
    assert code == 2 and err.count("\n") == 1
    assert "engine envpool needs the envpool package" in err and "rlperf[envpool]" in err
    assert not any(tmp_path.iterdir())


def test_a_rate_floor_for_the_schedule_needs_the_measured_clock():
    cfg, _ = build_train_config(
        ["stop.wall_time_s=600", "stop.anneal_over=wall_time_steps", "stop.anneal_min_sps=2400"]
    )
    validate(cfg)
    assert cfg.stop.anneal_min_sps == 2400
    with pytest.raises(
        ConfigError,
        match="stop.anneal_min_sps is read only with stop.anneal_over=wall_time_steps, not total_timesteps",
    ):
        validate(build_train_config(["stop.anneal_min_sps=2400"])[0])
