"""Shared optimizer and Hogwild gradient step: torch's maths, one shared state, exact gradients."""

import torch
import torch.multiprocessing as mp
from torch import nn

from rlperf.core.protocols import OptimizerSpec
from rlperf.core.shared_optim import HogwildGradientStep, SharedOptimizer, copy_weights

SPECS = [OptimizerSpec("adam", 1e-2, eps=1e-8), OptimizerSpec("rmsprop", 1e-2, eps=1e-5)]


def reference(params, spec):
    if spec.name == "adam":
        return torch.optim.Adam(params, lr=spec.learning_rate, eps=spec.eps)
    return torch.optim.RMSprop(params, lr=spec.learning_rate, eps=spec.eps, alpha=0.99)


def test_matches_torch_optimizers_step_for_step():
    torch.manual_seed(0)
    for spec in SPECS:
        ours = [torch.randn(5, 3), torch.randn(3)]
        theirs = [p.clone().requires_grad_() for p in ours]
        opt = SharedOptimizer(ours, spec)
        ref = reference(theirs, spec)
        for _ in range(5):
            grads = [torch.randn_like(p) for p in ours]
            opt.step(grads)
            for p, g in zip(theirs, grads, strict=True):
                p.grad = g.clone()
            ref.step()
        for a, b in zip(ours, theirs, strict=True):
            torch.testing.assert_close(a, b.detach(), rtol=1e-5, atol=1e-6)
        assert int(opt.steps) == 5 and all(p.is_shared() for p in ours)


def _worker_step(jobs, go, done) -> None:
    go.wait()
    for opt, grads in jobs:
        opt.step(grads)
    done.set()


def test_two_processes_build_one_shared_state():
    """Two processes each take one step, in turn: the result is two steps of ONE optimizer
    (for Adam and RMSprop at once, so that only two processes are spawned)."""
    torch.manual_seed(1)
    ctx = mp.get_context("spawn")
    cases = []
    for spec in SPECS:
        params = [torch.randn(4, 4), torch.randn(4)]
        start = [p.clone() for p in params]
        grads = [[torch.randn_like(p) for p in params] for _ in range(2)]
        cases.append((spec, params, start, SharedOptimizer(params, spec), grads))
    events = [(ctx.Event(), ctx.Event()) for _ in range(2)]
    procs = [
        ctx.Process(target=_worker_step, args=([(c[3], c[4][i]) for c in cases], *events[i]))
        for i in range(2)
    ]
    for p in procs:
        p.start()
    try:
        for go, done in events:
            go.set()
            assert done.wait(60)
    finally:
        for p in procs:
            p.join(30)
    assert all(p.exitcode == 0 for p in procs)
    for spec, params, start, opt, grads in cases:
        theirs = [p.clone().requires_grad_() for p in start]
        ref = reference(theirs, spec)
        for g in grads:
            for p, gi in zip(theirs, g, strict=True):
                p.grad = gi.clone()
            ref.step()
        assert int(opt.steps) == 2  # the step count is shared
        for a, b in zip(params, theirs, strict=True):  # so are the moments
            torch.testing.assert_close(a, b.detach(), rtol=1e-5, atol=1e-6)
        name = "exp_avg_sq" if spec.name == "adam" else "square_avg"
        expected = [ref.state[p][name] for p in theirs]
        for a, b in zip(opt.state[name], expected, strict=True):
            torch.testing.assert_close(a, b)


def test_each_update_applies_exactly_its_own_segments_gradient():
    """The PyTorch 2 pitfall of 002's gradient hand-off: after zero_grad() sets gradients to
    None, an aliased global .grad keeps the first segment's gradient. Here every update must
    move the shared weights by exactly what torch's optimizer does with that segment's
    gradient alone."""
    torch.manual_seed(2)
    shared = nn.Linear(3, 2).share_memory()
    local = nn.Linear(3, 2)
    mirror = nn.Linear(3, 2)
    copy_weights(mirror, shared)
    spec = OptimizerSpec("rmsprop", 1e-2, eps=1e-5)
    step = HogwildGradientStep(local, shared, SharedOptimizer(list(shared.parameters()), spec))
    ref = reference(list(mirror.parameters()), spec)
    for segment in range(4):
        step.sync_local()
        x = torch.randn(8, 3) * (segment + 1)  # each segment has a different gradient
        step(local(x).pow(2).mean())
        ref.zero_grad(set_to_none=True)
        mirror(x).pow(2).mean().backward()
        ref.step()
        for a, b in zip(shared.parameters(), mirror.parameters(), strict=True):
            torch.testing.assert_close(a.detach(), b.detach(), rtol=1e-5, atol=1e-6)
        assert all(p.grad is None for p in local.parameters())  # nothing carried over
        assert all(p.grad is None for p in shared.parameters())
        for a, b in zip(local.parameters(), shared.parameters(), strict=True):
            assert torch.equal(a, b)  # the local copy follows the shared model


def test_clipping_and_learning_rate_ownership():
    shared = nn.Linear(2, 1).share_memory()
    opt = SharedOptimizer(list(shared.parameters()), OptimizerSpec("adam", 1e-3))
    worker = HogwildGradientStep(nn.Linear(2, 1), shared, opt, owns_learning_rate=False)
    worker.set_learning_rate(0.5)  # ignored: the driver owns the schedule
    assert float(opt.lr) == 1e-3
    driver = HogwildGradientStep(shared, shared, opt)
    driver.set_learning_rate(1e-5)
    assert float(opt.lr) == 1e-5
    worker.sync_local()
    norm = worker(worker.local(torch.full((4, 2), 100.0)).sum(), max_grad_norm=0.5)
    assert norm > 0.5
    saved = opt.state_dict()
    opt.load_state_dict({**saved, "steps": 7})
    assert int(opt.steps) == 7 and torch.equal(
        opt.state["exp_avg"][0], saved["state"]["exp_avg"][0]
    )
