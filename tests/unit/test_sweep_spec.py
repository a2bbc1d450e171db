"""Sweep files: grid x list expansion, checked configs, skip reasons, the shipped presets.

Nothing here starts a training run; machines are fakes (``FAKE_*``) so the skip logic is
tested the same way on a laptop, CI and a GPU server.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from rlperf.cli import main
from rlperf.core.errors import ConfigError
from rlperf.sweep.ledger import Ledger
from rlperf.sweep.machine import Machine
from rlperf.sweep.plan import plan_points, point_names
from rlperf.sweep.run import check_resume, listed_states
from rlperf.sweep.spec import available_sweeps, load_spec, parse_spec

FAKE_CPU_ONLY = Machine(cpus=frozenset({0, 1}), gpus=0)
FAKE_ONE_GPU = Machine(cpus=frozenset(range(4)), gpus=1)

CARTPOLE = {
    "presets": ["cartpole"],
    "base": {"stop": {"iterations": 2, "total_timesteps": None}},
}


def spec_of(**data):
    return parse_spec({**CARTPOLE, **data}, "test.yaml")


def test_grid_times_list_in_order_with_names() -> None:
    spec = spec_of(
        grid={"runner.num_workers": [1, 2], "ppo.learning_rate": [1e-3, 3e-4]},
        points=[
            {"name": "in", "runner.name": "subprocess"},
            {"name": "wide", "runner": {"name": "subprocess"}, "env.num_envs": 16},
        ],
    )
    names = [n for n, _ in point_names(spec)]
    assert len(names) == 2 * 2 * 2
    assert names[:3] == [
        "num_workers=1__learning_rate=0.001__in",
        "num_workers=1__learning_rate=0.001__wide",
        "num_workers=1__learning_rate=0.0003__in",
    ]
    points = plan_points(spec, [("stop.iterations", 5)], FAKE_CPU_ONLY)
    wide = next(p for p in points if p.name == "num_workers=2__learning_rate=0.0003__wide")
    assert wide.cfg.runner.num_workers == 2  # from the grid
    assert wide.cfg.env.num_envs == 16  # from the point (nested or dotted keys alike)
    assert wide.cfg.ppo.learning_rate == pytest.approx(3e-4)
    assert wide.cfg.model.name == "mlp"  # from the preset
    assert all(p.cfg.stop.iterations == 5 for p in points)  # the command line wins


def test_list_only_and_grid_only() -> None:
    only_list = spec_of(points=[{"name": "a"}, {"name": "b", "seed": 3}])
    assert [n for n, _ in point_names(only_list)] == ["a", "b"]
    only_grid = spec_of(grid={"model.name": ["mlp"], "env.id": ["CartPole-v1", "Acrobot-v1"]})
    assert [n for n, _ in point_names(only_grid)] == [
        "model=mlp__env=CartPole-v1",
        "model=mlp__env=Acrobot-v1",
    ]


def test_envs_per_worker_is_applied_last() -> None:
    spec = spec_of(
        base={"runner.name": "subprocess", "envs_per_worker": 3, "stop.iterations": 2},
        grid={"runner.num_workers": [1, 2]},
    )
    points = plan_points(spec, [], FAKE_CPU_ONLY)
    assert [p.cfg.env.num_envs for p in points] == [3, 6]


def test_a_points_preset_sits_between_the_spec_presets_and_base() -> None:
    spec = spec_of(
        base={"stop.wall_time_s": 60},
        points=[
            {"name": "ladder", "preset": "dqn-ladder/02-n-envs"},
            {"name": "own", "preset": ["dqn-ladder/02-n-envs"], "dqn.batch_size": 64},
        ],
        baseline="ladder",
    )
    ladder, own = plan_points(spec, [], FAKE_CPU_ONLY)
    assert ladder.cfg.algo == "dqn" and ladder.cfg.env.num_envs == 3  # from the point's preset
    assert ladder.cfg.dqn.batch_size == 96 and own.cfg.dqn.batch_size == 64  # point keys win
    assert ladder.cfg.stop.wall_time_s == 60  # base wins over the point's preset
    assert spec.baseline == "ladder" and spec.to_dict()["baseline"] == "ladder"


def test_dqn_ladder_points_are_the_rung_presets() -> None:
    from rlperf.config.load import load_preset

    planned = plan_points(load_spec("dqn-ladder"), [], FAKE_CPU_ONLY)
    assert [p.name for p in planned][:2] == ["00-slow-grads", "01-baseline"]
    assert load_spec("dqn-ladder").baseline == "01-baseline"
    rung5 = planned[-1].cfg
    wanted = load_preset("dqn-ladder/05-native-engine")
    assert rung5.env.engine == wanted["env"]["engine"] == "ale-vector"
    assert rung5.runner.name == "play-train" and rung5.env.frame_stack == 2
    assert rung5.stop.wall_time_s == 900 and rung5.stop.target_reward == 17


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            {"points": [{"name": "x", "ppo.lerning_rate": 1}]},
            "point x: unknown config key 'ppo.lerning_rate' (did you mean ppo.learning_rate?)",
        ),
        (
            {"points": [{"name": "x", "runner.num_workers": "two"}]},
            "point x: runner.num_workers must be an integer",
        ),
        ({"grid": {"seed": []}}, "grid key seed must have a non-empty list"),
        ({"grids": {}}, "unknown key 'grids'; valid: name, description, command"),
        ({"points": [{"name": "a"}, {"name": "a"}]}, "two points are named 'a'"),
        ({"points": [{"name": "x", "gpus": "gpu7"}]}, "gpus must be one of none, gpu0, gpu1, both"),
        ({"points": [{"name": "bad/name"}]}, "point name 'bad/name' may hold only"),
        (
            {"points": [{"name": "x", "env.num_envs": 3, "runner.num_workers": 2}]},
            "point x: env.num_envs (3) must be divisible",
        ),
        (
            {"points": [{"name": "x", "infer.backend": "onnx"}]},
            "infer.backend needs command: infer",
        ),
        ({"command": "bench", "points": [{}]}, "command must be one of train, infer"),
        ({"timeout_s": -1, "points": [{}]}, "timeout_s must be a positive number"),
        (
            {"points": [{"name": "a"}], "baseline": "b"},
            "baseline 'b' is not a point name; valid: a",
        ),
        ({"points": [{"name": "x", "preset": "nope"}]}, "point x: unknown preset 'nope'"),
        ({"points": [{"name": "x", "preset": 3}]}, "point x: preset must be a preset name"),
    ],
)
def test_bad_input_names_the_problem(data: dict, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        plan_points(spec_of(**data), [], FAKE_CPU_ONLY)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_a_sweep_needs_points() -> None:
    with pytest.raises(ConfigError, match="give a grid, a list of points, or both"):
        parse_spec({"base": {"seed": 1}}, "empty.yaml")


def test_points_needing_gpus_are_skipped_not_failed() -> None:
    spec = spec_of(
        points=[
            {"name": "cpu"},
            {"name": "learner-gpu", "runner.learner_device": "cuda"},
            {
                "name": "two-gpus",
                "gpus": "both",
                "runner.learner_device": "cuda:0",
                "runner.actor_device": "cuda:1",
            },
            {"name": "second-gpu", "gpus": "gpu1", "runner.learner_device": "cuda:0"},
            {"name": "hidden", "gpus": "none"},
        ]
    )
    on_cpu = {p.name: p.skip for p in plan_points(spec, [], FAKE_CPU_ONLY)}
    assert on_cpu["cpu"] is None and on_cpu["hidden"] is None
    assert on_cpu["learner-gpu"] == "needs GPU: a GPU, this machine has no GPU"
    assert on_cpu["two-gpus"] == "needs GPU: 2 GPUs, this machine has no GPU"
    with_one = {p.name: p for p in plan_points(spec, [], FAKE_ONE_GPU)}
    assert with_one["learner-gpu"].skip is None
    assert with_one["two-gpus"].skip == "needs GPU: 2 GPUs, this machine has 1 GPU(s)"
    assert with_one["second-gpu"].skip is not None  # gpu1 is the second physical GPU
    assert with_one["two-gpus"].env["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert with_one["hidden"].env["CUDA_VISIBLE_DEVICES"] == ""


def test_devices_beyond_the_visible_gpus_are_an_error() -> None:
    spec = spec_of(points=[{"name": "x", "gpus": "gpu0", "runner.actor_device": "cuda:1"}])
    with pytest.raises(ConfigError, match="gpus gpu0 makes 1 GPU"):
        plan_points(spec, [], FAKE_ONE_GPU)


def test_affinity_outside_the_machine_is_skipped_and_workers_flagged() -> None:
    spec = spec_of(
        base={"runner.name": "subprocess", "envs_per_worker": 1, "stop.iterations": 2},
        points=[
            {"name": "pinned", "runner.cpu_affinity": "0-8", "runner.num_workers": 1},
            {"name": "many", "runner.num_workers": 4},
            {"name": "fits", "runner.num_workers": 2, "runner.torch_threads": 1},
        ],
    )
    points = {p.name: p for p in plan_points(spec, [], FAKE_CPU_ONLY)}
    assert points["pinned"].skip == "needs CPUs 0-8, this process may use 0-1"
    assert points["many"].skip is None
    assert points["many"].flags == ["4 workers on 2 cores (oversubscribed)"]
    assert points["fits"].flags == []
    assert points["fits"].env == {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def test_a_grid_axis_of_named_bundles_sets_several_keys_per_value() -> None:
    spec = spec_of(
        grid={
            "variant": [
                {"name": "small", "env.num_envs": 2, "ppo.num_steps": 8},
                {"name": "wide", "env": {"num_envs": 8}},
            ],
            "seed": [1, 2],
        }
    )
    planned = plan_points(spec, [], FAKE_CPU_ONLY)
    assert [p.name for p in planned] == [
        "variant=small__seed=1", "variant=small__seed=2", "variant=wide__seed=1", "variant=wide__seed=2",
    ]  # fmt: skip
    assert (planned[0].cfg.env.num_envs, planned[0].cfg.ppo.num_steps) == (2, 8)
    assert planned[3].cfg.env.num_envs == 8 and planned[3].cfg.seed == 2
    with pytest.raises(ConfigError, match="mapping under grid key variant needs a name"):
        spec_of(grid={"variant": [{"env.num_envs": 2}]})


def test_fingerprint_follows_the_resolved_config() -> None:
    spec = spec_of(points=[{"name": "a"}])
    first = plan_points(spec, [], FAKE_CPU_ONLY)[0].fingerprint()
    assert plan_points(spec, [], FAKE_CPU_ONLY)[0].fingerprint() == first
    assert plan_points(spec, [("seed", 9)], FAKE_CPU_ONLY)[0].fingerprint() != first


def _completed_with_saved_config(sweep_dir: Path, name: str, config_text: str) -> None:
    """A sweep directory as an earlier rlperf left it: the point completed with this config."""
    (sweep_dir / "configs").mkdir(parents=True)
    (sweep_dir / "configs" / f"{name}.yaml").write_text(config_text)
    Ledger(sweep_dir).append(name, "completed", fingerprint="from-an-older-rlperf")


def test_resume_accepts_settings_added_since_at_their_defaults(tmp_path: Path) -> None:
    point = plan_points(spec_of(points=[{"name": "a"}]), [], FAKE_CPU_ONLY)[0]
    data = yaml.safe_load(point.config_text())
    del data["model"]["vf_torso_grad_scale"]  # a setting the older rlperf did not have
    _completed_with_saved_config(tmp_path / "older", point.name, yaml.safe_dump(data))
    check_resume([point], tmp_path / "older")  # the same runs: resumable

    data["seed"] = 9  # a real difference stays one
    _completed_with_saved_config(tmp_path / "other", point.name, yaml.safe_dump(data))
    with pytest.raises(ConfigError, match="already holds a completed point a run with another"):
        check_resume([point], tmp_path / "other")
    with pytest.raises(ConfigError, match="already holds a completed point"):
        listed_states([point], tmp_path / "other")  # --list says so too, before a run does
    assert listed_states([point], tmp_path / "older") == {point.name: "completed"}


@pytest.mark.parametrize(
    ("name", "points", "runnable"),
    [
        ("quick", 4, 4),
        ("workers", 5, 5),
        ("thesis-training", 30, 3),  # Exp1 (no GPUs) for each of models 1, 3 and 4
        ("thesis-cpu", 27, 0),  # every Table 3.3 experiment uses a GPU
        ("thesis-inference", 32, 4),  # R8 (no GPUs) for each model and the trained policy
        ("thesis-models", 6, 6),  # Figure 3.3a: the six models, same budget
        ("thesis-workers", 4, 4),  # the worker trends of Figs 4.2, 4.3, 4.8, on the CPU
        ("thesis-models-long", 3, 3),  # Figure 3.3b: models 1, 3 and 4 trained longer
    ],
)
def test_shipped_sweeps_expand_as_the_thesis_tables(name: str, points: int, runnable: int) -> None:
    planned = plan_points(load_spec(name), [], FAKE_CPU_ONLY)
    assert len(planned) == points
    assert sum(p.skip is None for p in planned) == runnable
    assert all(p.skip is None or p.skip.startswith("needs GPU") for p in planned)


def test_thesis_training_matches_table_3_2() -> None:
    planned = {p.name: p for p in plan_points(load_spec("thesis-training"), [], FAKE_CPU_ONLY)}
    exp6 = planned["model=thesis-3__Exp6-both_gpus_2_workers"]
    assert exp6.gpus == "both" and exp6.cfg.runner.num_workers == 2
    assert (exp6.cfg.runner.learner_device, exp6.cfg.runner.actor_device) == ("cuda:0", "cuda:1")
    assert exp6.cfg.env.num_envs * exp6.cfg.ppo.num_steps == 4000  # the thesis's train batch
    exp1 = planned["model=thesis-4__Exp1-no_gpus_8_workers"]
    assert exp1.cfg.model.name == "thesis-4" and exp1.cfg.stop.iterations == 20
    assert exp1.cfg.telemetry.warmup_iterations == 3


def test_thesis_models_trains_the_six_models_alike() -> None:
    planned = plan_points(load_spec("thesis-models"), [], FAKE_CPU_ONLY)
    assert [p.cfg.model.name for p in planned] == [f"thesis-{i}" for i in range(1, 7)]
    budgets = {(p.cfg.stop.iterations, p.cfg.env.num_envs * p.cfg.ppo.num_steps) for p in planned}
    assert budgets == {(2000, 4000)}  # the thesis's 2000 iterations of 4000 steps
    assert all((p.cfg.env.frameskip, p.cfg.env.frameskip_max) == (2, 4) for p in planned)


def test_thesis_models_long_trains_models_1_3_4_longer_and_otherwise_alike() -> None:
    def settings(name: str) -> dict[str, dict]:
        """Model -> its point's resolved config, the iteration budget aside."""
        out = {}
        for p in plan_points(load_spec(name), [], FAKE_CPU_ONLY):
            cfg = dataclasses.asdict(p.cfg)
            cfg["stop"].pop("iterations")
            out[p.cfg.model.name] = cfg
        return out

    long = plan_points(load_spec("thesis-models-long"), [], FAKE_CPU_ONLY)
    assert [p.cfg.model.name for p in long] == ["thesis-1", "thesis-3", "thesis-4"]
    assert {p.cfg.stop.iterations for p in long} == {11000}  # the thesis: 11000, in stages
    selection = settings("thesis-models")
    assert settings("thesis-models-long") == {
        m: selection[m] for m in ("thesis-1", "thesis-3", "thesis-4")
    }


def test_every_shipped_sweep_loads() -> None:
    assert {"quick", "workers", "thesis-training", "thesis-cpu", "thesis-inference"} <= set(
        available_sweeps()
    )
    for name in available_sweeps():
        assert load_spec(name).name == name


def test_cli_bad_input_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("points: [{name: a, runner.nam: subprocess}]\n")
    cases = [
        (["sweep", str(tmp_path / "missing.yaml")], "sweep file"),
        (["sweep", "no-such-sweep"], "unknown sweep 'no-such-sweep'; valid: "),
        (["sweep", str(bad)], "unknown config key 'runner.nam' (did you mean runner.name?)"),
        (["sweep", "quick", "--retries", "-1"], "--retries must be an integer >= 0"),
        (["sweep", "quick", "stop.wall_time_s=soon"], "stop.wall_time_s must be a number"),
        (["report", str(tmp_path / "nothing"), "-o", str(tmp_path / "out")], "does not exist"),
        (["report", str(tmp_path), "-o", str(tmp_path / "out")], "holds no run (metrics.jsonl)"),
        (["study", "slow"], "invalid choice: 'slow'"),
    ]
    for argv, message in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert message in err, (argv, err)
        assert err.count("\n") == 1 and err.startswith("rlperf: error: "), err


def test_cli_list_prints_points(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    sweep = tmp_path / "s.yaml"
    sweep.write_text(
        "presets: [cartpole]\n"
        "base: {stop.iterations: 2}\n"
        "points:\n  - {name: here}\n  - {name: gpu, runner.learner_device: 'cuda:63'}\n"
    )
    assert main(["sweep", str(sweep), "--list"]) == 0
    out = capsys.readouterr().out
    assert "here: runs" in out
    assert "gpu: skipped: needs GPU: 64 GPUs" in out
    assert not (tmp_path / "runs").exists()  # listing writes nothing


def test_cli_list_refuses_a_directory_a_run_would_refuse(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    sweep = tmp_path / "s.yaml"
    sweep.write_text("presets: [cartpole]\nbase: {stop.iterations: 2}\npoints:\n  - {name: a}\n")
    (tmp_path / "out").mkdir()
    Ledger(tmp_path / "out").append("a", "completed", fingerprint="another config")
    assert main(["sweep", str(sweep), "--list", "-o", str(tmp_path / "out")]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # no listing before the refusal
    assert "already holds a completed point a run with another config" in captured.err


@pytest.mark.parametrize("listing", [[], ["--list"]])
def test_bench_refuses_a_directory_that_holds_a_sweep(
    tmp_path: Path, capsys: pytest.CaptureFixture, listing: list[str]
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    Ledger(out).append("a", "completed", fingerprint="a sweep's point")
    argv = ["bench", "--presets", "atari-fast", "--suite", "ALE/Pong-v5", "--seeds", "1"]
    assert main([*argv, "--minutes", "1", *listing, "-o", str(out)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # neither a listing nor a run's first line before the refusal
    assert f"{out} holds a sweep that is not a bench; give another -o DIR" in captured.err
    assert sorted(p.name for p in out.iterdir()) == ["sweep.jsonl"]  # nothing written


def test_thesis_backends_times_the_shipped_trained_policy_on_every_backend() -> None:
    planned = plan_points(load_spec("thesis-backends"), [], FAKE_CPU_ONLY)
    assert len(planned) == 24  # (models 1, 3, 4 + the trained policy) x 6 backends
    trained = [p for p in planned if p.name.startswith("policy=trained-pong__")]
    assert [p.infer["backend"] for p in trained] == [
        "torch", "onnx", "onnx-int8", "tflite", "tflite-int8", "edgetpu",
    ]  # fmt: skip
    assert {p.infer["run"] for p in trained} == {"shipped:pong"}


def test_an_unknown_shipped_policy_is_refused_when_planning() -> None:
    spec = parse_spec(
        {
            "command": "infer",
            "base": {"env.id": "ALE/Pong-v5"},
            "points": [{"infer.run": "shipped:chess"}],
        },
        "test.yaml",
    )
    with pytest.raises(
        ConfigError, match=r"no shipped policy 'shipped:chess'; valid: shipped:pong"
    ):
        plan_points(spec, [], FAKE_CPU_ONLY)
