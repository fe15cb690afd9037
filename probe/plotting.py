"""The one matplotlib home: the shared style, heat maps, and one figure per result type.

matplotlib is imported inside the functions only, so the CLI starts fast. The figure scripts
in ``examples/`` draw with :func:`pyplot`, :func:`heatmap`, :func:`gamma_color` and
``GROUP_COLORS``; ``probe <probe> --plot`` draws with :func:`plot_results`.

Shared parameters: ``ax`` (matplotlib.axes.Axes) is the panel drawn into; ``color`` the colour of a
panel helper's drawing and ``label`` (str, optional) its legend label, to which the number of seeds is
added. The figure functions write to ``path`` (str, os.PathLike or binary file: see :func:`save`),
titled ``title`` (str), raster formats at ``dpi`` (int, default 150).
"""
from __future__ import annotations

import os
import sys
from typing import Sequence

import numpy as np

from ._files import writable, write_atomic
from ._text import markup_text
from .errors import ProbeError, param
from .report.axes import nice_step

MAX_PANELS = 8
MAX_HEATMAP = 4096
PLOT_EXTS = (".png", ".pdf", ".svg", ".jpg", ".jpeg")
GAMMA_CMAP = "viridis"
SIM_CMAP = "RdBu_r"
GROUP_COLORS = {"memory": "#d62728", "reasoning": "#1f77b4", "keys": "#7f7f7f", "anchors": "#2ca02c",
                "logic": "#1f77b4", "story": "#ff7f0e", "mem": "#d62728", "rsn_train": "#1f77b4",
                "rsn_test": "#17becf"}
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
    >>> from probe.plotting import pyplot
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
        step = 1.0 if top >= 0.5 else float(nice_step(top, 1))
        return -step, step, "RdBu_r"
    step = nice_step((hi - lo) / 4 or abs(hi) or 1.0, 1)
    return float(np.floor(lo / step) * step), float(np.ceil(hi / step) * step), "viridis"


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
    from .analyses.uncertainty import describe

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
    ``probe._files.write_atomic``), or to a binary file object (PNG).

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        The figure; closed afterwards, written or not.
    path : str or os.PathLike or binary file
        Where to write it.

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


def similarity_heatmaps(results: Sequence, path, title: str, dpi: int = 150) -> None:
    """One cosine heat map per similarity result, side by side (at most ``MAX_PANELS``, spread over the steps).

    Parameters
    ----------
    results : sequence of SimilarityResult
        The results to draw, each with its ``matrix`` (k, k).

    Raises
    ------
    ProbeError
        A result without a matrix (more than 4096 tokens).
    """
    if any(r.matrix is None for r in results):
        raise ProbeError(f"too many tokens for a heat map (more than {MAX_HEATMAP}); choose fewer with "
                         f"{param('tokens')}")
    plt = pyplot()
    if len(results) > MAX_PANELS:
        pick = np.unique(np.linspace(0, len(results) - 1, MAX_PANELS).round().astype(int))
        results = [results[i] for i in pick]
    n = len(results)
    fig, axes = plt.subplots(1, n, figsize=(3.6 * n + 0.8, 3.6), squeeze=False, constrained_layout=True)
    im = None
    for ax, r in zip(axes[0], results):
        im = ax.imshow(r.matrix, vmin=-1, vmax=1, cmap="RdBu_r", interpolation="nearest")
        k = len(r.ids)
        stride = max(1, k // 12)
        ticks = np.arange(0, k, stride)
        ax.set_xticks(ticks, [str(r.ids[i]) for i in ticks], fontsize=7, rotation=90)
        ax.set_yticks(ticks, [str(r.ids[i]) for i in ticks], fontsize=7)
        ax.set_title(f"step {r.step}\nmean {r.mean_offdiag:.2f}, ρ(dist) {r.distance_corr:.2f}", fontsize=9)
        ax.set(xlabel="token", ylabel="token")
    fig.colorbar(im, ax=list(axes[0]), shrink=0.85, label="cosine similarity")
    fig.suptitle(title, fontsize=10)
    save(fig, path, dpi)


def trajectory(results: Sequence, path, title: str, dpi: int = 150) -> None:
    """Every summary number of the results against the step, one panel per kind of number.

    Parameters
    ----------
    results : sequence of Result
        One result per step.
    """
    plt = pyplot()
    families: dict[str, list[str]] = {}
    for k in dict.fromkeys(k for r in results for k in r.summary()):
        families.setdefault(k.split("[")[0], []).append(k)
    n = len(families)
    cols = min(3, n)
    rows_n = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows_n, cols, figsize=(4.2 * cols, 3.0 * rows_n), squeeze=False,
                             constrained_layout=True)
    steps = np.array([r.step for r in results], dtype=float)
    for ax, (fam, ks) in zip(axes.flat, families.items()):
        for k in ks[:12]:
            ax.plot(steps, [r.summary().get(k, np.nan) for r in results], marker=".",
                    label=as_text(k[len(fam):].strip("[]") or fam))
        ax.set_title(as_text(fam), fontsize=9)
        ax.set_xlabel("step")
        if steps.max() > 0 and (steps > 0).sum() > 2 and steps[steps > 0].min() * 50 < steps.max():
            ax.set_xscale("symlog", linthresh=max(1.0, steps[steps > 0].min()))
        if len(ks) > 1:
            legend(ax, fontsize=7)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    fig.suptitle(title, fontsize=10)
    save(fig, path, dpi)


def saturation_map(results: Sequence, path, title: str, ax=None, dpi: int = 150):
    """The ε share of each norm site (rows) at each step (columns), as a heat map on a log colour scale.

    Parameters
    ----------
    results : sequence of NormsResult
        One result per step, all with the same sites.
    path : str or os.PathLike or binary file
        Where to write the figure when it draws its own (``ax`` None).
    ax : matplotlib.axes.Axes, optional
        Draw into this panel instead (nothing is written).

    Returns
    -------
    matplotlib.image.AxesImage
        The image (for a colour bar).
    """
    plt = pyplot()
    own = ax is None
    if own:
        fig, ax = plt.subplots(figsize=(1.5 + 0.32 * len(results), 1.2 + 0.3 * len(results[0].sites)),
                               constrained_layout=True)
    from matplotlib.colors import LogNorm

    # log colours: the shares that matter span orders of magnitude (1e-8 at large init, 0.1 saturated)
    M = np.clip(np.array([r.eps_share for r in results]).T, 1e-4, 1.0)
    im = heatmap(ax, M, [str(r.step) for r in results], [as_text(s) for s in results[0].sites], vmin=None, vmax=None, cmap="magma",
                 norm=LogNorm(1e-4, 1.0))
    ax.set_xlabel("step")
    if own:
        fig.colorbar(im, ax=ax, label=f"ε share (ε = {results[0].eps:g}; below 1e-4 shown as 1e-4)")
        fig.suptitle(title, fontsize=10)
        save(fig, path, dpi)
    return im


# --- a probe's figure (its own, from its declaration: probe.registry.Probe) -------------------------


def plot_results(name: str, results: Sequence, path, title: str, dpi: int = 150) -> None:
    """Draw the figure of probe ``name`` for its results, to a file (``probe NAME --plot``).

    One step: the probe's own figure (its ``figure``); several: its ``figures`` (similarity: a heat map
    per step, at most ``MAX_PANELS``; norms: the ε share of each site and step), else the trajectory of
    every summary number against the step. Text from files (the title's file name, group and tensor names) is drawn as
    written (:func:`as_text`): no ``$...$`` mathtext, undecodable bytes as ``\\xNN``.

    Parameters
    ----------
    name : str
        The probe (``"similarity"``, ``"rank"``, ...).
    results : sequence of Result
        What the probe returned, one result per step.
    path : str or os.PathLike or binary file
        A file name (format from its extension: .png, .pdf, .svg, .jpg), or a binary file object (PNG).

    Raises
    ------
    ProbeError
        The file cannot be written; too many tokens for a similarity heat map.

    Examples
    --------
    >>> import probe
    >>> from probe.plotting import plot_results
    >>> plot_results("pca", probe.pca("run.h5"), "pca.png", "run.h5: PCA")
    """
    from . import registry

    probe, plt, title = registry.get(name), pyplot(), as_text(title)
    if len(results) == 1 and probe.figure is not None:
        fig = probe.figure(plt, results[0])
        fig.suptitle(f"{title}, step {results[0].step}", fontsize=10)
        save(fig, path, dpi)
    elif probe.figures is not None:
        probe.figures(results, path, title, dpi=dpi)
    else:
        trajectory(results, path, title, dpi)


