"""Attention as averaging: how close each layer's attention is to uniform over the causal past."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .base import Result


@dataclass
class AttentionResult(Result):
    """Per layer and head: distance from causal averaging, and where the last position looks.

    Returned by [`probe.attention`][probe.probes.attention.attention]. L layers (1 for one ``layer``), H heads, T
    positions. Besides the attributes below, every result has ``step`` and ``warnings``
    ([`Result`][probe.analyses.base.Result]).

    Attributes
    ----------
    avg_dev : ndarray of float, shape (L, H)
        Mean over rows i and keys j <= i of |A_ij - 1/i| (0: exact averaging).
    entropy_ratio : ndarray of float, shape (L, H)
        Mean row entropy / log(i) (1: uniform rows).
    last_to_key : ndarray of float, shape (L, H)
        Mean attention of the last position to the key token.
    last_to_anchors : ndarray of float, shape (L, H)
        The same to the anchors right after the key.
    last_profile : ndarray of float, shape (L, H, T)
        Mean attention of the last position to each position.
    mean_map : ndarray of float, shape (L, H, T, T)
        Mean attention map of the probe sequences whose key sits at the most common key position
        ``map_key_pos``, so the key and anchors line up (not in ``to_dict()``).
    map_key_pos : int
        That key position.
    """

    avg_dev: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    entropy_ratio: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    last_to_key: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    last_to_anchors: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    last_profile: np.ndarray = field(default_factory=lambda: np.zeros((0, 0, 0)))
    mean_map: np.ndarray = field(default_factory=lambda: np.zeros((0, 0, 0, 0)), metadata={"json": False})
    map_key_pos: int = 0

    def summary(self) -> dict[str, float]:
        out = {}
        L, H = self.avg_dev.shape
        for l in range(L):
            for h in range(H):
                tag = f"L{l}" if H == 1 else f"L{l}H{h}"
                out[f"avg_dev[{tag}]"] = float(self.avg_dev[l, h])
                out[f"entropy_ratio[{tag}]"] = float(self.entropy_ratio[l, h])
                out[f"last_to_key[{tag}]"] = float(self.last_to_key[l, h])
                out[f"last_to_anchors[{tag}]"] = float(self.last_to_anchors[l, h])
        return out


def attention_stats(A: np.ndarray, key_pos: np.ndarray, n_anchors: int = 2, step: int | None = None) -> AttentionResult:
    """A (layers, heads, batch, T, T) causal attention probabilities; key_pos (batch,)."""
    A = np.asarray(A, dtype=np.float64)
    L, H, B, T, _ = A.shape
    row = np.arange(1, T + 1)[:, None]                        # row i sees i positions
    causal = np.tril(np.ones((T, T), dtype=bool))
    dev = np.abs(A - 1.0 / row) * causal
    avg_dev = dev.sum(axis=(-1, -2)) / causal.sum()           # (L, H, B)
    p = np.where(causal, A, 1.0)
    ent = -(np.where(causal, A * np.log(np.clip(p, 1e-30, None)), 0.0)).sum(-1)   # (L, H, B, T)
    ratio = ent[..., 1:] / np.log(np.arange(2, T + 1))        # row 0 has a single position
    last = A[..., -1, :]                                      # (L, H, B, T)
    b = np.arange(B)
    to_key = last[:, :, b, key_pos]
    to_anchor = sum(last[:, :, b, np.minimum(key_pos + 1 + j, T - 1)] for j in range(n_anchors))
    mode = int(np.bincount(key_pos).argmax()) if B else 0
    return AttentionResult(step=step, avg_dev=avg_dev.mean(-1), entropy_ratio=ratio.mean(axis=(-1, -2)),
                           last_to_key=to_key.mean(-1), last_to_anchors=to_anchor.mean(-1),
                           last_profile=last.mean(axis=2), mean_map=A[:, :, key_pos == mode].mean(axis=2),
                           map_key_pos=mode)
