"""Data-parallel learners (gloo, 2 processes): the averaged-gradient step equals one process
learning on the mean loss, and a CLI run with 2 learners trains, checkpoints and resumes."""

import json

import torch
import torch.multiprocessing as torch_mp

from rlperf.core import distributed
from rlperf.core.optim import LocalGradientStep
from tests.conftest import read_metrics, rlperf_subprocess
from tests.helpers.data_parallel_ranks import SPEC, batch, loss_of, take_steps, tiny_net


def test_two_gloo_learners_apply_the_gradient_of_the_mean_loss():
    ctx = torch_mp.get_context("spawn")
    port = distributed.free_port()
    with ctx.Manager() as manager:
        out = manager.dict()
        ranks = [ctx.Process(target=take_steps, args=(r, 2, port, 3, out)) for r in range(2)]
        for p in ranks:
            p.start()
        for p in ranks:
            p.join(120)
        assert [p.exitcode for p in ranks] == [0, 0]
        weights = dict(out)
    reference = tiny_net()
    step = LocalGradientStep(reference, SPEC, device=torch.device("cpu"))
    for _ in range(3):
        mean_loss = (loss_of(reference, batch(0)) + loss_of(reference, batch(1))) / 2
        step(mean_loss, max_grad_norm=0.5)
    for a, b, ref in zip(weights[0], weights[1], reference.parameters(), strict=True):
        assert torch.equal(a, b)  # the learners stay identical
        torch.testing.assert_close(a, ref.detach(), rtol=1e-5, atol=1e-6)


def test_a_run_with_two_learners_counts_both_and_resumes(runs_root):
    run_dir = runs_root / "dp"
    common = ["--no-progress", "telemetry.tensorboard=false"]
    first = rlperf_subprocess(
        "train",
        "--preset",
        "cartpole",
        "--runs-root",
        str(runs_root),
        "-s",
        "dp",
        "-i",
        "3",
        "runner.num_learners=2",
        *common,
    )
    assert first.returncode == 0, first.stderr
    rows = read_metrics(run_dir)
    batch_size = 8 * 64  # cartpole preset: num_envs x num_steps, per learner
    assert [r["timesteps_total"] for r in rows] == [2 * batch_size * i for i in (1, 2, 3)]
    assert all(r["perf/allreduce_time_ms"] > 0 for r in rows)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "completed" and manifest["resources"]["num_learners"] == 2
    assert (run_dir / "checkpoints" / "latest").read_text().startswith("ckpt_00000003_")

    resumed = rlperf_subprocess("train", "--resume", str(run_dir), "stop.iterations=5", *common)
    assert resumed.returncode == 0, resumed.stderr
    assert [r["iteration"] for r in read_metrics(run_dir)] == [1, 2, 3, 4, 5]
