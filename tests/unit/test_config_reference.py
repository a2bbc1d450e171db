"""docs/config.md is the configuration reference built from the declarations: it cannot
drift from the code."""

from pathlib import Path

from rlperf.config.reference import reference_markdown

PAGE = Path(__file__).resolve().parents[2] / "docs" / "config.md"


def test_the_reference_page_is_what_the_declarations_build() -> None:
    assert PAGE.read_text() == reference_markdown(), (
        "rebuild it: python -m rlperf.config.reference > docs/config.md"
    )


def test_the_page_shows_each_declared_range_and_no_table_breaks() -> None:
    lines = PAGE.read_text().splitlines()
    (gamma,) = [line for line in lines if line.startswith("| `ppo.gamma` |")]
    assert "| between 0 and 1 | `0.99` |" in gamma
    rows = [line for line in lines if line.startswith("| `")]
    # five cells in every row: a pipe inside a type or a doc is escaped
    assert all(line.replace("\\|", "").count("|") == 6 for line in rows)
