"""PCA of token vectors and how well numeric groups line up along it."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .base import Result, labels_field
from .stats import spearman


@dataclass
class PCAResult(Result):
    """PCA of k token vectors, and how well each group lies in id order along it.

    Returned by [`probe.pca`][probe.probes.pca.pca]. Besides the attributes below, every result has ``step`` and
    ``warnings`` ([`Result`][probe.analyses.base.Result]).

    Attributes
    ----------
    ids : ndarray of int, shape (k,)
        The token ids.
    groups : list of str, length k
        The group of each token (``""`` for plain ids).
    texts : list of str, length k, or None
        The text of each token, where the source has a vocabulary (not in ``to_dict()``).
    explained : ndarray of float, shape (c,)
        Explained-variance ratio of each of the c components.
    coords : ndarray of float, shape (k, c)
        Coordinates of each token on the components.
    order_pc1 : dict of str to float
        Per group of 3 or more tokens, |Spearman(id, PC1 coordinate)| along the PC1 of the group's own
        PCA: 1 = the group lies in id order along its main axis (a number line). Tokens chosen by words
        form the group ``"words"``, ranked in the order the words were given instead of by id.
    order_arc : dict of str to float
        The same along the arc the group traces in its own PC1-PC2 plane (angle around the group's
        centre), for curved lines.
    """

    ids: np.ndarray = field(default_factory=lambda: np.zeros(0, int))
    groups: list[str] = field(default_factory=list)
    texts: list[str] | None = labels_field()
    explained: np.ndarray = field(default_factory=lambda: np.zeros(0))
    coords: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    order_pc1: dict[str, float] = field(default_factory=dict)
    order_arc: dict[str, float] = field(default_factory=dict)

    def summary(self) -> dict[str, float]:
        out = {f"explained_pc{i + 1}": float(v) for i, v in enumerate(self.explained[:3])}
        out.update({f"order_pc1[{g}]": v for g, v in self.order_pc1.items()})
        out.update({f"order_arc[{g}]": v for g, v in self.order_arc.items()})
        return out


def _arc_order(ids: np.ndarray, xy: np.ndarray) -> float:
    centred = xy - xy.mean(axis=0)
    angle = np.arctan2(centred[:, 1], centred[:, 0])
    # cut the circle at the widest gap between consecutive tokens' angles
    srt = np.sort(angle)
    gaps = np.diff(np.concatenate([srt, srt[:1] + 2 * np.pi]))
    cut = srt[(np.argmax(gaps) + 1) % len(srt)]
    position = np.mod(angle - cut, 2 * np.pi)
    return abs(spearman(ids, position))


def pca(vectors: np.ndarray, ids: np.ndarray, groups: list[str] | None = None, n_components: int = 3,
        step: int | None = None, order_by: np.ndarray | None = None) -> PCAResult:
    """PCA of ``vectors`` (k, d), centred on their mean (no scaling); ``order_by`` (k,): the rank each token
    should have along a number line (default: its id)."""
    X = np.asarray(vectors, dtype=np.float64)
    ids = np.asarray(ids)
    rank = ids if order_by is None else np.asarray(order_by)
    groups = list(groups) if groups else [""] * len(ids)
    Xc = X - X.mean(axis=0)
    # the k x k Gram matrix is enough: k tokens, d dims, k usually << d
    _, s, vt = np.linalg.svd(Xc, full_matrices=False)
    var = s ** 2
    total = var.sum()
    c = min(n_components, len(s))
    explained = var[:c] / total if total > 0 else np.zeros(c)
    coords = Xc @ vt[:c].T
    order, order_arc = {}, {}
    for g in dict.fromkeys(groups):
        mask = np.array([x == g for x in groups])
        if g and mask.sum() >= 3:
            # the group's own principal axes: the joint PCA's PC1 often just separates groups
            Xg = X[mask] - X[mask].mean(axis=0)
            _, sg, vg = np.linalg.svd(Xg, full_matrices=False)
            own = Xg @ vg[:2].T
            order[g] = abs(spearman(rank[mask], own[:, 0]))
            if own.shape[1] >= 2 and sg[1] > 0:
                order_arc[g] = _arc_order(rank[mask], own)
    return PCAResult(step=step, ids=ids, groups=groups, explained=explained, coords=coords,
                     order_pc1=order, order_arc=order_arc)
