"""Cosine-similarity structure of a set of token vectors (pure numpy)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .stats import cosine_matrix, spearman, unit_rows, zero_rows
from .base import Result, labels_field, jsonable


@dataclass
class SimilarityResult(Result):
    """Cosine similarity of k token vectors, and the numbers that show its structure.

    Returned by [`probe.similarity`][probe.probes.similarity.similarity]. Besides the attributes below, every result has
    ``step`` and ``warnings`` ([`Result`][probe.analyses.base.Result]).

    Attributes
    ----------
    ids : ndarray of int, shape (k,)
        The token ids, in the order of the rows.
    matrix : ndarray of float, shape (k, k), or None
        cos(v_i, v_j); ``None`` for selections above ``BLOCKED_ABOVE`` (4096) tokens. A zero vector has
        cosine 0 with every vector (a warning names it).
    mean_offdiag : float
        Mean of the off-diagonal entries (near 1: the vectors are alike).
    std_offdiag : float
        Their spread (near 0 with a high mean: uniformly similar).
    by_distance : dict of int to float
        Mean cosine over the pairs with |id_i - id_j| = d, for each d.
    distance_corr : float
        Spearman correlation of |id_i - id_j| and cosine over the pairs; strongly negative means a
        band: similarity falls as ids grow apart (NaN, JSON null, when the cosines or the distances are
        all equal).
    groups : list of str, length k
        The group each token was chosen by (``""`` for plain ids).
    texts : list of str, length k, or None
        The text of each token, where the source has a vocabulary (not in ``to_dict()``).
    """

    ids: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    matrix: np.ndarray | None = None
    mean_offdiag: float = float("nan")
    std_offdiag: float = float("nan")
    by_distance: dict[int, float] = field(default_factory=dict)
    distance_corr: float = float("nan")
    groups: list[str] = field(default_factory=list)
    texts: list[str] | None = labels_field()

    def summary(self) -> dict[str, float]:
        out = {"mean_offdiag": self.mean_offdiag, "std_offdiag": self.std_offdiag,
               "distance_corr": self.distance_corr}
        out.update({f"by_distance[{d}]": v for d, v in self.by_distance.items()})
        return out

    def rows(self) -> list[tuple[str, str, float]]:
        """The summary, then every matrix cell as metric ``cosine`` with key ``i,j`` (token ids)."""
        rows = super().rows()
        if self.matrix is not None:
            ids = [int(i) for i in self.ids]
            rows += [("cosine", f"{a},{b}", float(v)) for a, row in zip(ids, self.matrix) for b, v in zip(ids, row)]
        return rows

    def to_dict(self) -> dict:
        return {
            "step": self.step,
            "ids": [int(i) for i in self.ids],
            "matrix": None if self.matrix is None else jsonable(np.round(self.matrix, 6)),
            "mean_offdiag": jsonable(self.mean_offdiag),
            "std_offdiag": jsonable(self.std_offdiag),
            "distance_corr": jsonable(self.distance_corr),
            "by_distance": jsonable(self.by_distance),
            "warnings": list(self.warnings),
        }


def _result(vectors: np.ndarray, ids: np.ndarray, step, groups, n_pairs: int, **numbers) -> SimilarityResult:
    """The result of the structure ``numbers`` from ``n_pairs`` pairs, with what they hide in its warnings."""
    notes = []
    zero = zero_rows(vectors)
    if zero.size:
        shown = ", ".join(str(int(ids[i])) for i in zero[:8]) + (", ..." if zero.size > 8 else "")
        notes.append(f"token(s) {shown} have an all-zero vector: their cosines are set to 0")
    if n_pairs > 1 and not np.isfinite(numbers["distance_corr"]):   # with one pair there is nothing to correlate
        notes.append("distance_corr is undefined (null): the cosines or the id distances are all equal")
    return SimilarityResult(ids=ids, step=step, groups=list(groups or []), warnings=notes, **numbers)


def cosine_similarity(vectors: np.ndarray, ids: np.ndarray | None = None, step: int | None = None,
                      groups: list[str] | None = None) -> SimilarityResult:
    """Cosine structure of ``vectors`` (k, d), row i belonging to token ``ids[i]``."""
    k = len(vectors)
    ids = np.arange(k) if ids is None else np.asarray(ids)
    m = cosine_matrix(vectors)
    iu, ju = np.triu_indices(k, 1)
    pairs = m[iu, ju]
    dist = np.abs(ids[iu] - ids[ju])
    uniq, inv = np.unique(dist, return_inverse=True)
    means = np.bincount(inv, weights=pairs, minlength=len(uniq)) / np.bincount(inv, minlength=len(uniq))
    by_distance = {int(d): float(v) for d, v in zip(uniq, means)}
    return _result(vectors, ids, step, groups, pairs.size, matrix=m, by_distance=by_distance,
                   distance_corr=spearman(dist, pairs),
                   mean_offdiag=float(pairs.mean()) if pairs.size else float("nan"),
                   std_offdiag=float(pairs.std()) if pairs.size else float("nan"))


BLOCKED_ABOVE = 4096  # selections larger than this are summarised block by block


def cosine_similarity_blocked(vectors: np.ndarray, ids: np.ndarray | None = None, step: int | None = None,
                              groups: list[str] | None = None, block: int = 256, sample_pairs: int = 200_000,
                              seed: int = 0) -> SimilarityResult:
    """The structure numbers of :func:`cosine_similarity` for a large k, never forming the k x k matrix.

    Mean and spread off the diagonal and the mean at each id distance are exact, accumulated over
    row blocks (memory ~ block x k); ``distance_corr`` is the Spearman correlation over a seeded
    random sample of ``sample_pairs`` pairs (the exact one would rank k^2 / 2 numbers).
    ``matrix`` is None.
    """
    k = len(vectors)
    ids = np.arange(k) if ids is None else np.asarray(ids)
    u, _ = unit_rows(vectors, np.float32)
    span = int(ids.max() - ids.min()) + 1 if k else 1
    off = ids.min() if k else 0
    by_sum = np.zeros(span)
    by_cnt = np.zeros(span)
    total = total_sq = 0.0
    rel = (ids - off).astype(np.int64)
    for start in range(0, k, block):
        stop = min(start + block, k)
        c = (u[start:stop] @ u[start:].T).astype(np.float64)      # (b, k - start): the upper part only
        upper = np.arange(start, k)[None, :] > np.arange(start, stop)[:, None]
        vals = c[upper]
        total += vals.sum()
        total_sq += vals @ vals
        d = np.abs(rel[start:stop, None] - rel[None, start:])[upper]
        by_sum += np.bincount(d, weights=vals, minlength=span)
        by_cnt += np.bincount(d, minlength=span)
        del c, upper, vals, d
    n_pairs = k * (k - 1) / 2
    mean = total / n_pairs if n_pairs else float("nan")
    std = float(np.sqrt(max(total_sq / n_pairs - mean * mean, 0.0))) if n_pairs else float("nan")
    by_distance = {int(d): float(by_sum[d] / by_cnt[d]) for d in np.flatnonzero(by_cnt)}
    rng = np.random.default_rng(seed)
    a = rng.integers(0, k, sample_pairs)
    b = rng.integers(0, k, sample_pairs)
    keep = a != b
    a, b = a[keep], b[keep]
    cs = np.concatenate([np.einsum("ij,ij->i", u[a[s:s + 8192]].astype(np.float64), u[b[s:s + 8192]])
                         for s in range(0, len(a), 8192)]) if len(a) else np.zeros(0)
    return _result(vectors, ids, step, groups, len(cs), matrix=None, mean_offdiag=float(mean), std_offdiag=std,
                   by_distance=by_distance, distance_corr=spearman(np.abs(ids[a] - ids[b]), cs))
