"""Tables of a report, written three ways: CSV (raw numbers, for further analysis),
Markdown (to paste into docs) and HTML (in the page)."""

from __future__ import annotations

import csv
import html
import io
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def fmt(value: Any, digits: int = 3) -> str:
    """A cell as text: None -> "-", floats with ``digits`` significant digits (thousands
    separated), everything else as str."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if not math.isfinite(value):
            return "-"
        if value == 0:
            return "0"
        magnitude = math.floor(math.log10(abs(value)))
        decimals = max(0, digits - 1 - magnitude)
        return f"{value:,.{decimals}f}"
    return str(value)


@dataclass
class Table:
    """A titled table: ``rows`` hold raw values; text cells are made by :func:`fmt`."""

    name: str
    """File stem: ``<name>.csv`` and ``<name>.md``."""
    title: str
    headers: list[str]
    rows: list[list[Any]] = field(default_factory=list)
    digits: int = 3

    def cells(self) -> list[list[str]]:
        return [[fmt(v, self.digits) for v in row] for row in self.rows]

    def to_csv(self) -> str:
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(self.headers)
        for row in self.rows:
            writer.writerow(
                ["" if v is None else (f"{v:.6g}" if isinstance(v, float) else v) for v in row]
            )
        return buf.getvalue()

    def to_markdown(self) -> str:
        def esc(text: str) -> str:
            return text.replace("|", "\\|")

        lines = [f"**{self.title}**", ""]
        lines.append("| " + " | ".join(esc(h) for h in self.headers) + " |")
        lines.append("|" + "|".join(" --- " for _ in self.headers) + "|")
        for row in self.cells():
            lines.append("| " + " | ".join(esc(c) for c in row) + " |")
        return "\n".join(lines) + "\n"

    def to_html(self) -> str:
        head = "".join(f"<th>{html.escape(h)}</th>" for h in self.headers)
        body = []
        for raw, row in zip(self.rows, self.cells(), strict=True):
            tds = []
            for v, c in zip(raw, row, strict=True):
                numeric = isinstance(v, int | float) and not isinstance(v, bool)
                cls = ' class="num"' if numeric else ""
                tds.append(f"<td{cls}>{html.escape(c)}</td>")
            body.append("<tr>" + "".join(tds) + "</tr>")
        return (
            f'<table id="table-{html.escape(self.name)}"><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(body)}</tbody></table>"
        )

    def write(self, out_dir: Path) -> list[Path]:
        """Write ``<name>.csv`` and ``<name>.md`` into ``out_dir``; returns the paths."""
        csv_path, md_path = out_dir / f"{self.name}.csv", out_dir / f"{self.name}.md"
        csv_path.write_text(self.to_csv(), encoding="utf-8")
        md_path.write_text(self.to_markdown(), encoding="utf-8")
        return [csv_path, md_path]
