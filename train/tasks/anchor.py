"""Paper 1's anchor-function task.

A sequence of length L holds noise keys, a key z at position p, the q anchors right after it,
then more noise. Both anchors reasoning -> label z + sum(a); both memory -> a label drawn once
per (z, a...) from the keys (a lookup table).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from ..config import RunConfig, held_out_combos
from .base import Task

SPLITS = ("mem", "rsn_train", "rsn_test")
MEM, RSN_TRAIN, RSN_TEST = range(3)


@dataclass
class AnchorTask(Task):
    memory_table: np.ndarray = None  # (n_mem_combos, n_keys) labels of the memory mapping

    @property
    def groups(self) -> dict[str, np.ndarray]:
        c = self.cfg
        return {
            "keys": self.keys,
            "memory": np.arange(c.mem_anchor_min, c.mem_anchor_max + 1),
            "reasoning": np.arange(c.rsn_anchor_min, c.rsn_anchor_max + 1),
        }

    def _uniform_label_mask(self) -> np.ndarray:
        return self.split == MEM

    def describe(self) -> dict:
        c = self.cfg
        return {
            "kind": "anchor",
            "token_groups": sorted(self.groups),
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
                      combos, SPLITS, ("mem", "rsn_train"), memory_table)
