"""How alike the token vectors of each group are, and how apart the groups lie (pure numpy).

Paper 1 (Fig. 4A, 7) reads it off cosine matrices: at small initialisation the memory anchors are
uniformly similar, and the embeddings of the logic (PrOntoQA) tokens are far more alike than those
of the story tokens. This gives those numbers for every group at once, from per-group sums of unit
vectors: O(k d) time and memory, never the k x k matrix, so a whole vocabulary split into groups
costs no more than reading it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .stats import unit_rows, zero_rows
from .base import Result, jsonable


@dataclass
class CohesionResult(Result):
    """Mean cosine similarity within each token group and between each pair of groups.

    Returned by [`probe.cohesion`][probe.probes.cohesion.cohesion]. Besides the attributes below, every result has
    ``step`` and ``warnings`` ([`Result`][probe.analyses.base.Result]).

    Attributes
    ----------
    groups : list of str, length g
        The group names, in the order of ``matrix``.
    sizes : list of int, length g
        Tokens per group.
    matrix : ndarray of float, shape (g, g)
        Mean cos(v_a, v_b) over a in group i, b in group j, a != b; on the diagonal the group's cohesion
        (NaN for a group of one token). A zero vector has cosine 0 with every vector (a warning names
        it).
    separation : float
        Mean within-group cosine minus mean between-group cosine, each over the pairs of tokens (NaN with
        fewer than two groups); large: the groups are apart and each is tight.
    """

    groups: list[str] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    matrix: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    separation: float = float("nan")

    def summary(self) -> dict[str, float]:
        out = {f"within[{g}]": float(self.matrix[i, i]) for i, g in enumerate(self.groups)}
        out.update({f"between[{a}|{b}]": float(self.matrix[i, j]) for i, a in enumerate(self.groups)
                    for j, b in enumerate(self.groups) if j > i})
        out["separation"] = self.separation
        return out

    def to_dict(self) -> dict:
        return {"step": self.step, "groups": list(self.groups), "sizes": [int(n) for n in self.sizes],
                "matrix": jsonable(self.matrix), "separation": jsonable(self.separation),
                "warnings": list(self.warnings)}


def cohesion(X: np.ndarray, labels: list[str], step: int | None = None, ids: np.ndarray | None = None
             ) -> CohesionResult:
    """Group cohesion of the rows of ``X`` (k, d); ``labels`` (k,) names the group of each row, in
    order of first appearance. ``ids`` (k,) names the rows in warnings (default: their index)."""
    X = np.asarray(X)
    if X.ndim != 2 or X.shape[0] != len(labels):
        raise ValueError(f"cohesion: X {X.shape} needs one row per label ({len(labels)})")
    groups = list(dict.fromkeys(labels))
    lab = np.asarray([groups.index(g) for g in labels], dtype=np.int64)
    u, _ = unit_rows(X)
    sums = np.zeros((len(groups), X.shape[1]))
    np.add.at(sums, lab, u)                                        # (g, d): sum of unit vectors per group
    sizes = np.bincount(lab, minlength=len(groups)).astype(np.float64)
    selfdot = np.bincount(lab, weights=(u * u).sum(axis=1), minlength=len(groups))   # 1 per nonzero row
    dots = sums @ sums.T                                           # (g, g): sums of cos over all pairs
    pairs = np.outer(sizes, sizes)
    within = dots.diagonal() - selfdot                             # without each token's cos with itself
    within_pairs = sizes * (sizes - 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        matrix = np.clip(dots / pairs, -1.0, 1.0)
        np.fill_diagonal(matrix, np.clip(within / within_pairs, -1.0, 1.0))
        off = ~np.eye(len(groups), dtype=bool)
        between = dots[off].sum() / pairs[off].sum() if len(groups) > 1 else float("nan")
        inside = within.sum() / within_pairs.sum() if within_pairs.sum() > 0 else float("nan")
    res = CohesionResult(step=step, groups=groups, sizes=[int(n) for n in sizes], matrix=matrix,
                         separation=float(inside - between))
    zero = zero_rows(X)
    if zero.size:
        names = ids[zero] if ids is not None else zero
        res.warnings.append(f"{zero.size} zero vector(s) (cosine 0 with every vector): token(s) "
                            f"{', '.join(str(int(i)) for i in names[:10])}")
    return res
