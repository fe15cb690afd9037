"""Paper 1's anchor-function task: data, splits, token groups and P^s.

A sequence of length L holds noise keys, a key z at position p, the q anchors
right after it, then more noise. Both anchors reasoning -> label z + sum(a);
both memory -> a label drawn once per (z, a...) from the keys (a lookup table).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from .config import RunConfig, held_out_combos

SPLITS = ("mem", "rsn_train", "rsn_test")
MEM, RSN_TRAIN, RSN_TEST = range(3)


@dataclass
class AnchorTask:
    """All sequences of the task; arrays are aligned on axis 0.

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
    memory_table: np.ndarray  # (n_mem_combos, n_keys) labels of the memory mapping

    splits = SPLITS

    @property
    def keys(self) -> np.ndarray:
        return np.arange(self.cfg.key_min, self.cfg.key_max + 1)

    @property
    def groups(self) -> dict[str, np.ndarray]:
        c = self.cfg
        return {
            "keys": self.keys,
            "memory": np.arange(c.mem_anchor_min, c.mem_anchor_max + 1),
            "reasoning": np.arange(c.rsn_anchor_min, c.rsn_anchor_max + 1),
        }

    def indices(self, split: str) -> np.ndarray:
        return np.flatnonzero(self.split == SPLITS.index(split))

    @property
    def train_indices(self) -> np.ndarray:
        return np.flatnonzero(self.split != RSN_TEST)

    def eval_indices(self, split: str) -> np.ndarray:
        return self.indices(split)[: self.cfg.eval_size]

    def probe_indices(self) -> np.ndarray:
        return np.concatenate([self.indices(s)[: self.cfg.probe_per_split] for s in SPLITS])

    def describe(self) -> dict:
        c = self.cfg
        return {
            "kind": "anchor",
            "splits": list(SPLITS),
            "train_splits": ["mem", "rsn_train"],
            "vocab_size": c.vocab_size,
            "seq_len": c.seq_len,
            "n_anchors": c.n_anchors,
            "keys": [c.key_min, c.key_max],
            "memory_anchors": [c.mem_anchor_min, c.mem_anchor_max],
            "reasoning_anchors": [c.rsn_anchor_min, c.rsn_anchor_max],
            "held_out": [list(h) for h in held_out_combos(c)],
            "split_sizes": {s: int((self.split == i).sum()) for i, s in enumerate(SPLITS)},
            "reasoning_rule": "label = key + sum(anchors)",
            "memory_rule": "label = lookup table drawn uniformly from the keys per (key, anchors)",
        }

    def label_dist(self, expected: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """P^s (vocab x vocab) and r_s (vocab,) over the training split.

        Row s is the label distribution of training sequences that contain s; r_s is
        the fraction of training sequences containing s. With ``expected`` each
        memory-mapping label counts as its distribution (uniform on the keys) rather
        than the drawn value, i.e. in expectation over the lookup table, as in paper
        1's Proposition 1; memory anchors then share one row exactly.
        """
        V = self.cfg.vocab_size
        idx = self.train_indices
        toks, labels, is_mem = self.tokens[idx], self.labels[idx], self.split[idx] == MEM
        n = len(idx)
        # each (sequence, distinct token) pair once
        present = np.zeros((n, V), dtype=bool)
        present[np.arange(n)[:, None], toks] = True
        seq, tok = np.nonzero(present)
        counts = np.zeros((V, V))
        if expected:
            rsn = ~is_mem[seq]
            counts += np.bincount(tok[rsn] * V + labels[seq[rsn]], minlength=V * V).reshape(V, V)
            mem_per_token = np.bincount(tok[~rsn], minlength=V).astype(float)
            counts[:, self.keys] += mem_per_token[:, None] / len(self.keys)
        else:
            counts += np.bincount(tok * V + labels[seq], minlength=V * V).reshape(V, V)
        total = present.sum(axis=0).astype(float)
        dist = np.divide(counts, total[:, None], out=np.zeros_like(counts), where=total[:, None] > 0)
        return dist, total / n


def make_anchor_task(cfg: RunConfig) -> AnchorTask:
    rng = np.random.default_rng(cfg.data_seed)
    keys = np.arange(cfg.key_min, cfg.key_max + 1)
    q, L = cfg.n_anchors, cfg.seq_len
    mem_anchors = range(cfg.mem_anchor_min, cfg.mem_anchor_max + 1)
    rsn_anchors = range(cfg.rsn_anchor_min, cfg.rsn_anchor_max + 1)
    mem_combos = list(itertools.product(mem_anchors, repeat=q))
    held = set(held_out_combos(cfg))
    rsn_all = list(itertools.product(rsn_anchors, repeat=q))
    rsn_train = [c for c in rsn_all if c not in held]
    rsn_test = [c for c in rsn_all if c in held]
    combos = mem_combos + rsn_train + rsn_test
    kinds = [MEM] * len(mem_combos) + [RSN_TRAIN] * len(rsn_train) + [RSN_TEST] * len(rsn_test)
    per_combo = max(1, cfg.n_samples // (len(mem_combos) + len(rsn_train)))
    memory_table = rng.choice(keys, size=(len(mem_combos), len(keys)))

    n = per_combo * len(combos)
    combo = np.repeat(np.arange(len(combos)), per_combo)
    split = np.asarray(kinds)[combo]
    anchors = np.asarray(combos)[combo]                       # (n, q)
    z = rng.choice(keys, size=n)
    key_pos = rng.integers(0, L - q, size=n)                  # key and anchors fit
    tokens = rng.choice(keys, size=(n, L))                    # noise everywhere first
    rows = np.arange(n)
    tokens[rows, key_pos] = z
    for j in range(q):
        tokens[rows, key_pos + 1 + j] = anchors[:, j]
    labels = z + anchors.sum(axis=1)
    is_mem = split == MEM
    labels[is_mem] = memory_table[combo[is_mem], z[is_mem] - cfg.key_min]
    # shuffle once so any prefix of a split (eval and probe subsets) mixes combinations
    perm = rng.permutation(n)
    return AnchorTask(cfg, tokens[perm], labels[perm], key_pos[perm], split[perm], combo[perm],
                      combos, memory_table)


def make_task(cfg: RunConfig) -> AnchorTask:
    return make_anchor_task(cfg)
