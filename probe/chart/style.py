"""matplotlib's side of the chart package: the shared style and the helpers the figure scripts draw with.

matplotlib is imported inside the functions only, so the CLI starts fast. The figure scripts in
``examples/`` draw with :func:`pyplot`, :func:`heatmap`, :func:`gamma_color`, :func:`seed_band`,
:func:`points_with_ci` and :data:`probe.chart.panel.GROUP_COLORS`, and write with :func:`save`;
``probe NAME --plot`` draws a probe's panels with :mod:`.mpl`.

Shared parameters: ``ax`` (matplotlib.axes.Axes) is the panel drawn into; ``color`` the colour of a
panel helper's drawing and ``label`` (str, optional) its legend label, to which the number of seeds is
added.
"""
from __future__ import annotations

import os
import sys

import numpy as np

from ..files import writable, write_atomic
from ..printable import markup_text
from ..errors import ProbeError

PLOT_EXTS = (".png", ".pdf", ".svg", ".jpg", ".jpeg")
GAMMA_CMAP = "viridis"
SIM_CMAP = "RdBu_r"
STYLE = {
    "figure.dpi": 110, "savefig.dpi": 200, "savefig.bbox": "tight",
    "font.size": 9, "axes.titlesize": 10, "axes.labelsize": 9, "legend.fontsize": 8,
    "xtick.labelsize": 8, "ytick.labelsize": 8, "figure.titlesize": 11,
    "axes.spines.top": False, "axes.spines.right": False, "axes.grid": True, "grid.alpha": 0.25,
    "lines.linewidth": 1.6, "image.interpolation": "nearest",
    # text stays text (editable, searchable, and testable: tests read an SVG's <text> for raw TeX)
    "pdf.fonttype": 42, "svg.fonttype": "none",
}


def as_text(label) -> str:
    """A label from a file as matplotlib can draw it, and as written: surrogates and controls (which its
    text layout refuses) spelled ``\\xNN``, and each ``$`` escaped, so a name like ``$\\alpha$`` is not
    read as mathtext. Escaped here, where file text enters a figure, so that the toolkit's own math (a
    log axis's ``10⁻¹``) still renders."""
    return markup_text(str(label)).replace("$", r"\$")


def pyplot():
    """``matplotlib.pyplot`` with the shared style (imported only when a figure is drawn; the Agg backend,
    except in a notebook's kernel, whose inline backend is kept).

    Returns
    -------
    module
        ``matplotlib.pyplot``, its ``rcParams`` updated with ``STYLE``.

    Examples
    --------
    >>> from probe.chart import pyplot
    >>> plt = pyplot()
    >>> fig, ax = plt.subplots()
    """
    import matplotlib

    # Agg: figures are files here, and a command line may have no display. But in a notebook (an
    # IPython kernel) switching to Agg would stop the user's own later plots from showing inline.
    if "ipykernel" not in sys.modules:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update(STYLE)
    return plt


def gamma_color(gamma: float, lo: float = 0.2, hi: float = 1.0):
    """The colour of initialization rate ``gamma``, the same in every figure.

    Parameters
    ----------
    gamma : float
        The γ of a run.
    lo : float, default 0.2
        The γ at the start of the colour map.
    hi : float, default 1.0
        The γ at (90 % of) its end.

    Returns
    -------
    tuple of float
        An RGBA colour.
    """
    import matplotlib

    return matplotlib.colormaps[GAMMA_CMAP](float(np.clip((gamma - lo) / (hi - lo), 0, 1)) * 0.9)


def legend(ax, **kw) -> None:
    """``ax.legend(**kw)`` where the panel has labelled artists; else nothing (matplotlib would warn "No
    artists with labels found" onto the user's terminal: an align figure of a run without token groups)."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(**kw)


def heatmap(ax, matrix, xticks=None, yticks=None, *, vmin=-1.0, vmax=1.0, cmap=SIM_CMAP, xrotation=90, **kw):
    """A matrix panel in the shared look: fixed colour range, labelled ticks, no grid.

    Parameters
    ----------
    matrix : array_like, shape (m, n)
        The values.
    xticks : sequence of str, optional
        Labels of the n columns.
    yticks : sequence of str, optional
        Labels of the m rows.
    vmin : float, default -1.0
        Lower end of the colour range.
    vmax : float, default 1.0
        Upper end of the colour range.
    cmap : str, default "RdBu_r"
        The colour map.
    xrotation : float, default 90
        Rotation of the column labels.
    **kw
        Passed on to ``ax.imshow``.

    Returns
    -------
    matplotlib.image.AxesImage
        The image (for a colour bar).
    """
    im = ax.imshow(matrix, vmin=vmin, vmax=vmax, cmap=cmap, **kw)
    if xticks is not None:
        ax.set_xticks(range(len(xticks)), xticks, rotation=xrotation)
    if yticks is not None:
        ax.set_yticks(range(len(yticks)), yticks)
    ax.grid(False)  # the style's grid would cross the cells
    return im


def seed_band(ax, steps, curves, color, label=None, **kw):
    """The mean of per-seed curves, with a band from the lowest to the highest seed.

    Parameters
    ----------
    steps : array_like, shape (n,)
        The x values.
    curves : array_like, shape (seeds, n)
        One curve per seed; one seed draws the plain line.
    **kw
        Passed on to ``ax.plot``.

    Returns
    -------
    list of matplotlib.lines.Line2D
        The mean line.
    """
    y = np.asarray(curves, dtype=float)
    n = len(y)
    line = ax.plot(steps, y.mean(axis=0), color=color, label=label and (f"{label} ({n} seeds)" if n > 1 else label),
                   **kw)
    if n > 1:
        ax.fill_between(steps, y.min(axis=0), y.max(axis=0), color=color, alpha=0.18, linewidth=0)
    return line


def points_with_ci(ax, xs, per_x, color, label=None, **kw):
    """The mean per x with its 95 % bootstrap interval as an error bar, and every seed as a faint dot.

    Parameters
    ----------
    xs : array_like, shape (n,)
        The x values.
    per_x : sequence of sequence of float
        The per-seed values at each x (n lists).
    **kw
        Passed on to ``ax.errorbar`` (default: markers joined by a line).
    """
    from ..analyses.uncertainty import describe

    stats = [describe(v) for v in per_x]
    mean = np.array([s["mean"] for s in stats])
    lo = np.array([s["ci_lo"] if np.isfinite(s["ci_lo"]) else s["mean"] for s in stats])
    hi = np.array([s["ci_hi"] if np.isfinite(s["ci_hi"]) else s["mean"] for s in stats])
    n = max(len(v) for v in per_x)
    kw = {"marker": "o", "linestyle": "-", **kw}   # a caller's linestyle wins without a fmt clash
    ax.errorbar(xs, mean, yerr=[mean - lo, hi - mean], color=color, capsize=3,
                label=label and (f"{label} ({n} seeds, 95% CI)" if n > 1 else label), **kw)
    for x, v in zip(xs, per_x):
        ax.scatter([x] * len(v), v, s=8, color=color, alpha=0.35, linewidths=0)


def check_writable(path: str) -> None:
    """Fail before any work if the file cannot be written: its folder exists, takes a new file
    (tried with a temporary one, removed at once), and the name has a known extension."""
    writable(path, "plot")
    if os.path.splitext(path)[1].lower() not in PLOT_EXTS:
        raise ProbeError(f"cannot write plot {path}: use a {', '.join(PLOT_EXTS[:-1])} or {PLOT_EXTS[-1]} name")


def save(fig, path, dpi: int = 150) -> None:
    """Write and close ``fig``.

    To a file name atomically (format from its extension; a full disk leaves no partial file:
    ``probe.files.write_atomic``), or to a binary file object (PNG).

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        The figure; closed afterwards, written or not.
    path : str or os.PathLike or binary file
        Where to write it.
    dpi : int, default 150
        The resolution of a raster format.

    Raises
    ------
    ProbeError
        The file cannot be written (the cause in a few words: no space left on device, ...).
    """
    try:
        if hasattr(path, "write"):
            fig.savefig(path, dpi=dpi, format="png")
        else:
            ext = os.path.splitext(os.fspath(path))[1].lower().lstrip(".")
            write_atomic(path, lambda fh: fig.savefig(fh, dpi=dpi, format=ext or None), "plot")
    finally:
        pyplot().close(fig)
