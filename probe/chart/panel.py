"""What a chart shows, said once: :class:`Panel` (data, axes, scales, labels, colours, reference lines)
and the descriptions every probe shares, with no drawing at all.

A probe's ``chart(result)`` and ``charts(results)`` return a list of panels; :mod:`.svg` draws them
as the report's inline SVG and :mod:`.mpl` as the ``--plot`` file, so the two show the same numbers
from the same description. The trajectory (every summary number against the step) is described here
for both too. Pure functions on numbers: numpy only.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import axes as A

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#17becf", "#8c564b", "#e377c2", "#7f7f7f")
GROUP_COLORS = {"memory": "#d62728", "reasoning": "#1f77b4", "keys": "#7f7f7f", "anchors": "#2ca02c",
                "logic": "#1f77b4", "story": "#ff7f0e", "mem": "#d62728", "rsn_train": "#1f77b4",
                "rsn_test": "#17becf"}
MAX_SERIES = 8       # series drawn per panel (the legend's column holds no more)
MAX_PANELS = 8       # panels of several steps' chart at most (spread over the steps: :func:`spread`)


@dataclass
class Panel:
    """One chart panel.

    ``kind``: "line" (``series`` label -> (xs, ys)), "scatter" (label -> (xs, ys), ``names`` per
    label: the text of each point, hover title in SVG, label beside it in matplotlib), "bar" (label ->
    ys over ``categories``), "barh" (label -> values over ``categories``, the first at the top: long
    names read on the left) or "heat" (``matrix`` (m, n) with ``rows``/``cols`` labels, colours from
    ``cmap`` over [vmin, vmax], on a linear or "log" ``cscale``; ``clabel`` names the colour bar of the
    matplotlib figure: the SVG's shows its range only). ``xscale``/``yscale``: linear, log, symlog,
    unit ([0, 1]) or int (linear, whole-number ticks). At most :data:`MAX_SERIES` series are drawn.
    """

    title: str
    xlabel: str
    ylabel: str
    kind: str = "line"
    series: dict = field(default_factory=dict)
    xscale: str = "linear"
    yscale: str = "linear"
    xlim: tuple | None = None
    ylim: tuple | None = None
    categories: list = field(default_factory=list)
    names: dict = field(default_factory=dict)
    matrix: np.ndarray | None = None
    rows: list = field(default_factory=list)
    cols: list = field(default_factory=list)
    vmin: float = -1.0
    vmax: float = 1.0
    cmap: str = "RdBu_r"
    cscale: str = "linear"
    clabel: str = ""
    hline: tuple | None = None   # (y, label): a dashed reference line across
    vline: tuple | None = None   # (x, label): one up and down

    def labels(self) -> list:
        """The series drawn, in order (the first :data:`MAX_SERIES`)."""
        return list(self.series)[:MAX_SERIES]


def colour(label: str, i: int) -> str:
    """The colour of series ``label``, the ``i``-th of its panel: a token group's or split's own, the
    same in every chart and figure; else the palette's ``i``-th."""
    return GROUP_COLORS.get(label, PALETTE[i % len(PALETTE)])


def extent(values, scale: str = "linear", lim=None) -> tuple | None:
    """(lowest, highest) of the finite ``values`` and ``lim`` (positive only on a log ``scale``); None: none."""
    vals = [float(v) for v in [*values, *(lim or ())] if v is not None and np.isfinite(v) and (scale != "log" or v > 0)]
    return (min(vals), max(vals)) if vals else None


def fitted_range(matrix: np.ndarray) -> tuple[float, float, str]:
    """A colour range and map fitted to a matrix's off-diagonal values (the diagonal of a cosine matrix
    is 1 and would wash out the rest): values of both signs get a diverging map symmetric about 0 (±1
    once they reach 0.5); values of one sign a sequential map between 1-2-5 bounds around them."""
    m = np.asarray(matrix, dtype=float)
    off = m[~np.eye(*m.shape, dtype=bool)] if m.ndim == 2 and m.shape[0] == m.shape[1] and m.shape[0] > 1 else m
    off = off[np.isfinite(off)]
    if not off.size:
        return -1.0, 1.0, "RdBu_r"
    lo, hi = float(off.min()), float(off.max())
    top = max(abs(lo), abs(hi))
    if lo < -0.05 * top and hi > 0.05 * top:
        step = 1.0 if top >= 0.5 else float(A.nice_step(top, 1))
        return -step, step, "RdBu_r"
    step = A.nice_step((hi - lo) / 4 or abs(hi) or 1.0, 1)
    return float(np.floor(lo / step) * step), float(np.ceil(hi / step) * step), "viridis"


def spread(items: list, most: int = MAX_PANELS) -> list:
    """At most ``most`` of ``items``, evenly spread from the first to the last."""
    if len(items) <= most:
        return list(items)
    return [items[i] for i in np.unique(np.linspace(0, len(items) - 1, most).round().astype(int))]


# --- the helpers the probes describe their charts with ---------------------------------------------

def id_labels(ids) -> list[str]:
    return [str(int(i)) for i in ids]


def indexed(values) -> tuple:
    v = np.asarray(values, dtype=float)
    return list(range(1, len(v) + 1)), list(v)


def plain_number(v):
    return float(v) if isinstance(v, (int, float, np.floating, np.integer)) and not isinstance(v, bool) else None


def barh(title, xlabel, ylabel, names, series, xscale="linear", vline=None) -> Panel:
    return Panel(title, xlabel, ylabel, kind="barh", categories=[str(n) for n in names],
                 series={k: [plain_number(v) for v in vs] for k, vs in series.items()}, xscale=xscale, vline=vline)


# --- the trajectory: every summary number against the step ----------------------------------------

def family(key: str) -> str:
    """The kind of a summary number: ``by_distance`` for ``by_distance[3]`` (one panel, one scale)."""
    return key.split("[")[0]


def step_axis(steps) -> tuple[str, str]:
    """The step axis's scale and label: symlog for log-spaced snapshots (the early steps get room), else linear."""
    return ("symlog", "step (log scale)") if A.steps_are_logspaced(steps) else ("linear", "step")


def trajectory(steps: list[int], summaries: list[dict], xlim=None, ylims: dict | None = None) -> list[Panel]:
    """Every summary number of a probe against the step: one panel per family (``mean``,
    ``by_distance[…]``; at most 9, of 8 numbers each), on the axes ``xlim`` / ``ylims[family]`` where
    given (the report's runs side by side share them).

    Parameters
    ----------
    steps : list of int
        The steps, one per summary.
    summaries : list of dict
        Each step's ``Result.summary()``.

    Returns
    -------
    list of Panel
        One line panel per family; empty where the summaries hold no number.
    """
    families: dict[str, list[str]] = {}
    for k in dict.fromkeys(k for s in summaries for k in s):
        families.setdefault(family(k), []).append(k)
    xscale, xlabel = step_axis(list(steps) + list(xlim or ()))
    return [Panel(fam, xlabel, fam, series={k[len(fam):].strip("[]") or fam: (list(steps), [plain_number(s.get(k))
                                                                                          for s in summaries])
                                            for k in ks[:MAX_SERIES]},
                  xscale=xscale, xlim=xlim, ylim=(ylims or {}).get(fam))
            for fam, ks in list(families.items())[:9]]


__all__ = ["Panel", "GROUP_COLORS", "colour", "extent", "fitted_range", "spread", "trajectory"]
