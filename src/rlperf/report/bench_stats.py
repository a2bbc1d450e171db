"""Aggregate benchmark statistics with rliable (Agarwal et al. 2021, "Deep Reinforcement
Learning at the Edge of the Statistical Precipice", NeurIPS): rliable's bootstraps, metrics
and profiles, with two exceptions made for speed, each held equal to rliable's by a test: the
probability of improvement's count of pairs (:func:`probability_of_improvement`) and the
profile's shares at every threshold at once (:func:`score_distribution`).

For each preset a score matrix of ``seeds x games`` goes in; out come the interquartile
mean (IQM), median and mean with 95 % stratified-bootstrap confidence intervals (runs
resampled within each game), the probability that each preset beats each other one on a
game picked at random (with its interval, each preset's runs resampled independently), and
performance profiles (the share of runs scoring above each threshold tau, with its band).

rliable draws its bootstrap indices from numpy's global generator (its bootstraps override
arch's index draws, so arch's own ``random_state`` would change nothing), so every
computation runs with that generator seeded with :data:`BOOTSTRAP_SEED` (and restored
afterwards): the same scores give the same intervals on every run of the report.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

BOOTSTRAP_SEED = 0
BOOTSTRAP_REPS = 2000
"""Bootstrap resamples per interval: rliable's default for performance profiles; enough for
the 2.5 % and 97.5 % percentiles at the 2-10 seeds of a wall-clock benchmark."""
CONFIDENCE = 0.95
PROFILE_POINTS = 101
METRICS = ("IQM", "median", "mean")


@dataclass(frozen=True)
class Interval:
    """A point estimate with its 95 % confidence interval."""

    value: float
    low: float
    high: float


@dataclass
class Aggregates:
    """Everything the bench section shows about a set of score matrices."""

    scores: dict[str, np.ndarray]
    """Preset -> its ``seeds x games`` scores (human-normalised, or raw)."""
    metrics: dict[str, dict[str, Interval]] = field(default_factory=dict)
    """Preset -> {IQM, median, mean} -> estimate."""
    improvement: dict[tuple[str, str], Interval] = field(default_factory=dict)
    """(X, Y) -> P(X > Y): the probability that X scores above Y on a random game."""
    taus: np.ndarray = field(default_factory=lambda: np.zeros(0))
    profiles: dict[str, np.ndarray] = field(default_factory=dict)
    """Preset -> fraction of runs scoring above each tau."""
    profile_bands: dict[str, np.ndarray] = field(default_factory=dict)
    """Preset -> ``2 x taus``: the lower and upper bound of the profile's 95 % band."""


@contextlib.contextmanager
def seeded(seed: int = BOOTSTRAP_SEED) -> Iterator[None]:
    """numpy's global generator seeded (rliable draws from it), restored on exit."""
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        yield
    finally:
        np.random.set_state(state)


def _point_metrics(scores: np.ndarray) -> np.ndarray:
    from rliable import metrics

    return np.array(
        [
            metrics.aggregate_iqm(scores),
            metrics.aggregate_median(scores),
            metrics.aggregate_mean(scores),
        ]
    )


def probability_of_improvement(x: np.ndarray, y: np.ndarray) -> np.float64:
    """rliable's ``metrics.probability_of_improvement(x, y)``, the same number to the last
    bit: per game the Mann-Whitney U of ``x``'s runs over ``y``'s (a win counts 1, a tie
    half) divided by the pairs, 0.5 where the two columns are equal, averaged over games.

    rliable gets U from ``scipy.stats.mannwhitneyu``, which also works out a p-value that
    nothing here reads: exactly, for the few runs of a wall-clock bench, at about 0.4 ms per
    game, and a bootstrap calls it 2,000 times per pair of presets (8 s for two presets on
    five games, most of a bench report's time). U itself is a count of pairs. A test holds
    this function equal to rliable's, NaN and ties included."""
    per_game = []
    for a, b in zip(x.T, y.T, strict=True):
        if np.array_equal(a, b):
            per_game.append(0.5)
        elif np.isnan(a).any() or np.isnan(b).any():  # scipy propagates NaN
            per_game.append(np.nan)
        else:
            a_runs, b_runs = a[:, None], b[None, :]
            u = (a_runs > b_runs).sum() + 0.5 * (a_runs == b_runs).sum()
            per_game.append(u / (len(a) * len(b)))
    return np.mean(per_game)


def score_distribution(scores: np.ndarray, taus: np.ndarray) -> np.ndarray:
    """rliable's score distribution (``library.score_distributions``), the same numbers: the
    share of all runs on all games scoring above each threshold in ``taus``.

    rliable computes it one threshold at a time through ``np.vectorize``: 101 thresholds in
    each of a bootstrap's 2,000 resamples are 202,000 Python calls per preset, 4.5 s of a
    two-preset report. Comparing every score with every threshold at once is one call."""
    return np.mean(scores.reshape(-1, 1) > np.asarray(taus).reshape(1, -1), axis=0)


def _improvement(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.array([probability_of_improvement(x, y)])


def interval_metrics(
    scores: dict[str, np.ndarray], reps: int = BOOTSTRAP_REPS
) -> dict[str, dict[str, Interval]]:
    """IQM, median and mean of each preset's scores with their 95 % stratified-bootstrap
    intervals."""
    from rliable import library

    with seeded():
        points, bands = library.get_interval_estimates(
            scores, _point_metrics, reps=reps, confidence_interval_size=CONFIDENCE
        )
    return {
        name: {
            m: Interval(float(points[name][i]), float(bands[name][0][i]), float(bands[name][1][i]))
            for i, m in enumerate(METRICS)
        }
        for name in scores
    }


def improvement_probabilities(
    scores: dict[str, np.ndarray], reps: int = BOOTSTRAP_REPS
) -> dict[tuple[str, str], Interval]:
    """P(X > Y) for every ordered pair of presets, with its 95 % interval (the runs of X and
    of Y resampled independently within each game)."""
    from rliable import library

    pairs = {(x, y): (scores[x], scores[y]) for x in scores for y in scores if x != y}
    if not pairs:
        return {}
    keyed = {f"{i}": pair for i, pair in enumerate(pairs.values())}
    with seeded():
        points, bands = library.get_interval_estimates(
            keyed, _improvement, reps=reps, confidence_interval_size=CONFIDENCE
        )
    return {
        pair: Interval(float(points[key][0]), float(bands[key][0][0]), float(bands[key][1][0]))
        for key, pair in zip(keyed, pairs, strict=True)
    }


def profile_taus(scores: dict[str, np.ndarray], normalised: bool) -> np.ndarray:
    """Thresholds spanning every score (and 0 to 1, random to human, when normalised)."""
    values = np.concatenate([s.ravel() for s in scores.values()])
    low, high = float(values.min()), float(values.max())
    if normalised:
        low, high = min(low, 0.0), max(high, 1.0)
    if high <= low:
        high = low + 1.0
    return np.linspace(low, high, PROFILE_POINTS)


def aggregate(
    scores: dict[str, np.ndarray], *, normalised: bool, reps: int = BOOTSTRAP_REPS
) -> Aggregates:
    """Interval estimates, improvement probabilities and performance profiles of ``scores``
    (preset -> ``seeds x games``; every matrix over the same games in the same order)."""
    from rliable import library

    out = Aggregates(scores=scores)
    out.metrics = interval_metrics(scores, reps)
    out.improvement = improvement_probabilities(scores, reps)
    out.taus = profile_taus(scores, normalised)
    with seeded():
        out.profiles, out.profile_bands = library.create_performance_profile(
            scores,
            out.taus,
            custom_profile_func=score_distribution,
            reps=reps,
            confidence_interval_size=CONFIDENCE,
        )
    return out
