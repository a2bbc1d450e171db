"""Which of two arms reaches a target sooner, from their seeds' env steps to the target
(``rlperf bench --target``), with the seeds that missed it kept in.

A seed that missed stopped at its cap without reaching the target: its time to target is
only known to be beyond the cap (right-censored). Counting it at its cap, as a median does,
would make its arm look quicker than it is. So the comparison goes pair by pair, one seed of
each arm (Gehan's generalisation of the Mann-Whitney test): a pair is decided when one seed
certainly reached the target first (both reached, or the one reached within the other's
cap), tied when both reached at the same step, and undecided when a cap leaves the order
open (both missed, or one reached beyond the other's cap).

- **P(sooner)**: the share of pairs in which a seed of arm A reached it first, ties counted
  half; the undecided pairs make it a range, from none of them to all of them for A.
- **p**: a two-sided permutation test of the pairs' score (A first minus B first) under
  "the arm makes no difference": every way of splitting the pooled seeds into arms of the
  same sizes (exact up to :data:`EXACT_SPLITS` splits, otherwise that many random splits from
  a fixed seed), with scipy's ``permutation_test``. Exact with the few seeds an arm has; with
  no miss it is the exact Mann-Whitney test.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from rlperf.report.bench_stats import BOOTSTRAP_SEED
from rlperf.report.bench_target import SeedTarget, TargetSummary

EXACT_SPLITS = 20_000
"""Up to this many splits of the pooled seeds the test enumerates them all (8 + 8 seeds:
12,870); beyond, it draws this many."""


@dataclass(frozen=True)
class TargetComparison:
    """Arm ``a`` against arm ``b`` on one game: who reached the target first, pair by pair."""

    a: str
    b: str
    game: str
    seeds_a: int
    seeds_b: int
    a_first: int
    """Pairs in which ``a``'s seed certainly reached the target first."""
    b_first: int
    ties: int
    undecided: int
    p_value: float | None
    """Two-sided permutation p of the pairs' score (None with fewer than 2 seeds an arm)."""

    @property
    def pairs(self) -> int:
        return self.seeds_a * self.seeds_b

    @property
    def sooner_low(self) -> float:
        """P(a seed of ``a`` reaches it first) with every undecided pair given to ``b``."""
        return (self.a_first + self.ties / 2) / self.pairs

    @property
    def sooner_high(self) -> float:
        """The same with every undecided pair given to ``a``."""
        return (self.a_first + self.ties / 2 + self.undecided) / self.pairs

    def text(self) -> str:
        """One line: ``a`` first in a share of the pairs, and the test's p."""
        share = f"{self.sooner_low:.2f}"
        if self.undecided:
            share += f"-{self.sooner_high:.2f} ({self.undecided} undecided by a cap)"
        p = "-" if self.p_value is None else f"{self.p_value:.3g}"
        return (
            f"{self.a} vs {self.b} on {self.game}: {self.a} first in {share} of "
            f"{self.pairs} seed pairs; permutation p = {p} (two-sided, misses censored)"
        )


def first_to_target(x: SeedTarget, y: SeedTarget) -> float | None:
    """1.0 when seed ``x`` certainly reached the target in fewer env steps than ``y``, 0.0
    when ``y`` did, 0.5 for a tie, None when a cap leaves the order open."""
    if x.reached and y.reached:
        return 1.0 if x.env_steps < y.env_steps else 0.0 if x.env_steps > y.env_steps else 0.5
    # A miss ran its cap's env steps without reaching the target: its time is beyond them.
    if x.reached and x.env_steps <= y.env_steps:
        return 1.0
    if y.reached and y.env_steps <= x.env_steps:
        return 0.0
    return None


def _score_matrix(seeds: Sequence[SeedTarget]) -> np.ndarray:
    """+1 where row's seed was certainly first, -1 where column's was, 0 otherwise."""
    n = len(seeds)
    m = np.zeros((n, n))
    for i, j in combinations(range(n), 2):
        order = first_to_target(seeds[i], seeds[j])
        if order is not None and order != 0.5:
            m[i, j] = 2 * order - 1
            m[j, i] = -m[i, j]
    return m


def _permutation_p(a: Sequence[SeedTarget], b: Sequence[SeedTarget]) -> float | None:
    if len(a) < 2 or len(b) < 2:
        return None
    from scipy.stats import permutation_test

    scores = _score_matrix([*a, *b])

    def statistic(ia: np.ndarray, ib: np.ndarray) -> float:
        return float(scores[np.ix_(ia.astype(int), ib.astype(int))].sum())

    result = permutation_test(
        (np.arange(len(a)), np.arange(len(a), len(a) + len(b))),
        statistic,
        permutation_type="independent",
        alternative="two-sided",
        n_resamples=EXACT_SPLITS,
        rng=np.random.default_rng(BOOTSTRAP_SEED),
    )
    return float(result.pvalue)


def compare_targets(
    a: TargetSummary, b: TargetSummary, label_a: str = "", label_b: str = ""
) -> TargetComparison:
    """Arm ``a`` against arm ``b`` (the same game and target; see the module's docstring).
    The labels default to the summaries' presets."""
    if a.game != b.game:
        raise ValueError(f"cannot compare {a.game} with {b.game}: not the same game")
    seeds_a, seeds_b = list(a.seeds.values()), list(b.seeds.values())
    orders = [first_to_target(x, y) for x in seeds_a for y in seeds_b]
    return TargetComparison(
        label_a or a.preset,
        label_b or b.preset,
        a.game,
        len(seeds_a),
        len(seeds_b),
        a_first=orders.count(1.0),
        b_first=orders.count(0.0),
        ties=orders.count(0.5),
        undecided=orders.count(None),
        p_value=_permutation_p(seeds_a, seeds_b),
    )


def pairwise(arms: Sequence[tuple[str, TargetSummary]]) -> list[TargetComparison]:
    """Every later arm against every earlier one on each game they share, in the given
    order (a bench's presets, or benches in the order the report was given them)."""
    out = []
    for (label_b, b), (label_a, a) in combinations(arms, 2):
        if a.game == b.game:
            out.append(compare_targets(a, b, label_a, label_b))
    return out
