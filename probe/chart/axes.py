"""Axis scales and tick values for the report's charts: pure functions on numbers, no drawing.

Ticks are what a reader expects: linear axes step by 1, 2 or 5 times a power of ten and span the
data with a tick at each end; log axes tick at decades (with 2 and 5 between them when the data
spans less than two decades); a step axis over log-spaced snapshots is ``log10(1 + step)`` with
ticks at 0, 10, 100, ... Labels are as short as the step allows (0.25, not 0.2500; 3000, not
3e+03), so no "-0.00999" or "8.26" ever reaches an axis.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

CHAR_EM = 0.62      # mean advance of a DejaVu Sans digit or letter, in em (the browser's sans-serif here)


def text_width(text: str, size: float) -> float:
    """An upper estimate of ``text``'s width in px at font ``size`` (DejaVu Sans: digits 0.64 em)."""
    wide = sum(1 for c in text if c in "mwMW@%")
    return size * (CHAR_EM * len(text) + 0.35 * wide) + 1


def nice_step(span: float, n: int) -> float:
    """The 1-2-5 step that cuts ``span`` into about ``n`` parts."""
    raw = span / max(1, n)
    mag = 10 ** math.floor(math.log10(raw))
    return next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw * 0.999)


def fmt(v: float, step: float | None = None) -> str:
    """A tick label: as many decimals as ``step`` needs; thousands as 10k from 10 000 up."""
    if v == 0:
        return "0"
    if step is not None and step >= 1000 and abs(v) >= 10_000 and v % 1000 == 0:
        return f"{v / 1000:g}k"
    if step is not None and step > 0:
        d = max(0, -math.floor(math.log10(step) + 1e-9))
        s = f"{v:.{d}f}"
        s = s.rstrip("0").rstrip(".") if "." in s else s
        return "0" if float(s) == 0 else s
    if 1e-3 <= abs(v) < 1e5:
        return f"{v:.4g}"
    return f"{v:.0e}".replace("e-0", "e-").replace("e+0", "e").replace("e+", "e")


@dataclass
class Scale:
    """Data to pixels along one axis: ``kind`` is linear, log, symlog (log10(1 + x), x >= 0) or band
    (categories at 0, 1, ...); ``lo``/``hi`` the domain in data units; ``ticks`` (value, label)."""

    kind: str
    lo: float
    hi: float
    ticks: list = field(default_factory=list)

    def unit(self, v: float) -> float:
        """Where ``v`` falls in the domain, 0 at ``lo`` and 1 at ``hi``."""
        a, b = self._f(self.lo), self._f(self.hi)
        return (self._f(v) - a) / (b - a) if b != a else 0.5

    def _f(self, v: float) -> float:
        if self.kind == "log":
            return math.log10(v)
        if self.kind == "symlog":
            return math.log10(1 + max(v, 0.0))
        return float(v)

    def keeps(self, v) -> bool:
        """Whether ``v`` can be drawn on this axis (finite, and positive on a log axis)."""
        return v is not None and np.isfinite(v) and (self.kind != "log" or v > 0)


def linear(lo: float, hi: float, n: int = 5, integer: bool = False, fixed: bool = False) -> Scale:
    """A linear axis over [lo, hi] widened to whole steps (``fixed``: exactly [lo, hi])."""
    if hi == lo:
        lo, hi = (lo - 1, hi + 1) if lo == 0 or integer else (lo - abs(lo) * 0.5, hi + abs(hi) * 0.5)
    step = nice_step(hi - lo, n)
    if integer:
        step = max(1.0, round(step))
    a, b = (lo, hi) if fixed else (math.floor(lo / step + 1e-9) * step, math.ceil(hi / step - 1e-9) * step)
    first = math.ceil(a / step - 1e-9) * step
    vals = [first + i * step for i in range(int(round((b - first) / step)) + 1)]
    return Scale("linear", a, b, [(v, fmt(v, step)) for v in vals if a - 1e-9 * step <= v <= b + 1e-9 * step])


def log(lo: float, hi: float) -> Scale:
    """A log axis over positive [lo, hi]: decades, with 2 and 5 between them when few decades show."""
    lo, hi = (lo / 2, hi * 2) if hi <= lo else (lo, hi)
    a, b = math.log10(lo), math.log10(hi)
    pad = 0.04 * (b - a)
    lo, hi = 10 ** (a - pad), 10 ** (b + pad)
    decades = range(math.floor(a - pad), math.ceil(b + pad) + 1)
    for mults in ((1,), (1, 2, 5), (1, 2, 3, 5, 7)):
        vals = [m * 10.0 ** k for k in decades for m in mults if lo <= m * 10.0 ** k <= hi]
        if len(vals) >= 3 or (len(vals) >= 2 and mults == (1,) and hi / lo > 100):
            return Scale("log", lo, hi, [(v, fmt(v)) for v in vals])
    inner = linear(lo, hi, 3, fixed=True)   # less than a factor of ~3: plain steps on the log axis
    return Scale("log", lo, hi, [(v, s) for v, s in inner.ticks if v > 0])


def symlog(hi: float) -> Scale:
    """A step axis ``log10(1 + x)`` over [0, hi]: 0 and the decades up to ``hi``."""
    hi = max(hi, 1.0)
    vals = [0.0] + [10.0 ** k for k in range(1, int(math.floor(math.log10(hi))) + 1)]
    return Scale("symlog", 0.0, hi, [(v, fmt(v, v or 1)) for v in vals])


def band(labels: list) -> Scale:
    """Categories at 0 .. n-1 (the domain reaches half a slot past each end)."""
    return Scale("band", -0.5, len(labels) - 0.5, [(i, str(s)) for i, s in enumerate(labels)])


def steps_are_logspaced(xs) -> bool:
    """Whether step values sit log-spaced from the start (the trainer's early snapshots): a linear axis
    would squeeze them into its first few pixels."""
    xs = np.asarray([x for x in xs if x is not None and np.isfinite(x)], dtype=float)
    pos = xs[xs > 0]
    return bool(len(xs) and xs.min() >= 0 and len(pos) > 2 and pos.min() * 50 < pos.max())


def thin(positions: list[float], widths: list[float], gap: float = 6.0) -> list[int]:
    """Indices of the ticks to keep so that no two labels overlap: ``positions`` the label centres along
    the axis (px, increasing), ``widths`` their extents along it; every k-th, the first always."""
    n = len(positions)
    for stride in range(1, max(n, 2)):
        keep = list(range(0, n, stride))
        if all(positions[j] - positions[i] >= (widths[i] + widths[j]) / 2 + gap for i, j in zip(keep, keep[1:])):
            return keep
    return [0]
