"""The bench's score, human normalisation and rliable aggregates against values worked out by
hand on small fixed numbers."""

from __future__ import annotations

import numpy as np
import pytest

from rlperf.report.bench_scores import RunScore, game_name, reference, run_score
from rlperf.report.bench_section import BenchCell, bench_matrices
from rlperf.report.bench_stats import (
    aggregate,
    improvement_probabilities,
    interval_metrics,
    probability_of_improvement,
    score_distribution,
    seeded,
)
from rlperf.studies.bench import SUITES


def test_human_normalisation_by_hand() -> None:
    pong = reference("ALE/Pong-v5")
    assert pong is not None and (pong.random, pong.human) == (-20.7, 14.6)
    assert pong.normalise(-20.7) == 0.0
    assert pong.normalise(14.6) == pytest.approx(1.0)
    assert pong.normalise(0.0) == pytest.approx(20.7 / 35.3)
    qbert = reference("ALE/Qbert-v5")
    assert qbert is not None
    # halfway between random (163.9) and human (13455.0)
    assert qbert.normalise(6809.45) == pytest.approx(0.5)
    dunk = reference("ALE/DoubleDunk-v5")  # negative references: -18.6 random, -16.4 human
    assert dunk is not None and dunk.normalise(-17.5) == pytest.approx(0.5)


def test_every_suite_game_and_the_common_games_have_references() -> None:
    common = [
        "Pong",
        "Breakout",
        "SpaceInvaders",
        "Seaquest",
        "BeamRider",
        "Enduro",
        "MsPacman",
        "Asterix",
    ]
    for env_id in [*SUITES["atari5"], *(f"ALE/{g}-v5" for g in common)]:
        assert reference(env_id) is not None, env_id
    assert reference("CartPole-v1") is None
    assert game_name("PongNoFrameskip-v4") == "Pong"
    assert game_name("ALE/MontezumaRevenge-v5") == "MontezumaRevenge"
    assert game_name("CartPole-v1") is None


def _record(mean: float | None, games: int, steps: int = 1000, secs: float = 9.5) -> dict:
    return {
        "episode_reward_mean": mean,
        "episodes_total": games,
        "timesteps_total": steps,
        "time_total_s": secs,
    }


def test_the_score_is_the_last_records_mean_of_its_last_100_games() -> None:
    score = run_score([_record(3.0, 40), _record(7.5, 250, 5000, 60.0)])
    assert (score.score, score.games, score.env_steps, score.seconds) == (7.5, 100, 5000, 60.0)
    assert run_score([_record(2.0, 7)]).games == 7
    nothing = run_score([_record(None, 0)])
    assert nothing.score is None and nothing.games == 0
    assert run_score([]).score is None


def test_iqm_median_and_mean_by_hand() -> None:
    # 2 seeds x 3 games. IQM: of the 6 scores 0,1,2,3,10,20 the lowest and highest quarter
    # (one each) go: mean(1,2,3,10) = 4. Per-game means 1, 2, 15: median 2, mean 6.
    scores = {"a": np.array([[0.0, 1.0, 10.0], [2.0, 3.0, 20.0]])}
    got = interval_metrics(scores, reps=200)["a"]
    assert got["IQM"].value == pytest.approx(4.0)
    assert got["median"].value == pytest.approx(2.0)
    assert got["mean"].value == pytest.approx(6.0)
    for v in got.values():
        assert v.low <= v.value <= v.high


def test_identical_seeds_leave_no_uncertainty() -> None:
    scores = {"a": np.array([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]])}
    iqm = interval_metrics(scores, reps=200)["a"]["IQM"]
    assert iqm.low == iqm.value == iqm.high == pytest.approx(2.0)


def test_probability_of_improvement_by_hand() -> None:
    # Game 1: x in {3, 5}, y in {1, 4}: of the 4 pairs x wins 3 -> 0.75.
    # Game 2: x always 0, y always 1 -> 0. Averaged over games: 0.375.
    x = np.array([[3.0, 0.0], [5.0, 0.0]])
    y = np.array([[1.0, 1.0], [4.0, 1.0]])
    got = improvement_probabilities({"x": x, "y": y}, reps=200)
    assert got[("x", "y")].value == pytest.approx(0.375)
    assert got[("y", "x")].value == pytest.approx(0.625)
    # a tie counts half: x = {2, 2}, y = {2, 1} -> (0.5 + 1 + 0.5 + 1) / 4
    ties = improvement_probabilities({"x": np.array([[2.0], [2.0]]), "y": np.array([[2.0], [1.0]])})
    assert ties[("x", "y")].value == pytest.approx(0.75)


def test_probability_of_improvement_is_rliables_to_the_last_bit() -> None:
    from rliable import metrics

    rng = np.random.default_rng(5)
    cases = [(rng.normal(size=(m, 5)), rng.normal(size=(n, 5))) for m, n in ((3, 3), (2, 7))]
    ties = rng.integers(0, 3, (4, 6)).astype(float)  # many ties, some columns equal
    cases += [(ties, ties[::-1]), (ties, ties), (ties[:2], rng.integers(0, 3, (3, 6)) * 1.0)]
    cases += [(np.array([[np.inf, 1.0], [2.0, np.nan]]), np.array([[np.inf, 0.0], [1.0, 3.0]]))]
    for x, y in cases:
        ours, theirs = probability_of_improvement(x, y), metrics.probability_of_improvement(x, y)
        assert np.array_equal(ours, theirs, equal_nan=True), (x, y, ours, theirs)
    assert np.isnan(probability_of_improvement(*cases[-1]))  # NaN propagates, as in scipy
    assert probability_of_improvement(cases[-1][0][:, :1], cases[-1][1][:, :1]) == 0.625


def test_score_distribution_is_rliables_to_the_last_bit() -> None:
    from rliable import library

    rng = np.random.default_rng(7)
    taus = np.linspace(-1.0, 2.0, 101)
    cases = [rng.normal(0.5, 1.0, (3, 5)), rng.normal(size=(7, 1)), rng.normal(size=(2, 5, 2))]
    cases += [np.array([[0.0, 1.0], [taus[3], np.nan], [np.inf, -np.inf]])]  # at a tau; NaN
    for scores in cases:
        ours, theirs = score_distribution(scores, taus), library.score_distributions(scores, taus)
        assert np.array_equal(ours, theirs), (scores, ours, theirs)
    # through the bootstrap: the same profile and band as rliable's own profile function
    scores = {"a": cases[0], "b": rng.normal(0.0, 1.0, (3, 5))}
    with seeded():
        ours = library.create_performance_profile(
            scores, taus, custom_profile_func=score_distribution, reps=200
        )
    with seeded():
        theirs = library.create_performance_profile(scores, taus, reps=200)
    for name in scores:
        assert np.array_equal(ours[0][name], theirs[0][name])
        assert np.array_equal(ours[1][name], theirs[1][name])


def test_aggregates_are_reproducible_and_leave_numpys_generator_alone() -> None:
    rng = np.random.default_rng(3)
    scores = {"a": rng.normal(1.0, 0.5, (3, 5)), "b": rng.normal(0.5, 0.5, (3, 5))}
    np.random.seed(123)
    before = np.random.get_state()[1].copy()
    first = aggregate(scores, normalised=True, reps=300)
    assert np.array_equal(np.random.get_state()[1], before)
    second = aggregate(scores, normalised=True, reps=300)
    assert first.metrics == second.metrics and first.improvement == second.improvement
    for name, matrix in scores.items():  # the profile: the share of runs above each tau
        expected = [np.mean(matrix > tau) for tau in first.taus]
        assert np.allclose(first.profiles[name], expected)
        assert np.all(first.profile_bands[name][0] <= first.profiles[name] + 1e-12)
    assert first.taus[0] <= 0.0 and first.taus[-1] >= 1.0  # random to human at least


def _cell(
    preset: str, game: str, seed: int, score: float | None, status: str = "completed"
) -> BenchCell:
    done = status == "completed"  # as bench_cells does: only completed runs are scored
    result = RunScore(score, 100 if score is not None else 0, 1000, 60.0) if done else None
    return BenchCell(f"{preset}__{game}__s{seed}", preset, game, seed, status, None, result)


def test_cartpole_alone_is_aggregated_raw_and_says_why() -> None:
    cells = [_cell(p, "CartPole-v1", s, 100.0 * s) for p in ("a", "b") for s in (1, 2)]
    m = bench_matrices(cells)
    assert not m.normalised and m.games == ["CartPole-v1"]
    assert "no human/random reference for CartPole-v1" in m.notes
    assert any("aggregates are of raw scores" in n for n in m.notes)
    assert m.matrices["a"].tolist() == [[100.0], [200.0]]


def test_games_without_reference_leave_the_normalised_aggregates() -> None:
    cells = [
        _cell("a", "ALE/Pong-v5", 1, 14.6),
        _cell("a", "CartPole-v1", 1, 500.0),
        _cell("a", "ALE/Pong-v5", 2, -20.7),
        _cell("a", "CartPole-v1", 2, 20.0),
        _cell("b", "ALE/Pong-v5", 1, None),  # no game finished
        _cell("b", "ALE/Pong-v5", 2, 0.0, status="failed"),
    ]
    m = bench_matrices(cells)
    assert m.normalised and m.games == ["ALE/Pong-v5"]
    assert m.matrices["a"] == pytest.approx(np.array([[1.0], [0.0]]))
    assert "b" not in m.matrices
    notes = " | ".join(m.notes)
    assert "CartPole-v1: left out of the normalised aggregates" in notes
    assert (
        "b seed 1 left out of the aggregates: no score on ALE/Pong-v5 (no game finished)" in notes
    )
    assert "b seed 2 left out of the aggregates: no score on ALE/Pong-v5 (failed)" in notes
