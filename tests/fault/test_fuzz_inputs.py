"""Property-based fuzzing of the config loader and the train CLI: whatever a user types or
writes into a preset, rlperf either accepts it or answers with one line and exit code 2;
no other exception and no traceback ever escapes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rlperf.training.session
from rlperf.cli import build_train_config, main
from rlperf.config.load import apply_dict, iter_fields
from rlperf.config.schema import RunConfig
from rlperf.core.errors import UserInputError
from rlperf.training import resolve

KEYS = [key for key, _, _ in iter_fields()]
keys = st.one_of(st.sampled_from(KEYS), st.text(min_size=1, max_size=20))
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**12), max_value=10**12),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.sampled_from(["cuda:0", "cuda:99", "mps", "0-1", "ALE/Pong-v5", "envpool", "decoupled"]),
)
values = st.one_of(scalars, st.lists(scalars, max_size=4))
FUZZ = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _accepts_or_one_line(check) -> None:  # noqa: ANN001
    try:
        check()
    except UserInputError as exc:
        assert "\n" not in str(exc) and str(exc), repr(exc)


def _check_config(cfg: RunConfig) -> None:
    resolve.check(cfg)


@FUZZ
@given(overrides=st.lists(st.tuples(keys, values), min_size=1, max_size=4))
def test_dotted_overrides(overrides: list[tuple[str, Any]]) -> None:
    argv = ["--preset", "cartpole"]
    argv += [f"{k}={yaml.safe_dump(v, default_flow_style=True).strip()}" for k, v in overrides]

    def check() -> None:
        cfg, _ = build_train_config(argv)
        _check_config(cfg)

    _accepts_or_one_line(check)


nested = st.recursive(values, lambda inner: st.dictionaries(keys, inner, max_size=4), max_leaves=10)


@FUZZ
@given(data=st.dictionaries(st.sampled_from(sorted({k.split(".")[0] for k in KEYS})), nested))
def test_preset_mappings(data: dict[str, Any]) -> None:
    def check() -> None:
        cfg = RunConfig()
        apply_dict(cfg, data, "preset fuzz.yaml")
        _check_config(cfg)

    _accepts_or_one_line(check)


FLAGS = ["--algo", "--env", "--preset", "-m", "--runner", "--engine", "--num-workers",
         "--envs-per-worker", "--seed", "-i", "-c", "-a", "-g", "-d", "-w", "--resume",
         "--checkpoint", "--no-progress"]  # fmt: skip


class FakeSession:
    """Stands in for a TrainingSession: the fuzz checks the CLI's input handling, not training."""

    exit_code = 0

    def run(self) -> None:
        pass


def fake_start_session(cfg: RunConfig, run_dir: Path, **kwargs: Any) -> FakeSession:
    """``start_session``'s checks without resolving (no precision timing) or training."""
    resolve.check(cfg)
    return FakeSession()


@FUZZ
@given(tokens=st.lists(st.one_of(st.sampled_from(FLAGS), st.text(max_size=12)), max_size=6))
def test_train_command_line(
    tokens: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.setattr(rlperf.training.session, "start_session", fake_start_session)
    code = main(["train", *tokens, "--runs-root", str(tmp_path / "runs")])
    err = capsys.readouterr().err
    assert code in (0, 2), (tokens, code, err)
    if code == 2:
        assert err.count("\n") == 1 and err.startswith("rlperf: error:"), (tokens, err)
