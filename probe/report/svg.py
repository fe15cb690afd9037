"""Inline SVG charts: the curves of a run (loss, accuracy, a probe's trajectory) as small panels."""
from __future__ import annotations

import numpy as np

from .html import _render


_PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#17becf", "#8c564b", "#e377c2", "#7f7f7f")


def svg_panels(panels: list, xlabel: str, log: set = frozenset(), unit: set = frozenset(), width: int = 300,
               height: int = 190, cols: int = 3) -> str:
    """Line charts as one SVG: ``panels`` is [(title, {label: (xs, ys)})]; a panel named in ``log``
    has a log y axis, one in ``unit`` the range [0, 1]. Drawn without matplotlib: a rebuild of a live
    page costs milliseconds per chart, and the text stays sharp at any zoom."""
    from ..plotting import GROUP_COLORS

    cols = max(1, min(cols, len(panels)))
    rows = (len(panels) + cols - 1) // cols
    ml, mr, mt, mb = 46, 8, 18, 30
    out = []
    for n, (title, series) in enumerate(panels):
        ox, oy = (n % cols) * width, (n // cols) * height
        pw, ph = width - ml - mr, height - mt - mb
        pts = [(float(x), float(y)) for xs, ys in series.values() for x, y in zip(xs, ys)
               if y is not None and np.isfinite(y) and (title not in log or y > 0)]
        panel = {"title": title, "cx": ox + width / 2, "top": oy + 12, "middle": oy + height / 2, "empty": not pts}
        out.append(panel)
        if not pts:
            continue
        fy = np.log10 if title in log else (lambda v: v)
        x0, x1 = min(p[0] for p in pts), max(p[0] for p in pts)
        ys = [fy(p[1]) for p in pts]
        y0, y1 = (0.0, 1.0) if title in unit else (min(ys), max(ys))
        if x1 == x0:
            x0, x1 = x0 - 1, x1 + 1
        if y1 == y0:
            y0, y1 = y0 - 0.5, y1 + 0.5

        def X(x):
            return ox + ml + (x - x0) / (x1 - x0) * pw

        def Y(y):
            return oy + mt + ph - (fy(y) - y0) / (y1 - y0) * ph

        panel["box"] = {"x": ox + ml, "y": oy + mt, "w": pw, "h": ph}
        panel["yticks"] = []
        for t in np.linspace(y0, y1, 4):
            yy = oy + mt + ph - (t - y0) / (y1 - y0) * ph
            panel["yticks"].append({"x2": ox + ml + pw, "y": f"{yy:.1f}", "lx": ox + ml - 3, "ly": f"{yy + 3:.1f}",
                                    "label": f"{10 ** t:.3g}" if title in log else f"{t:.3g}"})
        panel["xticks"] = [{"x": f"{X(t):.1f}", "y": oy + mt + ph + 12, "label": f"{t:.4g}"}
                           for t in np.linspace(x0, x1, 4)]
        panel["xlabel"] = {"x": ox + ml + pw / 2, "y": oy + height - 4, "text": xlabel}
        panel["lines"] = []
        for i, (label, (xs, ys_)) in enumerate(series.items()):
            line = [(X(float(x)), Y(float(y))) for x, y in zip(xs, ys_)
                    if y is not None and np.isfinite(y) and (title not in log or y > 0)]
            if not line:
                continue
            panel["lines"].append({
                "color": GROUP_COLORS.get(label, _PALETTE[i % len(_PALETTE)]), "label": label,
                "points": " ".join(f"{a:.1f},{b:.1f}" for a, b in line),
                "dots": [(f"{a:.1f}", f"{b:.1f}") for a, b in line] if len(line) <= 12 else [],
                "lx": ox + ml + pw - 2, "ly": oy + mt + 10 + 11 * i})
    return _render("panels.svg.j2", width=cols * width, height=rows * height, panels=out)
