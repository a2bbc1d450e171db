"""The report page: one self-contained HTML file beside its PNG figures.

No script, no web font, no CDN: the page opens from disk without a network, and prints.
Every figure carries, right under it, the commands that produced its data and the
machines they ran on (from each run's ``manifest.json``).
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field

from rlperf.report.tables import Table

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto;
       max-width: 1200px; padding: 0 1rem; color: #222; line-height: 1.45; }
h1 { margin-bottom: 0.2rem; } h2 { border-bottom: 1px solid #ddd; padding-bottom: 0.2rem;
       margin-top: 2.5rem; }
.meta { color: #555; margin: 0.1rem 0; }
figure { margin: 1rem 0 1.5rem; } figure img { max-width: 100%; height: auto;
       border: 1px solid #eee; }
figcaption { font-size: 0.9rem; color: #444; }
.prov { font-size: 0.82rem; color: #555; margin-top: 0.3rem; }
code { background: #f4f4f4; padding: 0 0.2rem; border-radius: 3px; font-size: 0.82rem;
       word-break: break-all; }
table { border-collapse: collapse; margin: 0.8rem 0; font-size: 0.86rem; }
th, td { border: 1px solid #ddd; padding: 0.25rem 0.5rem; text-align: left;
       vertical-align: top; }
th { background: #f6f6f6; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.tables a { margin-right: 0.6rem; font-size: 0.85rem; }
ul.diag li { margin-bottom: 0.4rem; }
nav a { margin-right: 0.8rem; }
"""


@dataclass
class FigureBlock:
    """A figure with its caption and provenance."""

    file: str
    alt: str
    caption: str
    commands: list[str] = field(default_factory=list)
    machines: list[str] = field(default_factory=list)


@dataclass
class Section:
    """A titled part of the page."""

    anchor: str
    title: str
    paragraphs: list[str] = field(default_factory=list)
    figures: list[FigureBlock] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    items: list[str] = field(default_factory=list)
    """A bulleted list (plain text)."""


def provenance(commands: list[str], machines: list[str]) -> str:
    """The "data from ... on ..." lines under a figure."""
    unique = list(dict.fromkeys(commands))
    parts = []
    if unique:
        first = f"<code>{html.escape(unique[0])}</code>"
        if len(unique) == 1:
            parts.append(f"Data: {first}")
        else:
            rest = "".join(f"<li><code>{html.escape(c)}</code></li>" for c in unique)
            parts.append(
                f"Data from {len(unique)} commands, e.g. {first} "
                f"<details><summary>all commands</summary><ul>{rest}</ul></details>"
            )
    machines = list(dict.fromkeys(machines))
    if machines:
        parts.append("Machine: " + html.escape("; ".join(machines)))
    return "".join(f'<div class="prov">{p}</div>' for p in parts)


def _figure(block: FigureBlock) -> str:
    return (
        f'<figure><img src="{html.escape(block.file)}" alt="{html.escape(block.alt)}">'
        f"<figcaption>{html.escape(block.caption)}"
        f"{provenance(block.commands, block.machines)}</figcaption></figure>"
    )


def _table(table: Table) -> str:
    links = (
        f'<div class="tables"><a href="{html.escape(table.name)}.csv">CSV</a>'
        f'<a href="{html.escape(table.name)}.md">Markdown</a></div>'
    )
    return f"<h3>{html.escape(table.title)}</h3>{table.to_html()}{links}"


def render_page(title: str, meta: list[str], sections: list[Section]) -> str:
    """The whole page as HTML text."""
    nav = " ".join(
        f'<a href="#{html.escape(s.anchor)}">{html.escape(s.title)}</a>' for s in sections
    )
    body = [f"<h1>{html.escape(title)}</h1>"]
    body += [f'<p class="meta">{html.escape(line)}</p>' for line in meta]
    body.append(f"<nav>{nav}</nav>")
    for s in sections:
        body.append(f'<section id="{html.escape(s.anchor)}"><h2>{html.escape(s.title)}</h2>')
        body += [f"<p>{html.escape(p)}</p>" for p in s.paragraphs]
        if s.items:
            body.append(
                '<ul class="diag">'
                + "".join(f"<li>{html.escape(i)}</li>" for i in s.items)
                + "</ul>"
            )
        body += [_figure(f) for f in s.figures]
        body += [_table(t) for t in s.tables]
        body.append("</section>")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<link rel="icon" href="data:,">'  # no favicon request: nothing may fail to load
        f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>"
        + "\n".join(body)
        + "</body></html>\n"
    )
