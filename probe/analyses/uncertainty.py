"""A science claim is a distribution: per grid cell, the spread of a number over seeds (mean, std,
95 % bootstrap interval) and the fraction of seeds with a binary outcome (Wilson interval)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .base import Result


def bootstrap_ci(values, level: float = 0.95, n_boot: int = 10_000, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``values`` (NaN, NaN for fewer than 2 values)."""
    x = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=np.float64)
    if x.size < 2:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, x.size, size=(n_boot, x.size))].mean(axis=1)
    a = (1 - level) / 2
    return float(np.quantile(means, a)), float(np.quantile(means, 1 - a))


def wilson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a proportion k / n (NaN, NaN for n = 0)."""
    if n == 0:
        return float("nan"), float("nan")
    from scipy.stats import norm

    z = float(norm.ppf(1 - (1 - level) / 2))
    p = k / n
    den = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, centre - half), min(1.0, centre + half)


def describe(values, level: float = 0.95, seed: int = 0) -> dict:
    """n, mean, std (n - 1), and the bootstrap interval of the mean of the finite values."""
    x = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=np.float64)
    lo, hi = bootstrap_ci(x, level, seed=seed)
    return {"n": int(x.size), "mean": float(x.mean()) if x.size else float("nan"),
            "std": float(x.std(ddof=1)) if x.size > 1 else float("nan"), "ci_lo": lo, "ci_hi": hi}


def proportion(outcomes, level: float = 0.95) -> dict:
    """k of n true outcomes (None ones are left out), the fraction and its Wilson interval."""
    xs = [bool(o) for o in outcomes if o is not None]
    k, n = sum(xs), len(xs)
    lo, hi = wilson(k, n, level)
    return {"k": k, "n": n, "fraction": k / n if n else float("nan"), "ci_lo": lo, "ci_hi": hi}


def verdict(ci_lo: float, ci_hi: float, threshold: float) -> str:
    """'above' / 'below' when the interval clears ``threshold``, else 'not shown'."""
    if not (math.isfinite(ci_lo) and math.isfinite(ci_hi)):
        return "not shown"
    return "above" if ci_lo > threshold else "below" if ci_hi < threshold else "not shown"


@dataclass
class CellSummary(Result):
    """One grid cell of a sweep, over its seeds.

    Returned by [`probe.sweep_summary`][probe.api.sweep_summary]. ``step`` is the step of the runs' numbers
    (``None`` when they differ). Besides the attributes below, every result has ``step`` and ``warnings``
    ([`Result`][probe.analyses.base.Result]).

    Attributes
    ----------
    cell : dict
        ``{field: value}`` of the cell: the grid point without its seed fields.
    runs : list of str
        The run files that entered (finished at the step asked for).
    stats : dict of str to dict
        ``{metric: {"n", "mean", "std", "ci_lo", "ci_hi"}}``: the 95 % percentile-bootstrap interval of
        the mean.
    outcomes : dict of str to dict
        ``{outcome: {"k", "n", "fraction", "ci_lo", "ci_hi"}}``: the Wilson 95 % interval of the
        fraction.
    """

    cell: dict = field(default_factory=dict)
    runs: list[str] = field(default_factory=list)
    stats: dict[str, dict] = field(default_factory=dict)
    outcomes: dict[str, dict] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.cell.items()) or "all"

    def summary(self) -> dict[str, float]:
        out = {f"{m}:{k}": s[k] for m, s in self.stats.items() for k in ("mean", "ci_lo", "ci_hi")}
        out.update({f"P({o}):{k}": s[k] for o, s in self.outcomes.items() for k in ("fraction", "ci_lo", "ci_hi")})
        return out

    def rows(self) -> list[tuple[str, str, float]]:
        """(metric:stat, cell, value), e.g. ('acc[rsn_test]:mean', 'gamma=0.8', 0.93)."""
        rows = [(f"{m}:{k}", self.label, v) for m, s in self.stats.items() for k, v in s.items()]
        rows += [(f"P({o}):{k}", self.label, v) for o, s in self.outcomes.items() for k, v in s.items()]
        return rows

    def to_dict(self) -> dict:
        d = super().to_dict()
        d["cell_label"] = self.label
        return d

    def said(self) -> list[str]:
        """Each metric as ``mean [low, high]`` and each outcome as ``k/n [low, high]``, with its name."""
        return ([f"{m} {s['mean']:.4g} [{s['ci_lo']:.4g}, {s['ci_hi']:.4g}]" for m, s in self.stats.items()]
                + [f"{o} {s['k']}/{s['n']} [{s['ci_lo']:.2f}, {s['ci_hi']:.2f}]" for o, s in self.outcomes.items()])

    def __repr__(self) -> str:
        """The cell, its seeds and step, and every number with its interval, e.g.
        ``CellSummary(gamma=0.8: 5 runs at step 3000; acc[rsn_test] 0.5789 [0.56, 0.598]; acc[rsn_test]>0.5 5/5
        [0.57, 1.00])``."""
        at = f" at step {self.step}" if self.step is not None else ""
        return f"CellSummary({self.label}: {len(self.runs)} runs{at}; {'; '.join(self.said())})"

    def _repr_html_(self) -> str:
        import html

        rows = "".join(f"<tr><td>{html.escape(line)}</td></tr>" for line in self.said())
        at = f", step {self.step}" if self.step is not None else ""
        return f"<b>CellSummary</b> {html.escape(self.label)}: {len(self.runs)} runs{at}<table>{rows}</table>"


def crossing(xs, samples, level: float = 0.95, n_boot: int = 2000, seed: int = 0) -> dict:
    """Where the mean of ``samples`` (one list of per-seed values per x, xs increasing) first changes
    sign, by linear interpolation between neighbouring x; its interval from resampling the seeds
    within each x. ``found`` is the fraction of resamples with a crossing at all."""
    xs = np.asarray(xs, dtype=float)
    vals = [np.asarray([v for v in s if math.isfinite(v)], dtype=float) for s in samples]

    def first_cross(means):   # a strict sign change: a mean of exactly 0 (e.g. no solution at all) is none
        for i in range(len(means) - 1):
            a, b = means[i], means[i + 1]
            if a * b < 0:
                return xs[i] + (xs[i + 1] - xs[i]) * a / (a - b)
        return float("nan")

    point = first_cross([v.mean() if v.size else float("nan") for v in vals])
    rng = np.random.default_rng(seed)
    boots = np.array([first_cross([rng.choice(v, v.size).mean() if v.size else float("nan") for v in vals])
                      for _ in range(n_boot)])
    ok = boots[np.isfinite(boots)]
    a = (1 - level) / 2
    lo, hi = (float(np.quantile(ok, a)), float(np.quantile(ok, 1 - a))) if ok.size else (float("nan"),) * 2
    return {"x": float(point), "ci_lo": lo, "ci_hi": hi, "found": float(ok.size / n_boot)}


def argmin_x(xs, samples, level: float = 0.95, n_boot: int = 2000, seed: int = 0) -> dict:
    """The x whose mean of ``samples`` (one list of per-seed values per x) is smallest, with an interval
    from resampling the seeds within each x, and ``share``: the fraction of resamples that pick the same x."""
    xs = np.asarray(xs, dtype=float)
    vals = [np.asarray([v for v in s if math.isfinite(v)], dtype=float) for s in samples]
    means = np.array([v.mean() if v.size else np.inf for v in vals])
    point = float(xs[int(np.argmin(means))])
    rng = np.random.default_rng(seed)
    picks = np.array([xs[int(np.argmin([rng.choice(v, v.size).mean() if v.size else np.inf for v in vals]))]
                      for _ in range(n_boot)])
    a = (1 - level) / 2
    return {"x": point, "ci_lo": float(np.quantile(picks, a)), "ci_hi": float(np.quantile(picks, 1 - a)),
            "share": float(np.mean(picks == point))}
