import numpy as np
import pytest
from scipy.stats import spearmanr

from probe.analyses.stats import cosine_matrix, spearman
from probe.analyses.similarity import cosine_similarity


def test_cosine_matrix_matches_definition():
    rng = np.random.default_rng(0)
    v = rng.standard_normal((7, 5))
    m = cosine_matrix(v)
    for i in range(7):
        for j in range(7):
            want = v[i] @ v[j] / np.linalg.norm(v[i]) / np.linalg.norm(v[j])
            assert m[i, j] == pytest.approx(want)
    z = cosine_matrix(np.vstack([v[:2], np.zeros(5)]))
    assert np.all(z[2] == 0)


def test_spearman_matches_scipy_with_ties():
    rng = np.random.default_rng(1)
    x = rng.integers(0, 5, 200)
    y = rng.standard_normal(200) - x
    assert spearman(x, y) == pytest.approx(spearmanr(x, y).statistic)


def test_band_vs_uniform_structure():
    ids = np.arange(11, 21)
    # an ordered curve (a "number line"): neighbours alike, far tokens not
    angles = (ids - 11) * 0.3
    line = np.stack([np.cos(angles), np.sin(angles)], 1)
    band = cosine_similarity(line, ids)
    assert band.distance_corr < -0.99
    assert band.by_distance[1] > band.by_distance[9]
    # a shared direction plus small noise: uniformly similar, no band
    rng = np.random.default_rng(2)
    common = np.ones(16) + 0.05 * rng.standard_normal((10, 16))
    uni = cosine_similarity(common, ids)
    assert uni.mean_offdiag > 0.95 and uni.std_offdiag < 0.05
    assert abs(uni.distance_corr) < 0.5
    d = uni.to_dict()
    assert d["ids"] == ids.tolist() and len(d["matrix"]) == 10


def test_blocked_summary_equals_the_full_computation():
    from probe.analyses.similarity import cosine_similarity_blocked

    rng = np.random.default_rng(7)
    ids = np.arange(100, 400)
    X = rng.standard_normal((300, 16)) + np.outer(np.sin(ids / 30.0), np.ones(16))
    full = cosine_similarity(X, ids)
    blocked = cosine_similarity_blocked(X, ids, block=37, sample_pairs=40_000)
    assert blocked.matrix is None
    assert blocked.mean_offdiag == pytest.approx(full.mean_offdiag, abs=1e-6)
    assert blocked.std_offdiag == pytest.approx(full.std_offdiag, abs=1e-6)
    assert blocked.by_distance.keys() == full.by_distance.keys()
    assert all(blocked.by_distance[d] == pytest.approx(full.by_distance[d], abs=1e-5) for d in full.by_distance)
    assert blocked.distance_corr == pytest.approx(full.distance_corr, abs=0.03)   # sampled pairs
