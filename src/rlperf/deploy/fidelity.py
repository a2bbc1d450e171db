"""Does the exported policy still act like the trained one?

The thesis's int8 and Edge TPU policies lost every game 21-0 while the original won points:
the export pipeline had broken the policy and nothing checked. Here every backend is compared
with torch fp32 on the same fixed set of game observations:

* action agreement: the share of observations where the backend's argmax equals torch's;
* max |Δlogits| (absolute, and relative to the largest |logit| of torch);

and, on the same env seeds, the mean return of each backend's greedy policy beside torch's.
A backend passes when its agreement and Δlogits are within :data:`THRESHOLDS` for its
precision. A graph with swapped outputs, a missing 1/255 or the wrong output fails here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from rlperf.deploy.backends import Backend
from rlperf.deploy.policy import RunPolicy, torch_logits

THRESHOLDS: dict[str, tuple[float, float | None]] = {
    "fp32": (0.999, 1e-4),  # (min action agreement, max relative |Δlogits|)
    "int8": (0.97, None),  # int8 logits differ by design; the actions must not
}


@dataclass
class FidelityResult:
    """One backend against torch fp32."""

    backend: str
    precision: str
    observations: int
    agreement: float
    max_abs_dlogits: float
    rel_dlogits: float
    returns: list[float] = field(default_factory=list)
    passed: bool = False
    problem: str = ""

    @property
    def mean_return(self) -> float:
        return float(np.mean(self.returns)) if self.returns else float("nan")


def compare_logits(reference: np.ndarray, logits: np.ndarray) -> tuple[float, float, float]:
    """(action agreement, max |Δ|, max |Δ| / max |reference|) of two logit arrays (N, A)."""
    reference = np.asarray(reference, dtype=np.float64)
    logits = np.asarray(logits, dtype=np.float64)
    if logits.shape != reference.shape:
        raise ValueError(f"logits of shape {logits.shape}, expected {reference.shape}")
    agreement = float((logits.argmax(-1) == reference.argmax(-1)).mean())
    diff = float(np.abs(logits - reference).max())
    scale = float(np.abs(reference).max()) or 1.0
    return agreement, diff, diff / scale


def backend_logits(backend: Backend, obs: np.ndarray) -> np.ndarray:
    """The backend's logits on every row of ``obs``, in its batch size (a remainder that does
    not fill a batch is padded with copies of its last row)."""
    k = backend.batch_size
    out = []
    for i in range(0, len(obs), k):
        chunk = obs[i : i + k]
        n = len(chunk)
        if n < k:
            chunk = np.concatenate([chunk, np.repeat(chunk[-1:], k - n, axis=0)])
        out.append(np.asarray(backend(np.ascontiguousarray(chunk)))[:n])
    return np.concatenate(out)


def judge(result: FidelityResult) -> FidelityResult:
    """Set ``passed``/``problem`` from the thresholds of the result's precision."""
    min_agreement, max_rel = THRESHOLDS[result.precision]
    problems = []
    if result.agreement < min_agreement:
        problems.append(f"agreement {result.agreement:.2%} < {min_agreement:.1%}")
    if max_rel is not None and result.rel_dlogits > max_rel:
        problems.append(f"relative |Δlogits| {result.rel_dlogits:.1e} > {max_rel:.0e}")
    result.passed = not problems and not result.problem
    result.problem = "; ".join(filter(None, [result.problem, *problems]))
    return result


def check_backend(backend: Backend, obs: np.ndarray, reference: np.ndarray) -> FidelityResult:
    """Compare ``backend`` with the torch ``reference`` logits on ``obs``."""
    try:
        logits = backend_logits(backend, obs)
        agreement, diff, rel = compare_logits(reference, logits)
        problem = ""
    except ValueError as exc:  # e.g. a graph whose "logits" is the value
        agreement, diff, rel, problem = 0.0, float("inf"), float("inf"), str(exc)
    result = FidelityResult(backend.name, backend.precision, len(obs), agreement, diff, rel)
    result.problem = problem
    return judge(result)


def check_fidelity(
    policy: RunPolicy,
    backends: list[Backend],
    obs: np.ndarray,
    *,
    episodes: int = 0,
    seed: int = 0,
    max_steps: int | None = None,
) -> tuple[list[FidelityResult], list[float]]:
    """Every backend against torch fp32 on ``obs``; with ``episodes`` > 0 also greedy returns
    on seeds ``seed .. seed+episodes-1`` (each game capped at ``max_steps`` calls).

    Returns (one result per backend, torch's returns on the same seeds).
    """
    from rlperf.deploy.backends import TorchBackend
    from rlperf.deploy.infer import run_greedy

    reference = torch_logits(policy.model.cpu(), obs)
    results = [check_backend(b, obs, reference) for b in backends]

    def returns(backend: Backend) -> list[float]:
        out = []
        for e in range(episodes):
            run = run_greedy(
                backend,
                policy,
                episodes=1,
                steps=max_steps,
                seed=seed + e,
                warmup=0,
                batch_size=backend.batch_size,
            )
            out.append(run.episodes[0].reward)
        return out

    torch_returns: list[float] = []
    if episodes > 0:
        torch_returns = returns(TorchBackend(policy, threads=1))
        for backend, result in zip(backends, results, strict=True):
            result.returns = (
                torch_returns
                if isinstance(backend, TorchBackend) and backend.device.type == "cpu"
                else returns(backend)
            )
    return results, torch_returns


def format_report(results: list[FidelityResult], torch_returns: list[float]) -> str:
    """A table: one line per backend, then torch's return on the same seeds."""
    lines = [
        f"{'backend':<12} {'prec':<5} {'obs':>5} {'agree':>8} {'max|dlogits|':>13} "
        f"{'relative':>9} {'mean return':>12}  result"
    ]
    for r in results:
        ret = f"{r.mean_return:.2f}" if r.returns else "-"
        lines.append(
            f"{r.backend:<12} {r.precision:<5} {r.observations:>5} {r.agreement:>8.2%} "
            f"{r.max_abs_dlogits:>13.3g} {r.rel_dlogits:>9.2g} {ret:>12}  "
            + ("ok" if r.passed else f"FAIL: {r.problem}")
        )
    if torch_returns:
        lines.append(
            f"torch fp32 mean return on the same seeds: {np.mean(torch_returns):.2f} "
            f"({', '.join(f'{x:g}' for x in torch_returns)})"
        )
    return "\n".join(lines)
