"""Charts, described once and drawn twice: a probe describes its picture as panels (:mod:`.panel`:
data, axes, scales, labels), the report draws them as inline SVG (:mod:`.svg`, ticks from
:mod:`.axes`) and ``probe NAME --plot`` with matplotlib (:mod:`.mpl`); :mod:`.style` is matplotlib's
shared look and the helpers the figure scripts in ``examples/`` draw with.

This package imports neither :mod:`probe.report` nor :mod:`probe.probes`: both import it. Its
commonest names are reachable here (``from probe.chart import pyplot, heatmap``), each module imported
on first use (numpy only; matplotlib when a figure is drawn).
"""
_LAZY = {"Panel": "panel", "GROUP_COLORS": "panel", "fitted_range": "panel",
         "plot_results": "mpl", "figure": "mpl", "draw": "mpl",
         "pyplot": "style", "heatmap": "style", "gamma_color": "style", "seed_band": "style",
         "points_with_ci": "style", "save": "style", "as_text": "style", "STYLE": "style"}
__all__ = list(_LAZY)


def __getattr__(name):   # PEP 562: a figure script's import costs no SVG renderer, a probe's no matplotlib
    if name in _LAZY:
        from importlib import import_module

        return getattr(import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_LAZY))
