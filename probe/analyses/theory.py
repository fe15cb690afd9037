"""Paper 1's theory of the embedding at small initialization.

Proposition 1: dw(s)/dt = r_s (P^s - 1/d_vob) W2^T W1^T, so token embeddings grow along
P^s - 1/d_vob and their cosine matrix is predicted by cos(P^si - 1/d, P^sj - 1/d).
Theorem 1 / eq. 14 reconstructs embeddings in closed form:
  reasoning anchor s:  w_i = exp(-(i - s)^2 / 12) - 1/d_m + eps
  key s:               w_i = exp(-(i - s)^2 / 12) + eps,      eps ~ N(0, d_m^(-2 gamma)).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .stats import cosine_matrix, pearson
from .base import Result


def label_cosine(P: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """cos(P^si - 1/d_vob, P^sj - 1/d_vob) for the tokens ``ids``; P is (vocab, vocab)."""
    d_vob = P.shape[1]
    return cosine_matrix(P[ids] - 1.0 / d_vob)


def reconstruct(ids: np.ndarray, kinds: list[str], dim: int, d_m: int, gamma: float,
                rng: np.random.Generator | None = None) -> np.ndarray:
    """Eq. 14 embeddings (k, dim) for tokens ``ids`` of kind 'reasoning' or 'key'.

    The paper leaves the index range open: here i runs over 0..dim-1 (default: the
    vocabulary, where the Gaussian bump of P^s lives) and the noise scale uses d_m.
    With ``rng=None`` the noise is left out.
    """
    i = np.arange(dim)[None, :]
    s = np.asarray(ids)[:, None]
    w = np.exp(-((i - s) ** 2) / 12.0)
    w = w - np.where(np.asarray(kinds)[:, None] == "reasoning", 1.0 / d_m, 0.0)
    if rng is not None:
        w = w + rng.normal(0.0, d_m ** (-gamma), size=w.shape)
    return w


@dataclass
class TheoryResult(Result):
    """Measured embedding cosines against the P^s prediction and the eq. 14 reconstruction.

    Returned by [`probe.theory`][probe.probes.theory.theory]. Besides the attributes below, every result has
    ``step`` and ``warnings`` ([`Result`][probe.analyses.base.Result]).

    Attributes
    ----------
    ids : ndarray of int, shape (k,)
        The tokens compared.
    measured : ndarray of float, shape (k, k)
        Cosine matrix of their embeddings.
    predicted : ndarray of float, shape (k, k)
        Cosine matrix of P^s - 1/d_vob, the prediction.
    pearson_r : float
        Pearson r between the off-diagonal entries of ``measured`` and ``predicted``.
    max_abs_diff : float
        Largest |measured - predicted| off the diagonal.
    anchor : int
        The token s0 of the profiles.
    profile_measured : ndarray of float, shape (k,)
        cos(w(s0), w(s_j)), measured.
    profile_reconstructed : ndarray of float, shape (k,)
        The same for the eq. 14 reconstruction.
    profile_r : float
        Pearson r between the two profiles (s0 itself left out).
    """

    ids: np.ndarray = field(default_factory=lambda: np.zeros(0, int))
    measured: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    predicted: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    pearson_r: float = float("nan")
    max_abs_diff: float = float("nan")
    anchor: int = 0
    profile_measured: np.ndarray = field(default_factory=lambda: np.zeros(0))
    profile_reconstructed: np.ndarray = field(default_factory=lambda: np.zeros(0))
    profile_r: float = float("nan")

    def summary(self) -> dict[str, float]:
        return {"pearson_r": self.pearson_r, "max_abs_diff": self.max_abs_diff, "profile_r": self.profile_r}


def theory(embeddings: np.ndarray, P: np.ndarray, ids: np.ndarray, kinds: list[str], anchor: int,
           d_m: int, gamma: float, dim: int | None = None, seed: int = 0, step: int | None = None) -> TheoryResult:
    """embeddings (k, d) of tokens ``ids``; P (vocab, vocab); kinds[i] in {'reasoning', 'key', ...}."""
    ids = np.asarray(ids)
    measured = cosine_matrix(embeddings)
    predicted = label_cosine(P, ids)
    off = np.triu_indices(len(ids), 1)
    a, b = measured[off], predicted[off]
    j0 = int(np.flatnonzero(ids == anchor)[0])
    rec = reconstruct(ids, kinds, dim or P.shape[1], d_m, gamma, np.random.default_rng(seed))
    rec_cos = cosine_matrix(rec)
    keep = np.arange(len(ids)) != j0
    return TheoryResult(
        step=step, ids=ids, measured=measured, predicted=predicted,
        pearson_r=pearson(a, b), max_abs_diff=float(np.abs(a - b).max()) if a.size else float("nan"),
        anchor=int(anchor), profile_measured=measured[j0], profile_reconstructed=rec_cos[j0],
        profile_r=pearson(measured[j0][keep], rec_cos[j0][keep]))
