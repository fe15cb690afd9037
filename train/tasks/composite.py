"""Paper 2's composite-function task.

Anchors 1..4 are functions g(x; a) = x + shift[a]; the label of (x, a1, a2) is g(g(x; a1); a2).
The pair (4,3) is never trained, (3,4) is trained on a non-inferential target, and keys are
split by x mod 9 vs their position.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..config import RunConfig, composite_pair, composite_shifts
from .base import Task

COMPOSITE_SPLITS = ("train", "test", "ood_inferential", "ood_symmetric")


@dataclass
class CompositeTask(Task):
    """Paper 2's composite functions. Splits: ``train`` (seen pairs, training keys), ``test``
    (seen pairs, held-out keys), and the unseen pair with its ``ood_inferential`` target
    (the composition of the primitives) or its ``ood_symmetric`` one (the swapped pair's
    taught target); the two OOD splits hold the same inputs."""

    @property
    def groups(self) -> dict[str, np.ndarray]:
        return {"keys": self.keys, "anchors": np.arange(1, len(composite_shifts(self.cfg)) + 1)}

    def describe(self) -> dict:
        c = self.cfg
        return {
            "kind": "composite",
            "token_groups": sorted(self.groups),
            "splits": list(COMPOSITE_SPLITS),
            "train_splits": ["train"],
            "vocab_size": c.vocab_size,
            "seq_len": c.seq_len,
            "n_anchors": 2,
            "keys": [c.key_min, c.key_max],
            "shifts": {str(a + 1): s for a, s in enumerate(composite_shifts(c))},
            "unseen_pair": list(composite_pair(c.unseen_pair, "unseen_pair", 99)),
            "swapped_pair": list(composite_pair(c.swapped_pair, "swapped_pair", 99)),
            "swapped_shift": c.swapped_shift,
            "key_split": f"test keys: key mod {c.key_split_mod} == key position (0-based); training keys: !=",
            "split_sizes": {s: int((self.split == i).sum()) for i, s in enumerate(COMPOSITE_SPLITS)},
            "rule": "label = g(g(key; a1); a2), g(x; a) = x + shift[a]",
        }


def make_composite_task(cfg: RunConfig) -> CompositeTask:
    rng = np.random.default_rng(cfg.data_seed)
    shifts = composite_shifts(cfg)
    n_anchor = len(shifts)
    unseen = composite_pair(cfg.unseen_pair, "unseen_pair", n_anchor)
    swapped = composite_pair(cfg.swapped_pair, "swapped_pair", n_anchor)
    keys = np.arange(cfg.key_min, cfg.key_max + 1)
    L, m = cfg.seq_len, cfg.key_split_mod
    pairs = [(a, b) for a in range(1, n_anchor + 1) for b in range(1, n_anchor + 1)]
    seen = [p for p in pairs if p != unseen]
    per_pair = max(1, cfg.n_samples // len(seen))
    per_test = max(1, per_pair // 4)

    def draw(n: int, test_keys: bool | None):
        """n (key, position) draws; test_keys None: any key."""
        z = np.empty(n, np.int64)
        p = np.empty(n, np.int64)
        filled = 0
        while filled < n:
            zz = rng.choice(keys, size=2 * (n - filled) + 16)
            pp = rng.integers(0, L - 2, size=len(zz))
            ok = np.ones(len(zz), bool) if test_keys is None else ((zz % m == pp) == test_keys)
            take = min(n - filled, int(ok.sum()))
            z[filled:filled + take] = zz[ok][:take]
            p[filled:filled + take] = pp[ok][:take]
            filled += take
        return z, p

    def shift(pair) -> int:
        return cfg.swapped_shift if pair == swapped else shifts[pair[0] - 1] + shifts[pair[1] - 1]

    parts = []  # (z, p, pair index, split index, label) per sequence
    for split_i, test_keys, count in ((0, False, per_pair), (1, True, per_test)):
        for pair in seen:
            z, p = draw(count, test_keys)
            parts.append((z, p, np.full(count, pairs.index(pair)), np.full(count, split_i), z + shift(pair)))
    z, p = draw(per_pair, None)
    rule = shifts[unseen[0] - 1] + shifts[unseen[1] - 1]
    parts.append((z, p, np.full(per_pair, pairs.index(unseen)), np.full(per_pair, 2), z + rule))
    parts.append((z, p, np.full(per_pair, pairs.index(unseen)), np.full(per_pair, 3), z + cfg.swapped_shift))
    z, key_pos, combo, split, labels = (np.concatenate(column) for column in zip(*parts))
    n = len(z)
    rows = np.arange(n)
    tokens = rng.choice(keys, size=(n, L))
    tokens[rows, key_pos] = z
    anchors = np.asarray(pairs)[combo]
    tokens[rows, key_pos + 1] = anchors[:, 0]
    tokens[rows, key_pos + 2] = anchors[:, 1]
    perm = rng.permutation(n)
    return CompositeTask(cfg, tokens[perm], labels[perm], key_pos[perm], split[perm], combo[perm],
                         pairs, COMPOSITE_SPLITS, ("train",))
