"""The HTML report: one self-contained file (figures embedded as data URIs, no external references)."""

from __future__ import annotations

import base64
import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

__all__ = ["Section", "report_html", "table_html"]

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; }
h1 { font-size: 1.6em; } h2 { font-size: 1.25em; border-bottom: 1px solid #ccc; padding-bottom: .2em; }
table { border-collapse: collapse; font-size: .85em; margin: .5em 0 1.5em; }
th, td { border: 1px solid #ccc; padding: .25em .5em; text-align: right; }
th { background: #f3f3f3; } td.text { text-align: left; font-family: monospace; }
.anchor { color: #c0392b; font-weight: bold; }
img { max-width: 100%; border: 1px solid #eee; }
p.note { color: #555; font-size: .9em; }
"""


@dataclass
class Section:
    """A titled part of the report: paragraphs, then an optional table (HTML), then images (PNG bytes)."""

    title: str
    paragraphs: Sequence[str] = ()
    table: str = ""
    images: Mapping[str, bytes] = field(default_factory=dict)


def _fmt(value) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.4g}"
    return html.escape(str(value))


def table_html(header: Sequence[str], rows: Sequence[Sequence], *, text_columns: Sequence[int] = ()) -> str:
    """An HTML table; cells are escaped, floats shown to 4 significant digits, None as n/a.

    A cell may be given as ``("html", markup)`` to insert trusted markup.
    """
    out = ["<table><thead><tr>", *(f"<th>{html.escape(h)}</th>" for h in header), "</tr></thead><tbody>"]
    for row in rows:
        out.append("<tr>")
        for j, cell in enumerate(row):
            cls = ' class="text"' if j in text_columns else ""
            body = cell[1] if isinstance(cell, tuple) and cell[0] == "html" else _fmt(cell)
            out.append(f"<td{cls}>{body}</td>")
        out.append("</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def report_html(title: str, sections: Sequence[Section], *, subtitle: str = "") -> str:
    """The whole page."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
    ]
    if subtitle:
        parts.append(f'<p class="note">{html.escape(subtitle)}</p>')
    for section in sections:
        parts.append(f"<h2>{html.escape(section.title)}</h2>")
        parts.extend(f"<p>{html.escape(p)}</p>" for p in section.paragraphs)
        parts.append(section.table)
        for alt, png in section.images.items():
            data = base64.b64encode(png).decode("ascii")
            parts.append(f'<figure><img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'
                         f"<figcaption>{html.escape(alt)}</figcaption></figure>")
    parts.append("</body></html>")
    return "\n".join(parts)
