import itertools

import numpy as np
import pytest

from probe.errors import ProbeError
from probe_train.config import RunConfig, preset
from probe_train.tasks import make_task
from probe_train.tasks.anchor import MEM, RSN_TEST, RSN_TRAIN


@pytest.fixture(scope="module")
def task():
    return make_task(preset("tiny", n_samples=6000))


def test_sequence_layout_and_labels(task):
    c = task.cfg
    rows = np.arange(len(task.labels))
    z = task.tokens[rows, task.key_pos]
    anchors = np.stack([task.tokens[rows, task.key_pos + 1 + j] for j in range(c.n_anchors)], axis=1)
    # key is a key; anchors sit right after it; every other position is a noise key
    assert np.all((z >= c.key_min) & (z <= c.key_max))
    mask = np.ones_like(task.tokens, dtype=bool)
    for j in range(c.n_anchors + 1):
        mask[rows, task.key_pos + j] = False
    noise = task.tokens[mask]
    assert np.all((noise >= c.key_min) & (noise <= c.key_max))
    rsn = task.split != MEM
    assert np.array_equal(task.labels[rsn], z[rsn] + anchors[rsn].sum(axis=1))
    assert np.all(anchors[rsn] >= c.rsn_anchor_min)
    mem = ~rsn
    assert np.all(anchors[mem] <= c.mem_anchor_max)
    # the memory mapping is a fixed table: same (z, a1, a2) -> same label, labels are keys
    seen = {}
    for zz, aa, y in zip(z[mem], map(tuple, anchors[mem]), task.labels[mem]):
        assert seen.setdefault((zz, aa), y) == y
    assert np.all((task.labels[mem] >= c.key_min) & (task.labels[mem] <= c.key_max))


def test_held_out_combinations_only_in_test(task):
    rows = np.arange(len(task.labels))
    pairs = {tuple(p) for p in np.stack([task.tokens[rows, task.key_pos + 1],
                                         task.tokens[rows, task.key_pos + 2]], 1)[task.train_indices]}
    assert (11, 13) not in pairs and (13, 11) not in pairs
    test = task.indices("rsn_test")
    test_pairs = {(task.tokens[i, task.key_pos[i] + 1], task.tokens[i, task.key_pos[i] + 2]) for i in test}
    assert test_pairs == {(11, 13), (13, 11)}
    # equal counts per anchor combination
    counts = np.bincount(task.combo)
    assert counts.min() == counts.max()
    assert len(set(task.combo[task.split == RSN_TRAIN])) == 98
    assert set(task.split) == {MEM, RSN_TRAIN, RSN_TEST}


def test_groups_and_paper_defaults():
    cfg = RunConfig()
    task = make_task(cfg.replace(n_samples=2000))
    g = task.groups
    assert list(g["memory"]) == list(range(1, 11))
    assert list(g["reasoning"]) == list(range(11, 21))
    assert list(g["keys"]) == list(range(21, 121))
    assert task.labels.max() <= 160 < cfg.vocab_size


def test_label_distribution(task):
    P, r = task.label_dist(expected=True)
    present = r > 0
    assert np.allclose(P[present].sum(axis=1), 1.0)
    assert np.all(P[~present] == 0)
    mem_rows = P[task.groups["memory"]]
    assert np.array_equal(mem_rows, np.repeat(mem_rows[:1], len(mem_rows), axis=0))
    # Proposition 1: memory anchors see labels uniform on the keys
    uniform = np.zeros(P.shape[1])
    uniform[task.keys] = 1 / len(task.keys)
    assert np.allclose(mem_rows[0], uniform)
    # reasoning anchor s: label mean shifts by one per unit of s
    labels = np.arange(P.shape[1])
    means = P[task.groups["reasoning"]] @ labels
    assert np.all(np.diff(means) > 0)
    assert np.diff(means).mean() == pytest.approx(1.0, abs=0.25)
    # the empirical version is counted from the real labels and also sums to 1
    Pe, _ = task.label_dist(expected=False)
    assert np.allclose(Pe[present].sum(axis=1), 1.0)
    assert not np.array_equal(Pe[1], Pe[2])
    # r_s: fraction of training sequences containing s
    seqs = task.tokens[task.train_indices]
    assert r[11] == pytest.approx(np.mean((seqs == 11).any(axis=1)))


def test_bad_config_is_a_clear_error():
    with pytest.raises(ProbeError, match="vocab_size"):
        RunConfig(vocab_size=100)
    with pytest.raises(ProbeError, match="held_out"):
        RunConfig(held_out="1,2")
    with pytest.raises(ProbeError, match="unknown preset"):
        preset("nope")
