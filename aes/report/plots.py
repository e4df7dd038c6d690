"""Plots for ``report.html`` that read right with one point and with thousands.

- one point: a marker with its value written beside it, an x axis with that one integer tick,
  and a y axis from zero (or the metric's natural range, e.g. [0, 1] for a rate) to a little above
  the value — never an axis like 0.96-1.04 around a single value;
- a few points: markers joined by lines, values written when there are at most a dozen;
- many points: lines only (and a moving average when the series is noisy and long).

A plot with no data is not drawn: the caller writes a sentence instead (:func:`series_or_none`).
"""

from __future__ import annotations

import base64
import io
import math
from typing import Callable, Sequence

Series = tuple[str, list[float], list[float]]
"""(label, xs, ys)."""

ANNOTATE_MAX = 12
MARKERS_MAX = 60


def figure(draw: Callable, size: tuple[float, float] = (5.6, 3.2)) -> str:
    """A PNG (base64) of what ``draw(ax)`` draws; ``draw`` may return a note to print in the middle."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=size, dpi=100)
    try:
        empty = draw(ax)
        if empty:
            ax.text(0.5, 0.5, empty, ha="center", va="center", transform=ax.transAxes, color="gray")
        ax.spines[["top", "right"]].set_visible(False)
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
    finally:
        plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def points(rows: Sequence[dict], x: str, y: str) -> tuple[list[float], list[float]]:
    """(xs, ys) of the rows holding finite numbers for both keys."""
    xs, ys = [], []
    for r in rows:
        a, b = r.get(x), r.get(y)
        if _finite(a) and _finite(b):
            xs.append(float(a))
            ys.append(float(b))
    return xs, ys


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _fmt(v: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    if abs(v) >= 0.01:
        return f"{v:.3g}"
    return f"{v:.2g}"


def line_plot(series: list[Series], xlabel: str, ylabel: str, ylim: tuple[float, float] | None = None,
              percent: bool = False) -> Callable:
    """A draw function for :func:`figure`: one line per series, readable at any length."""

    def draw(ax) -> str | None:
        from matplotlib.ticker import MaxNLocator, PercentFormatter

        drawn = [(label, xs, ys) for label, xs, ys in series if xs]
        if not drawn:
            return "no data"
        all_x = [x for _, xs, _ in drawn for x in xs]
        all_y = [y for _, _, ys in drawn for y in ys]
        for label, xs, ys in drawn:
            n = len(xs)
            style = {"marker": "o", "markersize": 6 if n <= ANNOTATE_MAX else 3.5} if n <= MARKERS_MAX else {}
            (line,) = ax.plot(xs, ys, label=label, linewidth=1.6 if n <= MARKERS_MAX else 1.1, **style)
            if n > 200 and len(set(ys)) > 1:  # a long noisy series: its trend on top
                w = max(5, n // 50)
                avg = [sum(ys[max(0, i - w + 1):i + 1]) / len(ys[max(0, i - w + 1):i + 1]) for i in range(n)]
                ax.plot(xs, avg, color=line.get_color(), linewidth=2.2, alpha=0.9, label=f"{label} ({w}-pt mean)")
                line.set_alpha(0.35)
            if n <= ANNOTATE_MAX:
                for x, y in zip(xs, ys):
                    text = f"{y:.0%}" if percent else _fmt(y)
                    ax.annotate(text, (x, y), textcoords="offset points", xytext=(0, 7), ha="center", fontsize=8,
                                color=line.get_color())
        # x: integer ticks (rounds, updates); a single x gets a window around it, not 0.96-1.04
        ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=8))
        lo_x, hi_x = min(all_x), max(all_x)
        if lo_x == hi_x:
            ax.set_xlim(lo_x - 1, hi_x + 1)
            ax.set_xticks([lo_x])
        else:
            pad = (hi_x - lo_x) * 0.04
            ax.set_xlim(lo_x - pad, hi_x + pad)
        # y: the metric's natural range, else from zero to a bit above the largest value
        if ylim is not None:
            lo, hi = ylim
            lo, hi = min(lo, min(all_y)), max(hi, max(all_y))
            span = hi - lo
            ax.set_ylim(lo - 0.04 * span, hi + 0.1 * span)
        else:
            lo, hi = min(0.0, min(all_y)), max(0.0, max(all_y))
            if hi == lo:
                hi = lo + 1.0
            span = hi - lo
            ax.set_ylim(lo - (0.05 * span if lo < 0 else 0), hi + 0.15 * span)
        if percent:
            ax.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(axis="y", alpha=0.3)
        if len(drawn) > 1 or any(len(xs) > 200 for _, xs, _ in drawn):
            ax.legend(fontsize=8, frameon=False)
        return None

    return draw


def histogram(values: list[float], xlabel: str, ylabel: str, value_range: tuple[float, float] = (0.0, 0.5),
              bins: int = 10) -> Callable:
    def draw(ax) -> str | None:
        from matplotlib.ticker import MaxNLocator

        if not values:
            return "no data"
        lo, hi = value_range
        hi = max(hi, max(values))
        counts, edges, _ = ax.hist(values, bins=bins, range=(lo, hi), color="#4c72b0", edgecolor="white")
        if len(values) <= 60:
            for c, a, b in zip(counts, edges[:-1], edges[1:]):
                if c:
                    ax.annotate(f"{int(c)}", ((a + b) / 2, c), textcoords="offset points", xytext=(0, 3),
                                ha="center", fontsize=8)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylim(0, max(counts) * 1.2 + 0.5)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        return None

    return draw


def bar_plot(labels: list[str], values: list[float], ylabel: str) -> Callable:
    def draw(ax) -> str | None:
        from matplotlib.ticker import MaxNLocator

        if not values:
            return "no data"
        bars = ax.bar(range(len(values)), values, color="#4c72b0")
        ax.set_xticks(range(len(values)), labels, fontsize=8, rotation=20 if len(labels) > 4 else 0)
        for bar, v in zip(bars, values):
            ax.annotate(_fmt(v), (bar.get_x() + bar.get_width() / 2, v), textcoords="offset points", xytext=(0, 3),
                        ha="center", fontsize=8)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylim(0, max(values) * 1.2 + 0.5)
        ax.set_ylabel(ylabel)
        return None

    return draw
