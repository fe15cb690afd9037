"""Figures. matplotlib is imported here only, so the CLI starts fast."""
from __future__ import annotations

import os
from typing import Sequence

import numpy as np

from .errors import ProbeError

MAX_PANELS = 8


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def check_writable(path: str) -> None:
    """Fail before any work if the figure cannot be written."""
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise ProbeError(f"cannot write plot {path}: directory {parent} does not exist")
    ext = os.path.splitext(path)[1].lower()
    if ext not in (".png", ".pdf", ".svg", ".jpg", ".jpeg"):
        raise ProbeError(f"cannot write plot {path}: use a .png, .pdf, .svg or .jpg name")


def similarity_heatmaps(results: Sequence, path: str, title: str) -> None:
    """One cosine heat map per result (at most MAX_PANELS, spread over the steps)."""
    plt = _pyplot()
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
        ax.set_xlabel("token")
    axes[0][0].set_ylabel("token")
    fig.colorbar(im, ax=list(axes[0]), shrink=0.85, label="cosine similarity")
    fig.suptitle(title, fontsize=10)
    fig.savefig(path, dpi=150)
    plt.close(fig)
