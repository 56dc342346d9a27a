"""What every perfkit figure is built on: a pyplot-free ``Figure`` with an Agg canvas, trace
names as literal text, the figures that only say something ("no GPU: <reason>") and PNG bytes
for HTML reports."""
from __future__ import annotations

from typing import Any

from ...results import format_number

_LABEL_CHARS = 48


def new_figure(width: float = 8.0, height: float = 4.0):
    """A pyplot-free Figure with an Agg canvas attached (savefig works in any backend)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=90)
    FigureCanvasAgg(fig)
    return fig


def label(text: Any, limit: int = _LABEL_CHARS) -> str:
    """A trace-supplied name as plain matplotlib text: ``$`` escaped, long names shortened."""
    s = str(text)
    s = s if len(s) <= limit else s[: limit - 1] + "\u2026"
    return s.replace("$", r"\$")


def plain_ticks(axis, fmt=None) -> None:
    """Major tick labels of ``axis`` as plain text (``fmt(value)``, default ``format_number``:
    "1,000", "0.01") and no minor labels. A log axis otherwise labels its ticks as mathtext powers
    ("10^3"), which reads as an exponent and needs fonts a slim install lacks (matplotlib then logs a
    "findfont" line per glyph into the report)."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    fmt = fmt or format_number
    axis.set_major_formatter(FuncFormatter(lambda v, _: fmt(v)))
    axis.set_minor_formatter(NullFormatter())


def message_figure(title: str, message: str):
    """A figure that only says something ("no GPU: ...", "no steps in this trace")."""
    fig = new_figure(6.0, 1.6)
    ax = fig.add_subplot()
    ax.set_axis_off()
    ax.set_title(label(title, 120))
    ax.text(0.5, 0.5, label(message, 200), ha="center", va="center", wrap=True, transform=ax.transAxes)
    return fig


def no_gpu_figure(reason: str, title: str = "GPU figure"):
    """The figure GPU-only plots return without a GPU: the text "no GPU: <reason>"."""
    return message_figure(title, f"no GPU: {reason}")


def figure_png(fig) -> bytes:
    """The figure as PNG bytes (for HTML pages: the reports index embeds them as data URIs)."""
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()
