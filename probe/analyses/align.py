"""Singular vectors of W^V (and of W^V W^O, in factored form) against token embeddings."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .stats import unit_rows
from .base import Result


def factored_svd(A: np.ndarray, B: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """SVD of A @ B without forming it: A (n, r), B (r, m) -> U (n, r'), S (r',), Vt (r', m).

    With A = Qa Ra and B^T = Qb Rb, A B = Qa (Ra Rb^T) Qb^T, so only the small r x r
    core is decomposed (as TransformerLens' FactoredMatrix does).
    """
    Qa, Ra = np.linalg.qr(A)
    Qb, Rb = np.linalg.qr(B.T)
    Uc, S, Vct = np.linalg.svd(Ra @ Rb.T)
    return Qa @ Uc, S, Vct @ Qb.T


@dataclass
class AlignResult(Result):
    """Alignment of one head's value map with the token embeddings.

    Returned by [`probe.align`][probe.probes.align.align]. r = min(d_model, d_head); k = min(``top_k``, r); V is the
    vocabulary size. Besides the attributes below, every result has ``step`` and ``warnings``
    ([`Result`][probe.analyses.base.Result]).

    Attributes
    ----------
    layer : int
        The layer.
    head : int
        The query head.
    value_head : int
        The value head that query head ``head`` reads (grouped-query attention; else ``head``).
    singular_values : ndarray of float, shape (r,)
        Singular values of W_V[h] (d_model x d_head), descending.
    ov_singular_values : ndarray of float, shape (r,)
        Singular values of W_V[h] @ W_O[h] (d_model x d_model), from a factored SVD.
    sv1_share : float
        s_1² / Σ s_i² of W_V: near 1 when the top direction dominates.
    cos : ndarray of float, shape (k, V)
        |cos| between each of the top-k left singular vectors (embedding space) and every token
        embedding (not in ``to_dict()``).
    group_mean : dict of str to list of float
        Per token group, the mean |cos| with singular vectors 1 .. k.
    """

    layer: int = 0
    head: int = 0
    value_head: int = 0
    singular_values: np.ndarray = field(default_factory=lambda: np.zeros(0))
    ov_singular_values: np.ndarray = field(default_factory=lambda: np.zeros(0))
    sv1_share: float = float("nan")
    cos: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)), metadata={"json": False})   # vocab-sized
    group_mean: dict[str, list[float]] = field(default_factory=dict)

    def summary(self) -> dict[str, float]:
        out = {"sv1": float(self.singular_values[0]), "sv1_share": self.sv1_share,
               "ov_sv1": float(self.ov_singular_values[0])}
        for g, v in self.group_mean.items():
            out[f"cos_top1[{g}]"] = v[0]
        return out


def align(W_V: np.ndarray, W_O: np.ndarray, embeddings: np.ndarray, groups: dict[str, np.ndarray],
          top_k: int = 3, layer: int = 0, head: int = 0, step: int | None = None, value_head: int | None = None
          ) -> AlignResult:
    """W_V (d, e), W_O (e, d), embeddings (V, d), groups name -> token ids. ``value_head``: the
    value head ``head`` reads (differs from ``head`` under grouped-query attention)."""
    U, S, _ = np.linalg.svd(np.asarray(W_V, dtype=np.float64), full_matrices=False)
    ov = factored_svd(np.asarray(W_V, np.float64), np.asarray(W_O, np.float64))[1]
    k = min(top_k, U.shape[1])
    E, _ = unit_rows(embeddings)                  # a zero embedding has |cos| 0 with every direction
    cos = np.abs(U[:, :k].T @ E.T)
    group_mean = {g: [float(cos[i, ids].mean()) for i in range(k)] for g, ids in groups.items() if len(ids)}
    share = float(S[0] ** 2 / (S ** 2).sum()) if S.size and (S ** 2).sum() > 0 else float("nan")
    return AlignResult(step=step, layer=layer, head=head, value_head=head if value_head is None else value_head,
                       singular_values=S, ov_singular_values=ov,
                       sv1_share=share, cos=cos, group_mean=group_mean)
