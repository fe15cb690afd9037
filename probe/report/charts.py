"""What the report draws, as inline SVG: the headline curves, a probe's trajectory over training, and
one figure per stored snapshot for the probes whose result has a picture of its own.

A probe's chart of one step is its own (:class:`probe.registry.Probe`'s ``chart``: the panels its
``--plot`` file draws too, here drawn as inline SVG in milliseconds rather than matplotlib's ~1 s, so
the step slider can reach every snapshot); the trajectory is :func:`probe.chart.panel.trajectory`, the
``--plot`` file's of several steps. A probe whose numbers need the model run (ood, tokens, norms,
sinks) or a whole run (rank minima) is drawn at the few steps of its table only (a ``cheap`` probe at
every snapshot).
"""
from __future__ import annotations

from ..chart import panel
from ..chart.panel import Panel
from ..chart.svg import to_svg

CURVE_LABELS = {"loss": "loss", "acc": "accuracy"}
PAGE_PX = 1350   # the width the page's run columns share (a 1400 px window less margins); a chart wider than
                 # its column would be shrunk, and its text with it: charts put fewer panels in a row instead


def _cols(n_panels: int, width: int, runs: int, most: int = 3) -> int:
    return max(1, min(n_panels, most, (PAGE_PX // max(1, runs) - 24) // width))


def curves(curve_steps: list[int], curves_: dict, xlim=None, ylims: dict | None = None, runs: int = 1) -> str | None:
    """Loss (log y) and accuracy ([0, 1]) per split against the step, one panel each."""
    kinds = [k for k in ("loss", "acc") if any(k in ms for ms in curves_.values())]
    if not kinds:
        return None
    xscale, xlabel = panel.step_axis(curve_steps if xlim is None else list(curve_steps) + list(xlim))
    panels = []
    for kind in kinds:
        series = {split: (curve_steps[:len(ms[kind])], [float(v) for v in ms[kind]])
                  for split, ms in curves_.items() if kind in ms}
        panels.append(Panel(CURVE_LABELS[kind], xlabel, CURVE_LABELS[kind], series=series,
                            xscale=xscale, yscale="log" if kind == "loss" else "unit", xlim=xlim,
                            ylim=(ylims or {}).get(kind)))
    return to_svg(panels, cols=_cols(len(panels), 320, runs, 2), width=320)


def trajectory(steps: list[int], summaries: list[dict], xlim=None, ylims: dict | None = None,
               runs: int = 1) -> str | None:
    """Every summary number of a probe against the step (:func:`probe.chart.panel.trajectory`), or None
    below two steps."""
    panels = panel.trajectory(steps, summaries, xlim, ylims)
    if not panels or len(steps) < 2:
        return None
    return to_svg(panels, cols=_cols(len(panels), 310, runs), width=310, height=220)


def step_figure(probe, result, runs: int = 1) -> str | None:
    """The chart of one step of ``probe`` (a :class:`probe.registry.Probe`) as inline SVG, or None where it
    has none."""
    if probe.chart is None:
        return None
    ps = probe.chart(result)
    if any(p.kind == "barh" for p in ps):   # a row per name
        n = max(len(p.categories) for p in ps)
        width = 560
        return to_svg(ps, cols=_cols(len(ps), width, runs, 2), width=width, height=max(220, 80 + 16 * n))
    width = 320 if len(ps) > 1 else 380
    return to_svg(ps, cols=_cols(len(ps), width, runs), width=width, height=300)
