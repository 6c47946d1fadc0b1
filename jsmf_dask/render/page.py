"""The HTML report: one self-contained file (figures embedded as data URIs, no external references).

Every string that reaches a page (words, item labels, model names, paths,
config values) is data, never markup: it goes through :func:`escape`, the one
escaping helper, and a table cell that shows marked-up words is built from
:class:`Marked` pieces, whose text is escaped like any other. No function
here takes trusted markup.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

__all__ = ["Section", "Marked", "escape", "script_json", "report_html", "table_html"]

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


def escape(text: object) -> str:
    """``text`` as HTML text or a quoted attribute value: ``& < > " '`` escaped."""
    return html.escape(str(text), quote=True)


def script_json(text: str) -> str:
    """JSON text made safe to put inside a ``<script>`` element: ``<``, ``>`` and ``&`` written as the
    escapes ``\\u003c``, ``\\u003e``, ``\\u0026`` (the same strings once parsed; outside strings JSON has
    none of these characters), so that no ``</script>`` or ``<!--`` in the data can end the element."""
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


@dataclass(frozen=True)
class Marked:
    """A piece of text shown in a ``<span>`` of CSS class ``css_class`` (the text is escaped)."""

    text: str
    css_class: str


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
    if isinstance(value, Marked):
        return f'<span class="{escape(value.css_class)}">{escape(value.text)}</span>'
    if isinstance(value, list):  # pieces shown one after another, separated by spaces
        return " ".join(_fmt(v) for v in value)
    return escape(value)


def table_html(header: Sequence[str], rows: Sequence[Sequence], *, text_columns: Sequence[int] = ()) -> str:
    """An HTML table; cells are escaped, floats shown to 4 significant digits, None as n/a.

    A cell is a value, a :class:`Marked` piece of text, or a list of them
    (shown separated by spaces).
    """
    out = ["<table><thead><tr>", *(f"<th>{escape(h)}</th>" for h in header), "</tr></thead><tbody>"]
    for row in rows:
        out.append("<tr>")
        for j, cell in enumerate(row):
            cls = ' class="text"' if j in text_columns else ""
            out.append(f"<td{cls}>{_fmt(cell)}</td>")
        out.append("</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def report_html(title: str, sections: Sequence[Section], *, subtitle: str = "") -> str:
    """The whole page."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{escape(title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
    ]
    if subtitle:
        parts.append(f'<p class="note">{escape(subtitle)}</p>')
    for section in sections:
        parts.append(f"<h2>{escape(section.title)}</h2>")
        parts.extend(f"<p>{escape(p)}</p>" for p in section.paragraphs)
        parts.append(section.table)
        for alt, png in section.images.items():
            data = base64.b64encode(png).decode("ascii")
            parts.append(f'<figure><img alt="{escape(alt)}" src="data:image/png;base64,{data}">'
                         f"<figcaption>{escape(alt)}</figcaption></figure>")
    parts.append("</body></html>")
    return "\n".join(parts)
