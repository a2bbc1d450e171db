"""Does the exported policy still act like the trained one?

The thesis's int8 and Edge TPU policies lost every game 21-0 while the original won points:
the export pipeline had broken the policy and nothing checked. Here every backend is compared
with torch fp32 on the same fixed set of game observations:

* action agreement: the share of observations where the backend's argmax equals torch's;
* max |Δlogits| (absolute, and relative to the largest |logit| of torch);
* the value head (the thesis compared ``output[1]``): max and mean |Δvalue|, and max |Δvalue|
  relative to the largest |value| of torch;

and, on the same env seeds, the mean return of each backend's greedy policy beside torch's.
A backend passes when its agreement, Δlogits and Δvalue are within :data:`THRESHOLDS` for
its precision. A graph with swapped outputs, a missing 1/255 or the wrong output fails here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from rlperf.deploy.backends import Backend
from rlperf.deploy.policy import RunPolicy, torch_outputs


class Threshold(NamedTuple):
    """What a backend of one precision must meet."""

    min_agreement: float
    max_rel_dlogits: float | None
    max_rel_dvalue: float | None


THRESHOLDS: dict[str, Threshold] = {
    "fp32": Threshold(0.999, 1e-4, 1e-4),
    # int8 outputs differ by design (the value is reported, not judged); the actions must not
    "int8": Threshold(0.97, None, None),
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
    max_abs_dvalue: float = float("nan")
    mean_abs_dvalue: float = float("nan")
    rel_dvalue: float = float("nan")
    """max |Δvalue| / max |torch's value|."""
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


def compare_values(reference: np.ndarray, value: np.ndarray) -> tuple[float, float, float]:
    """(max |Δ|, mean |Δ|, max |Δ| / max |reference|) of two value arrays (N,)."""
    reference = np.asarray(reference, dtype=np.float64)
    value = np.asarray(value, dtype=np.float64)
    if value.shape != reference.shape:
        raise ValueError(f"value of shape {value.shape}, expected {reference.shape}")
    diff = np.abs(value - reference)
    scale = float(np.abs(reference).max()) or 1.0
    return float(diff.max()), float(diff.mean()), float(diff.max()) / scale


def backend_outputs(backend: Backend, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The backend's (logits, value) on every row of ``obs``, in its batch size (a remainder
    that does not fill a batch is padded with copies of its last row)."""
    k = backend.batch_size
    logits, values = [], []
    for i in range(0, len(obs), k):
        chunk = obs[i : i + k]
        n = len(chunk)
        if n < k:
            chunk = np.concatenate([chunk, np.repeat(chunk[-1:], k - n, axis=0)])
        lg, v = backend.outputs(np.ascontiguousarray(chunk))
        logits.append(np.asarray(lg)[:n])
        values.append(np.asarray(v)[:n])
    return np.concatenate(logits), np.concatenate(values)


def judge(result: FidelityResult) -> FidelityResult:
    """Set ``passed``/``problem`` from the thresholds of the result's precision."""
    limit = THRESHOLDS[result.precision]
    problems = []
    if result.agreement < limit.min_agreement:
        problems.append(f"agreement {result.agreement:.2%} < {limit.min_agreement:.1%}")
    if limit.max_rel_dlogits is not None and result.rel_dlogits > limit.max_rel_dlogits:
        problems.append(
            f"relative |Δlogits| {result.rel_dlogits:.1e} > {limit.max_rel_dlogits:.0e}"
        )
    # not (<=): a NaN (no value compared) fails as well
    if limit.max_rel_dvalue is not None and not result.rel_dvalue <= limit.max_rel_dvalue:
        problems.append(f"relative |Δvalue| {result.rel_dvalue:.1e} > {limit.max_rel_dvalue:.0e}")
    result.passed = not problems and not result.problem
    result.problem = "; ".join(filter(None, [result.problem, *problems]))
    return result


def check_backend(
    backend: Backend, obs: np.ndarray, reference: tuple[np.ndarray, np.ndarray]
) -> FidelityResult:
    """Compare ``backend`` with torch's ``reference`` (logits, value) on ``obs``."""
    result = FidelityResult(backend.name, backend.precision, len(obs), 0.0, np.inf, np.inf)
    try:
        logits, value = backend_outputs(backend, obs)
        result.agreement, result.max_abs_dlogits, result.rel_dlogits = compare_logits(
            reference[0], logits
        )
        result.max_abs_dvalue, result.mean_abs_dvalue, result.rel_dvalue = compare_values(
            reference[1], value
        )
    except ValueError as exc:  # e.g. a graph whose "logits" is the value
        result.problem = str(exc)
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

    reference = torch_outputs(policy.model.cpu(), obs)
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
        f"{'relative':>9} {'max|dvalue|':>12} {'mean|dvalue|':>13} {'mean return':>12}  result"
    ]
    for r in results:
        ret = f"{r.mean_return:.2f}" if r.returns else "-"
        lines.append(
            f"{r.backend:<12} {r.precision:<5} {r.observations:>5} {r.agreement:>8.2%} "
            f"{r.max_abs_dlogits:>13.3g} {r.rel_dlogits:>9.2g} {r.max_abs_dvalue:>12.3g} "
            f"{r.mean_abs_dvalue:>13.3g} {ret:>12}  " + ("ok" if r.passed else f"FAIL: {r.problem}")
        )
    if torch_returns:
        lines.append(
            f"torch fp32 mean return on the same seeds: {np.mean(torch_returns):.2f} "
            f"({', '.join(f'{x:g}' for x in torch_returns)})"
        )
    return "\n".join(lines)
