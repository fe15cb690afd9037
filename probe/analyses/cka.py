"""Linear centered kernel alignment (CKA) of two representations of the same tokens.

Kornblith, Norouzi, Lee and Hinton, "Similarity of Neural Network Representations Revisited", ICML 2019
(arXiv:1905.00414), eq. 6: with X (n, p) and Y (n, q) the rows of the same n tokens in two models, each
column centred,

    CKA(X, Y) = ||Yᵀ X||²_F / (||Xᵀ X||_F ||Yᵀ Y||_F)

1 when Y is an orthogonal transform and rescaling of X (two runs that learned the same geometry in other
coordinates), near 0 for unrelated representations. It is invariant to rotations and isotropic scaling,
not to arbitrary invertible maps, so it compares the token geometry rather than the basis.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .base import Result


@dataclass
class CKAResult(Result):
    """Linear CKA of the same tokens' vectors in two models (or two steps of one run).

    Returned by [`probe.cka`][probe.probes.cka.cka]. Besides the attributes below, every result has ``step``
    (run A's) and ``warnings`` ([`Result`][probe.analyses.base.Result]).

    Attributes
    ----------
    step_b : int or None
        Run B's step.
    cka : float
        Linear CKA in [0, 1]; NaN when either representation is constant over the tokens.
    n : int
        Tokens compared (rows of both X and Y).
    dims : tuple of int
        (p, q): the vector lengths of A and B.
    ids : ndarray of int, shape (n,)
        The tokens' ids in run A.
    """

    step_b: int | None = None
    cka: float = float("nan")
    n: int = 0
    dims: tuple = (0, 0)
    ids: np.ndarray | None = None

    def summary(self) -> dict[str, float]:
        return {"cka": self.cka, "n": self.n}


def linear_cka(X: np.ndarray, Y: np.ndarray, *, step=None, step_b=None, ids=None) -> CKAResult:
    """Linear CKA of X (n, p) and Y (n, q), rows the same n tokens.

    Computed in the smaller of the two spaces: with n <= p + q through the n x n Gram matrices
    (HSIC form, ⟨K, L⟩_F / (||K||_F ||L||_F) with K = X Xᵀ, L = Y Yᵀ), else through the p x q cross
    covariance; both are exact, in float64.
    """
    X = np.asarray(X, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.float64)
    if X.ndim != 2 or Y.ndim != 2 or len(X) != len(Y):
        raise ValueError(f"linear_cka needs (n, p) and (n, q) arrays of the same n, got {X.shape} and {Y.shape}")
    X = X - X.mean(axis=0)
    Y = Y - Y.mean(axis=0)
    if len(X) <= X.shape[1] + Y.shape[1]:
        K, L = X @ X.T, Y @ Y.T
        num, den = float(np.vdot(K, L)), float(np.linalg.norm(K) * np.linalg.norm(L))
    else:
        num = float(np.linalg.norm(Y.T @ X) ** 2)
        den = float(np.linalg.norm(X.T @ X) * np.linalg.norm(Y.T @ Y))
    res = CKAResult(step=step, step_b=step_b, cka=num / den if den > 0 else float("nan"), n=len(X),
                    dims=(X.shape[1], Y.shape[1]), ids=None if ids is None else np.asarray(ids))
    if not den > 0:
        res.warnings.append("a representation is the same vector for every token (zero after centring): CKA is "
                            "undefined")
    return res
