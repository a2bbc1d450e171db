"""The configuration reference, ``docs/config.md``, built from the declarations: each
section with its docstring, each key with its type, declared range, default and the
docstring under its field. A test keeps the page equal to what this builds; rebuild it with
``python -m rlperf.config.reference > docs/config.md``."""

from __future__ import annotations

import dataclasses
import typing

from rlperf.config.load import field_docs, get_key, type_name
from rlperf.config.schema import ALGORITHM_SECTIONS, RunConfig
from rlperf.config.section import declared_ranges


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("<", "&lt;")


def _rows(cls: type, prefix: str, defaults: object) -> list[str]:
    hints, docs = typing.get_type_hints(cls), field_docs(cls)
    ranges = declared_ranges(RunConfig)
    rows = ["| key | type | range | default | meaning |", "| --- | --- | --- | --- | --- |"]
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        if dataclasses.is_dataclass(hint):
            continue
        key = f"{prefix}{f.name}"
        declared = ranges[key].text if key in ranges else ""
        default = get_key(defaults, key)  # type: ignore[arg-type]
        cells = [f"`{key}`", type_name(hint), declared, f"`{default!r}`", docs.get(f.name, "")]
        rows.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return rows


def reference_markdown() -> str:
    """The whole page."""
    defaults = RunConfig()
    out = [
        "# Configuration reference",
        "",
        "Every key of a run's configuration, built from the declarations in `config/schema.py`",
        "and `config/algorithms/` (rebuild: `python -m rlperf.config.reference > docs/config.md`).",
        "Set a key with `--KEY VALUE`, `--KEY=VALUE` or `KEY=VALUE` on `rlperf train`, or in a",
        "preset. A value outside its range is refused in one line before anything is built.",
        f"The algorithm sections ({', '.join(f'`{a}`' for a in ALGORITHM_SECTIONS)}) are read",
        "only by their own algorithm; a run's `config.yaml` keeps its algorithm's section alone.",
        "",
        "## run",
        "",
        *_rows(RunConfig, "", defaults),
    ]
    hints = typing.get_type_hints(RunConfig)
    for f in dataclasses.fields(RunConfig):
        section = hints[f.name]
        if not dataclasses.is_dataclass(section):
            continue
        doc = " ".join((section.__doc__ or "").split())
        out += ["", f"## {f.name}", "", doc, "", *_rows(section, f"{f.name}.", defaults)]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    print(reference_markdown(), end="")
