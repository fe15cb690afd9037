"""The papers' synthetic tasks: data, splits, token groups and P^s.

Anchor task (paper 1): a sequence of length L holds noise keys, a key z at position
p, the q anchors right after it, then more noise. Both anchors reasoning -> label
z + sum(a); both memory -> a label drawn once per (z, a...) from the keys (a lookup table).

Composite task (paper 2): anchors 1..4 are functions g(x; a) = x + shift[a]; the
label of (x, a1, a2) is g(g(x; a1); a2). The pair (4,3) is never trained, (3,4) is
trained on a non-inferential target, and keys are split by x mod 9 vs their position.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from .config import RunConfig, composite_pair, composite_shifts, held_out_combos

SPLITS = ("mem", "rsn_train", "rsn_test")
MEM, RSN_TRAIN, RSN_TEST = range(3)


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

    parts = []  # (z, p, pair index, split index, label)
    for split_i, test_keys, count in ((0, False, per_pair), (1, True, per_test)):
        for pair in seen:
            z, p = draw(count, test_keys)
            parts.append((z, p, pairs.index(pair), split_i, z + shift(pair)))
    z, p = draw(per_pair, None)
    rule = shifts[unseen[0] - 1] + shifts[unseen[1] - 1]
    parts.append((z, p, pairs.index(unseen), 2, z + rule))
    parts.append((z, p, pairs.index(unseen), 3, z + cfg.swapped_shift))
    z = np.concatenate([x[0] for x in parts])
    key_pos = np.concatenate([x[1] for x in parts])
    combo = np.concatenate([np.full(len(x[0]), x[2]) for x in parts])
    split = np.concatenate([np.full(len(x[0]), x[3]) for x in parts])
    labels = np.concatenate([x[4] for x in parts])
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


def make_task(cfg: RunConfig) -> Task:
    if cfg.task == "lm":
        from .lm import make_text_task

        return make_text_task(cfg)
    return make_composite_task(cfg) if cfg.task == "composite" else make_anchor_task(cfg)
