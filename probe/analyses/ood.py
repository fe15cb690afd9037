"""Loss and accuracy of logits against targets, overall and per group of sequences."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .base import Result


def loss_acc(logits: np.ndarray, targets: np.ndarray) -> tuple[float, float]:
    """Mean cross-entropy and accuracy of logits (n, V) against integer targets (n,)."""
    if len(targets) == 0:
        return float("nan"), float("nan")
    z = np.asarray(logits, dtype=np.float64)
    z = z - z.max(axis=-1, keepdims=True)
    lp = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))   # log-softmax
    loss = float(-lp[np.arange(len(targets)), targets].mean())
    acc = float((logits.argmax(-1) == targets).mean())
    return loss, acc


@dataclass
class OODResult(Result):
    """Loss and accuracy of a stored model on every split.

    Returned by [`probe.ood`][probe.probes.ood.ood]. Besides the attributes below, every result has ``step`` and
    ``warnings`` ([`Result`][probe.analyses.base.Result]).

    Attributes
    ----------
    splits : dict of str to dict
        ``{split: {"loss": float, "acc": float, "n": int}}``, n the sequences evaluated.
    combos : dict of str to dict
        The held-out split per anchor combination: ``{"a1,a2": {"loss", "acc", "n"}}``.
    targets : dict of str to dict
        Accuracy against alternative targets, ``{name: {"acc", "n"}}`` (composite task: ``inferential``,
        x - 10, and ``symmetric``, x - 6, on the unseen pair; empty otherwise).
    """

    splits: dict[str, dict[str, float]] = field(default_factory=dict)
    combos: dict[str, dict[str, float]] = field(default_factory=dict)
    targets: dict[str, dict[str, float]] = field(default_factory=dict)

    def summary(self) -> dict[str, float]:
        out = {f"{k}[{s}]": m[k] for s, m in self.splits.items() for k in ("acc", "loss")}
        out.update({f"acc[{name}]": m["acc"] for name, m in self.targets.items()})
        return out

    def rows(self):
        rows = [(f"{m}", s, v[m]) for s, v in self.splits.items() for m in ("loss", "acc")]
        rows += [(f"combo_{m}", c, v[m]) for c, v in self.combos.items() for m in ("loss", "acc")]
        rows += [("target_acc", t, v["acc"]) for t, v in self.targets.items()]
        return rows
