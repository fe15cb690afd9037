"""Condensation: covariance spectra, neuron groups, singular values of linear layers."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .stats import exp_entropy, named, unit_rows
from .base import Result


def covariance_eigenvalues(X: np.ndarray, block: int = 8192) -> np.ndarray:
    """Eigenvalues (descending) of the covariance of the rows of X (k, d).

    Rows are centred on their mean and the covariance is X_c^T X_c / (k - 1); no scaling
    to unit variance. It is the eigen-decomposition of the smaller of the d x d covariance
    and the k x k Gram matrix (they share their nonzero eigenvalues), never an SVD of
    X; the d x d case is accumulated over row blocks in float64, so a 50257 x 768 float32
    input needs no float64 copy of itself.
    """
    X = np.asarray(X)
    k, d = X.shape
    mean = X.mean(axis=0, dtype=np.float64)
    if d <= k:
        M = np.zeros((d, d))
        for start in range(0, k, block):
            B = X[start:start + block].astype(np.float64) - mean
            M += B.T @ B
    else:
        Xc = X.astype(np.float64) - mean
        M = Xc @ Xc.T
    ev = np.linalg.eigvalsh(M / max(k - 1, 1))[::-1]
    return np.clip(ev, 0.0, None)


def effective_rank(ev: np.ndarray) -> float:
    """exp(entropy) of the normalised covariance eigenvalues; 1 = one direction. (Of the
    eigenvalues lambda = sigma^2, not of singular values as ``spectrum``'s ``entropy_rank``.)"""
    return exp_entropy(ev)


def stable_rank(ev: np.ndarray) -> float:
    """sum(lambda) / max(lambda) for a covariance spectrum (= ||X||_F^2 / ||X||_2^2)."""
    return float(ev.sum() / ev[0]) if ev.size and ev[0] > 0 else float("nan")


def neuron_groups(W: np.ndarray, threshold: float = 0.7) -> tuple[np.ndarray, list[list[int]]]:
    """Cosine similarity of neurons (rows of W, each a neuron's input weights) and the groups
    of neurons linked by cos > threshold (connected components). Returns (cos, groups), largest first."""
    U, _ = unit_rows(W)
    cos = U @ U.T
    n = len(U)
    parent = list(range(n))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, j in zip(*np.nonzero(np.triu(cos > threshold, 1))):
        parent[find(i)] = find(j)
    comps: dict[int, list[int]] = {}
    for i in range(n):
        comps.setdefault(find(i), []).append(i)
    return cos, sorted(comps.values(), key=len, reverse=True)


@dataclass
class CondenseResult(Result):
    """Condensation numbers at one step.

    Returned by [`probe.condense`][probe.probes.condense.condense]. Besides the attributes below, every result has
    ``step`` and ``warnings`` ([`Result`][probe.analyses.base.Result]).

    Attributes
    ----------
    eigenvalues : ndarray of float, shape (r,)
        Covariance eigenvalues of the chosen vectors, descending; r = min(k, d) for k vectors of d
        numbers.
    top_share : dict of int to float
        For each k of ``top_shares``, the fraction of the total variance in the top k eigenvalues.
    effective_rank : float
        exp(entropy) of the normalised eigenvalues (of λ, not of singular values).
    stable_rank : float
        Sum / max of the eigenvalues.
    neuron_tensor : str or None
        The weight whose neurons were grouped (``None``: not asked).
    threshold : float
        The cosine above which two neurons are linked.
    neuron_group_sizes : list of int
        Sizes of the groups of neurons linked by cosine > ``threshold``, largest first (the summary's
        ``neuron_groups`` counts them).
    layer_singular_values : dict of str to ndarray
        Per weight matrix, its singular values: shape (min(m, n),) for an m x n matrix, (H, min(d, e))
        for a per-head tensor of H heads.
    """

    eigenvalues: np.ndarray = field(default_factory=lambda: np.zeros(0))
    top_share: dict[int, float] = field(default_factory=dict)
    effective_rank: float = float("nan")
    stable_rank: float = float("nan")
    neuron_tensor: str | None = None
    threshold: float = 0.7
    neuron_group_sizes: list[int] = field(default_factory=list)
    layer_singular_values: dict[str, np.ndarray] = field(default_factory=dict)

    def summary(self) -> dict[str, float | int]:
        out = {"eig1": float(self.eigenvalues[0]) if self.eigenvalues.size else float("nan")}
        if self.eigenvalues.size > 1:
            out["eig2"] = float(self.eigenvalues[1])
        out.update({f"top{k}_share": v for k, v in self.top_share.items()})
        out["effective_rank"] = self.effective_rank
        out["stable_rank"] = self.stable_rank
        if self.neuron_tensor:
            n = sum(self.neuron_group_sizes)
            out["largest_neuron_group"] = float(self.neuron_group_sizes[0]) / n if n else float("nan")
            out["neuron_groups"] = len(self.neuron_group_sizes)   # a count: an integer in tables and JSON
        for name, sv in self.layer_singular_values.items():
            out[f"sv1[{name}]"] = float(np.max(sv)) if sv.size else float("nan")
        return out


def condense(vectors: np.ndarray, top_k: tuple[int, ...] = (1, 2, 5), neurons: np.ndarray | None = None,
             neuron_tensor: str | None = None, threshold: float = 0.7,
             layers: dict[str, np.ndarray] | None = None, step: int | None = None) -> CondenseResult:
    """vectors (k, d); neurons (n, fan_in) or None; layers name -> weight (2-D, or 3-D per head)."""
    ev = named("the vectors' covariance", covariance_eigenvalues, vectors)
    total = ev.sum()
    shares = {k: float(ev[:k].sum() / total) if total > 0 else float("nan") for k in top_k}
    sizes = [] if neurons is None else [len(g) for g in neuron_groups(neurons, threshold)[1]]
    svs = {}
    for name, W in (layers or {}).items():
        W = np.asarray(W, dtype=np.float64)
        svs[name] = named(name, np.linalg.svd, W, compute_uv=False) if W.ndim >= 2 else np.zeros(0)
    return CondenseResult(step=step, eigenvalues=ev, top_share=shares, effective_rank=effective_rank(ev),
                          stable_rank=stable_rank(ev), neuron_tensor=neuron_tensor, threshold=threshold,
                          neuron_group_sizes=sizes, layer_singular_values=svs)
