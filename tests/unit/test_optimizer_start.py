"""A training process never loads torch's compiler for an eager run (about 1.5 s of CPU at
every start), and the optimizer's update is torch's own, value for value."""

import subprocess
import sys

SCRIPT = """
import sys
import torch
from torch import nn
from rlperf.core.optim import LocalGradientStep
from rlperf.core.protocols import OptimizerSpec

def train(name, fused=False):
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 2))
    step = LocalGradientStep(net, OptimizerSpec(name, 1e-2, 1e-5, fused=fused), device=torch.device("cpu"))
    for i in range(3):
        step((net(torch.randn(8, 4, generator=torch.Generator().manual_seed(i))) ** 2).mean(), 0.5)
    step.load_state_dict({**step.state_dict(), "state": {str(k): v for k, v in step.state_dict()["state"].items()}})
    return torch.cat([p.detach().flatten() for p in net.parameters()])

kinds = [("adam", False), ("adam", True), ("rmsprop", False)]
ours = {kind: train(*kind) for kind in kinds}
assert "torch._dynamo" not in sys.modules, "the compiler was imported"
import torch._dynamo  # now torch's wrapped step runs: the same numbers
for kind, params in ours.items():
    assert torch.equal(train(*kind), params), kind
# fused Adam: the same maths in another order (equal to rounding, not bit for bit)
assert torch.allclose(ours[("adam", True)], ours[("adam", False)], atol=1e-6)
print("ok")
"""


def test_eager_training_steps_never_import_the_compiler_and_match_torch() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
