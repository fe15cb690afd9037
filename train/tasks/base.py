"""What every task is: aligned arrays of sequences, splits, token groups and P^s.

A task module (:mod:`.anchor`, :mod:`.composite`, :mod:`.lm`) subclasses :class:`Task` and
provides ``groups``, ``describe()`` and a ``make_*`` function registered in :mod:`probe_train.tasks`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..config import RunConfig

@dataclass
class Task:
    """All sequences of a task; arrays are aligned on axis 0.

    tokens  (N, L) int64   input sequences
    labels  (N,)   int64   targets
    key_pos (N,)   int64   position of the key z
    split   (N,)   int64   index into SPLITS
    combo   (N,)   int64   index into ``combos``
    """

    cfg: RunConfig
    tokens: np.ndarray
    labels: np.ndarray
    key_pos: np.ndarray
    split: np.ndarray
    combo: np.ndarray
    combos: list[tuple[int, ...]]
    splits: tuple[str, ...]
    train_splits: tuple[str, ...]

    def indices(self, split: str) -> np.ndarray:
        return np.flatnonzero(self.split == self.splits.index(split))

    @property
    def train_indices(self) -> np.ndarray:
        return np.flatnonzero(np.isin(self.split, [self.splits.index(s) for s in self.train_splits]))

    def eval_indices(self, split: str) -> np.ndarray:
        return self.indices(split)[: self.cfg.eval_size]

    def probe_indices(self) -> np.ndarray:
        return np.concatenate([self.indices(s)[: self.cfg.probe_per_split] for s in self.splits])

    def run_arrays(self) -> dict[str, np.ndarray]:
        """Task arrays stored once per run (schema entries): P^s, its empirical version and r_s."""
        dist, freq = self.label_dist(expected=True)
        dist_emp, _ = self.label_dist(expected=False)
        return {"label_dist": dist, "label_dist_empirical": dist_emp, "token_freq": freq}

    def _uniform_label_mask(self) -> np.ndarray | None:
        """Sequences whose label counts as uniform on the keys in the expected P^s (None: none)."""
        return None

    @property
    def keys(self) -> np.ndarray:
        return np.arange(self.cfg.key_min, self.cfg.key_max + 1)

    def label_dist(self, expected: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """P^s (vocab x vocab) and r_s (vocab,) over the training split.

        Row s is the label distribution of training sequences that contain s; r_s is
        the fraction of training sequences containing s. With ``expected``, labels drawn
        at random when the task was made (paper 1's memory mapping) count as their
        distribution (uniform on the keys) rather than the drawn value, i.e. in
        expectation over the lookup table, as in paper 1's Proposition 1; memory
        anchors then share one row exactly.
        """
        V = self.cfg.vocab_size
        idx = self.train_indices
        toks, labels = self.tokens[idx], self.labels[idx]
        uniform = self._uniform_label_mask()
        uniform = np.zeros(len(idx), bool) if (uniform is None or not expected) else uniform[idx]
        n = len(idx)
        present = np.zeros((n, V), dtype=bool)          # each (sequence, distinct token) once
        present[np.arange(n)[:, None], toks] = True
        seq, tok = np.nonzero(present)
        drawn = ~uniform[seq]
        counts = np.bincount(tok[drawn] * V + labels[seq[drawn]], minlength=V * V).reshape(V, V).astype(float)
        per_token = np.bincount(tok[~drawn], minlength=V).astype(float)
        counts[:, self.keys] += per_token[:, None] / len(self.keys)
        total = present.sum(axis=0).astype(float)
        dist = np.divide(counts, total[:, None], out=np.zeros_like(counts), where=total[:, None] > 0)
        return dist, total / n
