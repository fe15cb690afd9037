"""The ``--plot`` renderer: panels (:class:`~.panel.Panel`) drawn with matplotlib, and a probe's figure
of its results (:func:`plot_results`).

It draws the description the report's SVG (:mod:`.svg`) draws: a probe's ``chart`` of one step, its
``charts`` of several, else the trajectory of its summary numbers (:func:`.panel.trajectory`). Every
text of a panel (names from a file: groups, tensors, the file's name in the title) is drawn as written
(:func:`.style.as_text`). matplotlib is imported when a figure is drawn.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .panel import Panel, colour, trajectory
from .style import as_text, heatmap, legend, pyplot, save

TICKS = 12   # about this many labelled rows or columns of a heat map (every k-th)


def plot_results(name: str, results: Sequence, path, title: str, dpi: int = 150) -> None:
    """Draw the figure of probe ``name`` for its results, to a file (``probe NAME --plot``).

    One step: the probe's chart (its ``chart``); several: its chart of them all (its ``charts``:
    similarity a heat map per step, at most ``MAX_PANELS``; norms the ε share of each site and step),
    else the trajectory of every summary number against the step: the panels the report draws.

    Parameters
    ----------
    name : str
        The probe (``"similarity"``, ``"rank"``, ...).
    results : sequence of Result
        What the probe returned, one result per step.
    path : str or os.PathLike or binary file
        A file name (format from its extension: .png, .pdf, .svg, .jpg), or a binary file object (PNG).
    title : str
        The figure's title (one step: ", step N" added), drawn as written.
    dpi : int, default 150
        The resolution of a raster format.

    Raises
    ------
    ProbeError
        The file cannot be written; too many tokens for a similarity heat map.

    Examples
    --------
    >>> import probe
    >>> from probe.chart import plot_results
    >>> plot_results("pca", probe.pca("run.h5"), "pca.png", "run.h5: PCA")
    """
    from .. import registry

    probe = registry.get(name)
    if len(results) == 1 and probe.chart is not None:
        panels, title = probe.chart(results[0]), f"{title}, step {results[0].step}"
    elif len(results) > 1 and probe.charts is not None:
        panels = probe.charts(results)
    else:
        panels = trajectory([r.step for r in results], [r.summary() for r in results])
    save(figure(panels, title), path, dpi)


def figure(panels: list[Panel], title: str = "", cols: int | None = None):
    """The panels as one matplotlib figure, titled ``title`` (drawn as written), ``cols`` panels per row
    (default: up to 3, heat maps up to 4). Heat maps on one colour scale share one colour bar.

    Returns
    -------
    matplotlib.figure.Figure
        The figure (write it with :func:`.style.save`).
    """
    plt = pyplot()
    heat = [p for p in panels if p.kind == "heat"]
    n = max(1, len(panels))
    cols = max(1, min(n, cols or (4 if heat and len(heat) == len(panels) else 3)))
    rows = (n + cols - 1) // cols
    sizes = [_size(p) for p in panels] or [(4.4, 3.3)]
    fig, axes = plt.subplots(rows, cols, figsize=(max(w for w, _ in sizes) * cols, max(h for _, h in sizes) * rows),
                             squeeze=False, constrained_layout=True)
    axs = list(axes.flat)
    drawn = [draw(ax, p) for ax, p in zip(axs, panels)]
    for ax in axs[len(panels):]:
        ax.axis("off")
    if len(heat) > 1 and len({(p.vmin, p.vmax, p.cmap, p.cscale, p.clabel) for p in heat}) == 1:
        fig.colorbar(next(im for im in drawn if im is not None), ax=[ax for ax, im in zip(axs, drawn) if im is not None],
                     shrink=0.85, label=as_text(heat[0].clabel))
    else:
        for ax, p, im in zip(axs, panels, drawn):
            if im is not None:
                fig.colorbar(im, ax=ax, shrink=0.85, label=as_text(p.clabel))
    if title:
        fig.suptitle(as_text(title), fontsize=10)
    return fig


def draw(ax, p: Panel):
    """Draw panel ``p`` into ``ax`` (matplotlib.axes.Axes); returns a heat map's image (for a colour
    bar), else None."""
    ax.set_title(as_text(p.title), fontsize=9)
    ax.set_xlabel(as_text(p.xlabel))
    ax.set_ylabel(as_text(p.ylabel))
    if p.kind == "heat":
        return _heat(ax, p)
    labels = p.labels()
    {"line": _lines, "scatter": _scatter, "bar": _bars, "barh": _bars}[p.kind](ax, p, labels)
    for ref, across in ((p.hline, True), (p.vline, False)):   # the reference lines, named in the legend
        if ref is not None:
            (ax.axhline if across else ax.axvline)(ref[0], color="grey", ls=":", label=as_text(f"{ref[1]}: {ref[0]:.4g}"))
    if p.kind != "bar":
        _scale(ax, "x", p.xscale, p.xlim, [x for lab in labels for x in _xs(p, lab)])
    if p.kind != "barh":
        _scale(ax, "y", p.yscale, p.ylim, [])
    if len(labels) > 1 or p.hline is not None or p.vline is not None:
        legend(ax, fontsize=7)
    return None


def _size(p: Panel) -> tuple[float, float]:
    """A panel's size in inches: a heat map square, bars beside names a row per name."""
    if p.kind == "heat":
        return 3.9, 3.6
    if p.kind == "barh":
        return 5.6, max(2.8, 0.9 + 0.22 * len(p.categories))
    return 4.4, 3.3


def _keeps(v, scale: str) -> bool:
    """Whether ``v`` can be drawn on an axis of ``scale`` (the SVG's rule: finite, positive on a log axis)."""
    return v is not None and bool(np.isfinite(v)) and (scale != "log" or v > 0)


def _xs(p: Panel, lab) -> list:
    return list(p.series[lab]) if p.kind == "barh" else list(p.series[lab][0])


def _scale(ax, axis: str, kind: str, lim, values) -> None:
    """The axis's scale (log; symlog with its linear part up to the first positive value; [0, 1]; whole
    numbers), reaching ``lim`` where given."""
    from matplotlib.ticker import MaxNLocator

    if kind == "log":
        getattr(ax, f"set_{axis}scale")("log")
    elif kind == "symlog":
        pos = [float(v) for v in values if _keeps(v, "log")]
        getattr(ax, f"set_{axis}scale")("symlog", linthresh=max(1.0, min(pos, default=1.0)))
    elif kind == "unit":
        getattr(ax, f"set_{axis}lim")(0.0, 1.0)
    elif kind == "int":
        getattr(ax, f"{axis}axis").set_major_locator(MaxNLocator(integer=True))
    if lim is not None and kind != "unit":
        lo, hi = getattr(ax, f"get_{axis}lim")()
        ends = [float(v) for v in lim if _keeps(v, kind)]
        getattr(ax, f"set_{axis}lim")(min([lo, *ends]), max([hi, *ends]))


def _lines(ax, p: Panel, labels) -> None:
    for i, lab in enumerate(labels):
        pts = [(x, y) for x, y in zip(*p.series[lab]) if _keeps(x, p.xscale) and _keeps(y, p.yscale)]
        if pts:
            xs, ys = zip(*pts)
            ax.plot(xs, ys, marker="o", ms=3, color=colour(lab, i), label=as_text(lab))


def _scatter(ax, p: Panel, labels) -> None:
    """Points per series, each named beside it (a token's text or id)."""
    for i, lab in enumerate(labels):
        xs, ys = p.series[lab]
        ax.scatter(xs, ys, s=18, color=colour(lab, i), label=as_text(lab))
        for name, x, y in zip(p.names.get(lab) or [], xs, ys):
            if _keeps(x, "linear") and _keeps(y, "linear"):
                ax.annotate(as_text(name), (x, y), fontsize=5, alpha=0.7)


def _bars(ax, p: Panel, labels) -> None:
    """Bars side by side over the categories ("bar"), or beside them, the first at the top ("barh")."""
    flat, at = p.kind == "barh", np.arange(len(p.categories))
    width = 0.8 / max(1, len(labels))
    for i, lab in enumerate(labels):
        vals = [float(v) if v is not None else np.nan for v in p.series[lab]]
        (ax.barh if flat else ax.bar)(at - 0.4 + (i + 0.5) * width, vals, width, color=colour(lab, i),
                                      label=as_text(lab))
    names = [as_text(c) for c in p.categories]
    size = 7 if len(names) > 16 else 8
    if flat:
        ax.set_yticks(at, names, fontsize=size)
        ax.invert_yaxis()
    else:
        ax.set_xticks(at, names, fontsize=size, rotation=90 if max(map(len, names), default=0) > 4 else 0)
    ax.grid(axis="y" if flat else "x", visible=False)


def _heat(ax, p: Panel):
    from matplotlib.colors import LogNorm

    m = np.asarray(p.matrix, dtype=float)
    scale = {"norm": LogNorm(p.vmin, p.vmax), "vmin": None, "vmax": None} if p.cscale == "log" else \
        {"vmin": p.vmin, "vmax": p.vmax}
    # square cells for a square matrix (a token against a token); else the panel filled (sites x steps)
    im = heatmap(ax, m, cmap=p.cmap, aspect="equal" if m.shape[0] == m.shape[1] else "auto", **scale)
    for axis, names in (("x", p.cols), ("y", p.rows)):
        ticks = np.arange(0, len(names), max(1, len(names) // TICKS))
        labels = [as_text(names[i]) for i in ticks]
        turn = {"rotation": 90} if axis == "x" and max(map(len, labels), default=0) > 3 else {}
        getattr(ax, f"set_{axis}ticks")(ticks, labels, fontsize=7, **turn)
    return im
