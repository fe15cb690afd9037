"""How far the weights move from their initial values, and what that says about the regime.

The phase diagram of two-layer networks at infinite width (Luo, Xu, Ma, Zhang, JMLR 22(71), 2021)
sorts training by how the relative change of the weights from their initial values,

    RD(t) = ||theta_t - theta_0||_F / ||theta_0||_F,

scales with the width m as m grows: RD -> 0 is the **linear** regime (the network stays near its
initialization, kernel-like), RD -> infinity the **condensed** one (the weights move far from where
they started and gather in a few directions), RD = O(1) the **critical** line between them. At finite
widths that is the sign of the log-log slope of RD against the width: below zero linear, about zero
critical, above zero condensed.

The effective gamma of a weight matrix drawn with std = fan_in^-gamma is
gamma_eff = -ln std / ln fan_in (the toolkit's gamma-init is exactly that rule, so at step 0 it gives
back the gamma a run was drawn with; a library's fixed std, 0.02, is gamma 0.59 at d 768 and 0.51 at
d 2048).

Names are the toolkit's canonical ones, in the x @ W layout (rows = inputs): the fan-in of a matrix is
its number of rows once per-head tensors are joined into the full map, and an embedding table's is its
width (d_model), as gamma-init draws it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .base import Result
from .uncertainty import bootstrap_ci

# the groups paper 2's follow-up and the issue's regimes are read by: canonical name -> group
MATRIX_GROUPS = ("embeddings", "attention QK", "attention VO", "MLP in", "MLP out", "head")
_SUFFIX = {"W_Q": "attention QK", "W_K": "attention QK", "W_V": "attention VO", "W_O": "attention VO",
           "W_in": "MLP in", "W_gate": "MLP in", "W_out": "MLP out"}
EMBEDDINGS = ("token_embedding", "position_embedding")
TOLERANCE = 0.1   # |slope| below this (the whole interval) is the critical line: m^0.1 over 32 -> 256 is x1.23


def group_of(name: str) -> str | None:
    """The group of a canonical weight name (``layer1/W_V`` -> ``attention VO``); None for one in none
    (a norm's weight, a gate of the attention output)."""
    if name in EMBEDDINGS:
        return "embeddings"
    if name == "unembedding":
        return "head"
    return _SUFFIX.get(name.rsplit("/", 1)[-1])


def fan_in(name: str, W: np.ndarray) -> int:
    """The fan-in gamma-init draws ``W`` (a full map, x @ W) with: its rows; an embedding's width."""
    return int(W.shape[-1] if name in EMBEDDINGS else W.shape[0])




@dataclass
class RegimeResult(Result):
    """The relative change from the initial weights of each matrix and group at one step.

    Returned by [`probe.regime`][probe.probes.regime.regime]. Besides the attributes below, every result has
    ``step`` and ``warnings`` ([`Result`][probe.analyses.base.Result]).

    Attributes
    ----------
    names : list of str
        The weight matrices, in natural order.
    rd : dict of str to float
        Per matrix, RD = ||W_t - W_0||_F / ||W_0||_F.
    groups : dict of str to float
        Per group present (embeddings, attention QK, attention VO, MLP in, MLP out, head), the same of
        the group's matrices taken together.
    """

    names: list[str] = field(default_factory=list)
    rd: dict[str, float] = field(default_factory=dict)
    groups: dict[str, float] = field(default_factory=dict)

    def summary(self) -> dict[str, float]:
        return {**{f"rd_group[{g}]": v for g, v in self.groups.items()},
                **{f"rd[{n}]": self.rd[n] for n in self.names}}


def regime(initial: dict[str, np.ndarray], current: dict[str, np.ndarray], step: int | None = None) -> RegimeResult:
    """RD per matrix and per group: ``initial`` and ``current`` map the same canonical names to arrays of
    the same shape (the weights at step 0 and at ``step``)."""
    rd, num, den = {}, {}, {}
    for name, W0 in initial.items():
        W0 = np.asarray(W0, dtype=np.float64)
        diff = float(np.sum((np.asarray(current[name], dtype=np.float64) - W0) ** 2))
        base = float(np.sum(W0 ** 2))
        rd[name] = math.sqrt(diff / base) if base > 0 else float("nan")
        g = group_of(name)
        if g is not None:
            num[g], den[g] = num.get(g, 0.0) + diff, den.get(g, 0.0) + base
    groups = {g: math.sqrt(num[g] / den[g]) if den[g] > 0 else float("nan") for g in MATRIX_GROUPS if g in num}
    warnings = [f"{n} is all zero at the first step: its relative change is undefined" for n, v in rd.items()
                if not math.isfinite(v)]
    return RegimeResult(step=step, names=list(initial), rd=rd, groups=groups, warnings=warnings)


def slope(widths, values) -> float:
    """The least-squares slope of ln(values) against ln(widths) (NaN with fewer than 2 finite points)."""
    x, y = np.asarray(widths, dtype=np.float64), np.asarray(values, dtype=np.float64)
    ok = np.isfinite(y) & (y > 0) & (x > 0)
    if ok.sum() < 2 or len(set(x[ok])) < 2:
        return float("nan")
    return float(np.polyfit(np.log(x[ok]), np.log(y[ok]), 1)[0])


def seed_slope(per_seed) -> dict:
    """The log-log slope against the width over seeds: ``per_seed`` holds one ``{width: value}`` per seed.
    Returns ``{"mean", "ci_lo", "ci_hi", "n", "per_seed"}``: each seed's :func:`slope` (those of two finite
    points or more), their mean and its 95 % percentile-bootstrap interval (NaN with fewer than 2 seeds)."""
    slopes = [slope(list(by_width), list(by_width.values())) for by_width in per_seed]
    slopes = [v for v in slopes if math.isfinite(v)]
    lo, hi = bootstrap_ci(slopes)
    return {"mean": float(np.mean(slopes)) if slopes else float("nan"), "ci_lo": lo, "ci_hi": hi,
            "n": len(slopes), "per_seed": slopes}


def regime_of(lo: float, hi: float, tolerance: float = TOLERANCE) -> str:
    """The JMLR regime an interval of the slope shows: ``linear`` (all of it below -tolerance),
    ``condensed`` (above +tolerance), ``critical`` (within +-tolerance), else ``not shown``."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return "not shown"
    if hi < -tolerance:
        return "linear"
    if lo > tolerance:
        return "condensed"
    if -tolerance <= lo and hi <= tolerance:
        return "critical"
    return "not shown"


@dataclass
class WidthSlope(Result):
    """The log-log slope of RD against the width at one step, over seeds.

    Returned by [`probe.regime_widths`][probe.probes.regime_widths.regime_widths]. Besides the attributes below,
    every result has ``step`` and ``warnings`` ([`Result`][probe.analyses.base.Result]).

    Attributes
    ----------
    widths : list of int
        The widths (d_model) of the runs, increasing.
    seeds : list
        The seeds with a run at two widths or more: one slope each.
    slopes : dict of str to dict
        Per group: ``{"mean", "ci_lo", "ci_hi", "n", "per_seed": [slope, ...], "regime"}``, the 95 %
        percentile-bootstrap interval of the mean slope over seeds (NaN with one seed: its regime is
        then ``not shown``).
    tolerance : float
        The half-width around zero of the critical line.
    """

    widths: list[int] = field(default_factory=list)
    seeds: list = field(default_factory=list)
    slopes: dict[str, dict] = field(default_factory=dict)
    tolerance: float = TOLERANCE

    def summary(self) -> dict[str, float]:
        return {f"slope_{k}[{g}]": s[k] for g, s in self.slopes.items() for k in ("mean", "ci_lo", "ci_hi")}


def width_slopes(widths, rd, step: int | None = None, tolerance: float = TOLERANCE) -> WidthSlope:
    """``widths``: the width of each run; ``rd``: per seed, per group, RD of each run of that seed
    (``{seed: {group: {width: rd}}}``). One slope per seed and group, then their mean and interval."""
    slopes = {}
    groups = [g for g in MATRIX_GROUPS if any(g in by_group for by_group in rd.values())]
    for g in groups:
        slopes[g] = seed_slope([rd[s][g] for s in rd if g in rd[s]])
        slopes[g]["regime"] = regime_of(slopes[g]["ci_lo"], slopes[g]["ci_hi"], tolerance)
    warnings = [] if len(rd) > 1 else ["one seed: a slope with no interval, its regime not shown"]
    return WidthSlope(step=step, widths=sorted(set(widths)), seeds=list(rd), slopes=slopes, tolerance=tolerance,
                      warnings=warnings)


@dataclass
class GammaResult(Result):
    """The effective gamma of every weight matrix at one step.

    Returned by [`probe.gamma`][probe.probes.gamma.gamma]. Besides the attributes below, every result has
    ``step`` and ``warnings`` ([`Result`][probe.analyses.base.Result]).

    Attributes
    ----------
    names : list of str
        The weight matrices, in natural order.
    numbers : dict of str to dict of str to float
        Per matrix: ``std`` (of its entries), ``fan_in`` and ``gamma`` = -ln std / ln fan_in.
    groups : dict of str to dict of str to float
        Per group present: ``std`` (pooled over its matrices), ``fan_in`` (None where its matrices'
        differ) and ``gamma``, the entry-weighted mean of its matrices' gammas.
    """

    names: list[str] = field(default_factory=list)
    numbers: dict[str, dict[str, float]] = field(default_factory=dict)
    groups: dict[str, dict[str, float]] = field(default_factory=dict)

    def summary(self) -> dict[str, float]:
        return {**{f"gamma_group[{g}]": v["gamma"] for g, v in self.groups.items()},
                **{f"gamma[{n}]": self.numbers[n]["gamma"] for n in self.names}}


def effective_gamma(matrices: dict[str, np.ndarray], step: int | None = None) -> GammaResult:
    """``matrices``: canonical name -> full map (x @ W; an embedding (vocab, d)). Per matrix and group:
    std, fan-in and gamma_eff = -ln std / ln fan_in."""
    numbers, pooled = {}, {}
    for name, W in matrices.items():
        W = np.asarray(W, dtype=np.float64)
        std, n_in = float(W.std()), fan_in(name, W)
        gamma = -math.log(std) / math.log(n_in) if std > 0 and n_in > 1 else float("nan")
        numbers[name] = {"std": std, "fan_in": n_in, "gamma": gamma}
        g = group_of(name)
        if g is not None:
            pooled.setdefault(g, []).append((W.size, std, n_in, gamma))
    groups = {}
    for g in MATRIX_GROUPS:
        if g not in pooled:
            continue
        sizes = np.array([p[0] for p in pooled[g]], dtype=np.float64)
        stds, fans, gammas = (np.array([p[k] for p in pooled[g]], dtype=np.float64) for k in (1, 2, 3))
        groups[g] = {"std": float(np.sqrt(np.sum(sizes * stds ** 2) / sizes.sum())),
                     "fan_in": int(fans[0]) if len(set(fans)) == 1 else None,
                     "gamma": float(np.sum(sizes * gammas) / sizes.sum())}
    warnings = [f"{n} is constant: no gamma" for n, v in numbers.items() if not math.isfinite(v["gamma"])]
    return GammaResult(step=step, names=list(matrices), numbers=numbers, groups=groups, warnings=warnings)
