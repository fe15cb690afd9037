"""Rank over training (paper 4's "condense, then expand"): how many directions each weight matrix
and the token-embedding cloud use, and the step where each trajectory bottoms out.

For a matrix M with singular values σ: the effective rank is exp(entropy of σ / Σσ) (Roy and
Vetterli; 1 = one direction), the stable rank Σσ² / σ₁², and the top-k energy Σ_{i<=k} σ² / Σσ².
The embedding enters as its rows centred on their mean (so its σ² are the covariance
eigenvalues times k - 1, and its top-k energy is the top-k share of the variance).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .stats import exp_entropy, named
from .base import Result, jsonable
from .condense import stable_rank
from .spectrum import eigenvalues

TOP_K = (1, 5)


def singular_values(M: np.ndarray) -> np.ndarray:
    """σ of a 2-D matrix, descending, through the smaller Gram matrix in float64 (no SVD of M)."""
    return np.sqrt(eigenvalues(M)[::-1])


def rank_numbers(sv: np.ndarray, top_k: tuple[int, ...] = TOP_K) -> dict[str, float]:
    """effective_rank, stable_rank and top{k}_energy of a spectrum σ."""
    energy = sv ** 2
    total = energy.sum()
    out = {"effective_rank": exp_entropy(sv), "stable_rank": stable_rank(energy)}
    for k in top_k:
        out[f"top{k}_energy"] = float(energy[:k].sum() / total) if total > 0 else float("nan")
    return out


@dataclass
class RankResult(Result):
    """Effective rank, stable rank and top-k energy of each matrix at one step.

    Returned by [`probe.rank`][probe.probes.rank.rank]. Besides the attributes below, every result has ``step`` and
    ``warnings`` ([`Result`][probe.analyses.base.Result]).

    Attributes
    ----------
    names : list of str
        The matrices: ``embedding`` (the centred token embedding) first, then every weight matrix.
    numbers : dict of str to dict of str to float
        Per matrix: ``effective_rank``, ``stable_rank``, ``top1_energy`` and ``top5_energy``.
    singular_values : dict of str to ndarray
        Per matrix, its singular values σ, descending: shape (min(m, n),) for an m x n matrix.
    """

    names: list[str] = field(default_factory=list)
    numbers: dict[str, dict[str, float]] = field(default_factory=dict)
    singular_values: dict[str, np.ndarray] = field(default_factory=dict)

    def summary(self) -> dict[str, float]:
        return {f"{metric}[{name}]": v for name in self.names for metric, v in self.numbers[name].items()}


def matrix_ranks(matrices: dict[str, np.ndarray], embedding: np.ndarray | None = None,
                 top_k: tuple[int, ...] = TOP_K, step: int | None = None) -> RankResult:
    """matrices name -> 2-D weight (per-head tensors already joined into the full map); embedding
    (vocab, d) rows, taken centred as ``embedding``."""
    mats = dict(matrices)
    if embedding is not None:
        E = np.asarray(embedding, dtype=np.float64)
        mats = {"embedding": E - E.mean(axis=0), **mats}
    svs = {n: named(n, singular_values, M) for n, M in mats.items()}
    warnings = [f"{n} is all zero" for n, sv in svs.items() if not sv.size or sv[0] == 0]
    return RankResult(step=step, names=list(mats), numbers={n: rank_numbers(sv, top_k) for n, sv in svs.items()},
                      singular_values=svs, warnings=warnings)


@dataclass
class RankTrajectoryResult(Result):
    """Per matrix, where its rank bottoms out over the selected steps.

    Returned by [`probe.rank_trajectory`][probe.probes.rank_trajectory.rank_trajectory]. One result for the whole trajectory:
    its ``step`` is ``None``. Besides the attributes below, every result has ``step`` and ``warnings``
    ([`Result`][probe.analyses.base.Result]).

    Attributes
    ----------
    metric : str
        The number followed (``effective_rank`` by default).
    margin : float
        How far the dip and the rebound must go for
        [`condense_then_expand`][probe.analyses.rank.RankTrajectoryResult.condense_then_expand].
    names : list of str
        The matrices present at every step.
    initial : dict of str to float
        Per matrix, the metric at the first step.
    minimum : dict of str to float
        Its smallest value.
    final : dict of str to float
        The metric at the last step.
    min_step : dict of str to int
        The step of the minimum.
    steps : list of int
        The steps of the trajectory.
    """

    metric: str = "effective_rank"
    margin: float = 0.05
    names: list[str] = field(default_factory=list)
    initial: dict[str, float] = field(default_factory=dict)
    minimum: dict[str, float] = field(default_factory=dict)
    final: dict[str, float] = field(default_factory=dict)
    min_step: dict[str, int] = field(default_factory=dict)
    steps: list[int] = field(default_factory=list)

    def dip(self, name: str) -> float:
        return self.minimum[name] / self.initial[name] if self.initial[name] > 0 else float("nan")

    def rebound(self, name: str) -> float:
        return self.final[name] / self.minimum[name] if self.minimum[name] > 0 else float("nan")

    def condense_then_expand(self, name: str) -> bool:
        inside = self.steps[0] < self.min_step[name] < self.steps[-1]
        return bool(inside and self.dip(name) <= 1 - self.margin and self.rebound(name) >= 1 + self.margin)

    def summary(self) -> dict[str, float | int]:
        out = {}
        for n in self.names:   # a step and a yes/no stay integers (0/1): tables print 30, not 30.0000
            out[f"min_step[{n}]"] = int(self.min_step[n])
            out[f"minimum[{n}]"] = self.minimum[n]
            out[f"dip[{n}]"] = self.dip(n)
            out[f"rebound[{n}]"] = self.rebound(n)
            out[f"condense_then_expand[{n}]"] = int(self.condense_then_expand(n))
        return out

    def to_dict(self) -> dict:
        d = super().to_dict()
        d["per_matrix"] = {n: {"dip": self.dip(n), "rebound": self.rebound(n),
                               "condense_then_expand": self.condense_then_expand(n)} for n in self.names}
        return jsonable(d)


def rank_trajectory(results: list[RankResult], metric: str = "effective_rank", margin: float = 0.05
                    ) -> RankTrajectoryResult:
    """The minimum of each matrix's ``metric`` over ``results`` (one per step, in step order)."""
    steps = [int(r.step) for r in results]
    names = [n for n in results[0].names if all(n in r.numbers for r in results)]
    warnings = [] if len(results) >= 3 else ["fewer than 3 steps: no trajectory to bottom out"]
    out = RankTrajectoryResult(step=None, metric=metric, margin=margin, names=names, steps=steps, warnings=warnings)
    for n in names:
        ys = np.array([r.numbers[n][metric] for r in results], dtype=np.float64)
        i = int(np.nanargmin(ys)) if np.isfinite(ys).any() else 0
        out.initial[n], out.minimum[n], out.final[n] = float(ys[0]), float(ys[i]), float(ys[-1])
        out.min_step[n] = steps[i]
    return out
