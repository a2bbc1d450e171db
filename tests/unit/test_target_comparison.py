"""Arm against arm to a target (``report/target_comparison.py``): which seed of a pair reached
the target first when either may have missed it, the pairs' shares, and the permutation test,
checked against values worked out by hand and against scipy's exact Mann-Whitney test."""

from __future__ import annotations

import pytest
from scipy.stats import mannwhitneyu

from rlperf.report.bench_target import SeedTarget, TargetSummary, summarise_targets
from rlperf.report.target_comparison import compare_targets, first_to_target, pairwise


def _seed(env_steps: int, reached: bool = True) -> SeedTarget:
    """A seed that reached the target at ``env_steps``, or missed it with that cap."""
    return SeedTarget(reached, env_steps, 0.0, None, None, None, None)


def _arm(name: str, outcomes: list[SeedTarget], game: str = "ALE/Pong-v5") -> TargetSummary:
    summary = summarise_targets(name, game, dict(enumerate(outcomes, start=1)), reps=10)
    assert summary is not None
    return summary


def test_which_seed_reached_the_target_first() -> None:
    assert first_to_target(_seed(100), _seed(200)) == 1.0
    assert first_to_target(_seed(200), _seed(100)) == 0.0
    assert first_to_target(_seed(150), _seed(150)) == 0.5
    # a miss ran its cap without reaching it: a reach within the cap was first
    assert first_to_target(_seed(150), _seed(150, reached=False)) == 1.0
    assert first_to_target(_seed(300, reached=False), _seed(100)) == 0.0
    # beyond the cap, or two misses: the order is open
    assert first_to_target(_seed(200), _seed(150, reached=False)) is None
    assert first_to_target(_seed(150, reached=False), _seed(100, reached=False)) is None


def test_without_misses_it_is_the_exact_mann_whitney_test() -> None:
    quick = [690, 720, 810, 850, 900, 1010]
    slow = [753, 798, 957, 961, 1189, 1220, 1396, 1500]
    c = compare_targets(
        _arm("quick", [_seed(s) for s in quick]), _arm("slow", [_seed(s) for s in slow])
    )
    # quick first in 38 of 48 pairs: each slow seed counts the quick seeds below it
    assert (c.a_first, c.b_first, c.ties, c.undecided, c.pairs) == (38, 10, 0, 0, 48)
    assert c.sooner_low == c.sooner_high == pytest.approx(38 / 48)
    exact = mannwhitneyu(quick, slow, method="exact", alternative="two-sided").pvalue
    assert c.p_value == pytest.approx(exact)
    assert c.text() == (
        "quick vs slow on ALE/Pong-v5: quick first in 0.79 of 48 seed pairs; "
        f"permutation p = {exact:.3g} (two-sided, misses censored)"
    )


def test_a_miss_leaves_pairs_open_and_the_test_counts_only_decided_pairs() -> None:
    a = _arm("a", [_seed(100), _seed(200)])
    b = _arm("b", [_seed(300), _seed(150, reached=False)])
    c = compare_targets(a, b)
    # (100, 300) a, (100, miss at 150) a, (200, 300) a, (200, miss at 150) open
    assert (c.a_first, c.b_first, c.ties, c.undecided) == (3, 0, 0, 1)
    assert (c.sooner_low, c.sooner_high) == (0.75, 1.0)
    # The six splits of the four seeds into two arms score 3, 2, 1, -1, -2, -3 (decided
    # pairs first minus second); only the observed split reaches 3: two-sided p = 2 x 1/6.
    assert c.p_value == pytest.approx(1 / 3)
    assert "a first in 0.75-1.00 (1 undecided by a cap) of 4 seed pairs" in c.text()


def test_pairs_go_later_against_earlier_on_shared_games_only() -> None:
    default = _arm("default", [_seed(500), _seed(700)])
    arm = _arm("arm", [_seed(400), _seed(600)])
    other_game = _arm("arm", [_seed(400)], game="ALE/Breakout-v5")
    compared = pairwise([("default", default), ("arm", arm), ("breakout", other_game)])
    assert [(c.a, c.b) for c in compared] == [("arm", "default")]
    assert compare_targets(_arm("one", [_seed(1)]), default).p_value is None  # one seed
    with pytest.raises(ValueError, match="not the same game"):
        compare_targets(other_game, default)
