"""The math of each probe on arrays whose answer is known."""
import numpy as np
import pytest
import torch

from probe.analyses.align import align, factored_svd
from probe.analyses.attention import attention_stats
from probe.analyses.bias import reasoning_bias
from probe.analyses.condense import condense, covariance_eigenvalues, effective_rank, neuron_groups
from probe.analyses.ood import loss_acc
from probe.analyses.pca import pca
from probe.analyses.theory import label_cosine, reconstruct, theory


def test_factored_svd_equals_svd_of_the_product():
    rng = np.random.default_rng(0)
    A, B = rng.standard_normal((50, 8)), rng.standard_normal((8, 40))
    U, S, Vt = factored_svd(A, B)
    assert np.allclose(S, np.linalg.svd(A @ B, compute_uv=False)[:8])
    assert np.allclose((U * S) @ Vt, A @ B)


@pytest.mark.parametrize("k,d", [(10, 30), (60, 12)])
def test_covariance_eigenvalues_match_numpy_cov(k, d):
    X = np.random.default_rng(1).standard_normal((k, d))
    want = np.sort(np.linalg.eigvalsh(np.cov(X, rowvar=False)))[::-1]
    got = covariance_eigenvalues(X)
    assert np.allclose(got[: min(k - 1, d)], want[: min(k - 1, d)])


def test_effective_rank_and_condensed_neurons():
    assert effective_rank(np.ones(8)) == pytest.approx(8)
    assert effective_rank(np.array([1.0, 0, 0])) == pytest.approx(1)
    rng = np.random.default_rng(2)
    base = rng.standard_normal((2, 16))
    W = np.vstack([base[0] + 0.01 * rng.standard_normal((5, 16)), base[1] + 0.01 * rng.standard_normal((3, 16)),
                   rng.standard_normal((2, 16))])
    _, groups = neuron_groups(W, 0.7)
    assert [len(g) for g in groups][:2] == [5, 3]
    r = condense(W, neurons=W, neuron_tensor="W", layers={"W": W, "per_head": np.stack([W, W])})
    assert r.neuron_group_sizes[:2] == [5, 3]
    assert r.layer_singular_values["per_head"].shape == (2, 10)
    assert r.top_share[1] > 0.4 and set(r.summary()) >= {"eig1", "top1_share", "effective_rank"}


def test_attention_stats_uniform_and_peaked():
    T = 6
    uniform = np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None]
    A = np.broadcast_to(uniform, (1, 1, 3, T, T))
    r = attention_stats(A, key_pos=np.array([1, 2, 3]), n_anchors=2)
    assert r.avg_dev[0, 0] == pytest.approx(0)
    assert r.entropy_ratio[0, 0] == pytest.approx(1)
    assert r.last_to_key[0, 0] == pytest.approx(1 / T)
    peaked = np.zeros((1, 1, 3, T, T))
    peaked[..., np.arange(T), 0] = 1.0  # everything looks at position 0
    r = attention_stats(peaked, key_pos=np.array([0, 0, 0]))
    assert r.entropy_ratio[0, 0] == pytest.approx(0, abs=1e-9)
    assert r.last_to_key[0, 0] == 1.0 and r.last_to_anchors[0, 0] == 0.0


def test_pca_orders_a_line_and_an_arc():
    ids = np.arange(10, 20)
    rng = np.random.default_rng(3)
    line = np.outer(ids, rng.standard_normal(8)) + 0.01 * rng.standard_normal((10, 8))
    t = np.linspace(0, np.pi, 10)
    arc = np.stack([np.cos(t), np.sin(t)], 1) @ rng.standard_normal((2, 8))
    shuffled = rng.permutation(10)
    X = np.vstack([line, arc[shuffled]])
    r = pca(X, np.concatenate([ids, ids]), ["line"] * 10 + ["arc"] * 10)
    assert r.order_pc1["line"] == pytest.approx(1.0)
    assert r.order_arc["arc"] < 0.9  # shuffled ids: no order
    r2 = pca(arc, ids, ["arc"] * 10)
    assert r2.order_arc["arc"] == pytest.approx(1.0)
    assert r2.explained.sum() == pytest.approx(1.0)


def test_align_finds_the_embedding_direction_of_a_rank_one_value_map():
    rng = np.random.default_rng(4)
    d, e = 32, 8
    u = rng.standard_normal(d)
    W_V = np.outer(u, rng.standard_normal(e)) + 1e-3 * rng.standard_normal((d, e))
    E = rng.standard_normal((20, d))
    E[:5] = u + 0.01 * rng.standard_normal((5, d))      # 'reasoning' tokens along u
    r = align(W_V, rng.standard_normal((e, d)), E, {"reasoning": np.arange(5), "memory": np.arange(5, 20)})
    assert r.group_mean["reasoning"][0] > 0.99
    assert r.group_mean["memory"][0] < 0.5
    assert r.sv1_share > 0.99
    assert "cos" not in r.to_dict()


def test_theory_on_shifted_label_distributions():
    V = 60
    labels = np.arange(V)
    P = np.zeros((V, V))
    ids = np.arange(11, 21)
    for s in ids:
        P[s] = np.exp(-((labels - 25 - s) ** 2) / 12.0)
        P[s] /= P[s].sum()
    C = label_cosine(P, ids)
    assert C[0, 1] > C[0, 5] > C[0, 9]  # a band
    W = reconstruct(ids, ["reasoning"] * 10, V, d_m=64, gamma=0.8)
    assert W.shape == (10, V)
    r = theory(P[ids] - 1.0 / V, P, ids, ["reasoning"] * 10, anchor=15, d_m=64, gamma=0.8)
    assert r.pearson_r == pytest.approx(1.0)
    assert r.max_abs_diff < 1e-9
    assert r.profile_r > 0.8


def test_bias_and_loss_acc():
    b = reasoning_bias(np.array([2.0, 3.0]), np.array([1.0, 1.0]), np.array([0, 10]), "mem", "rsn")
    assert [x.delta_L for x in b] == [1.0, 2.0] and b[1].step == 10
    logits = np.random.default_rng(5).standard_normal((7, 5)).astype(np.float32)
    y = np.array([0, 1, 2, 3, 4, 0, 1])
    loss, acc = loss_acc(logits, y)
    assert loss == pytest.approx(torch.nn.functional.cross_entropy(torch.tensor(logits), torch.tensor(y)).item(),
                                 rel=1e-5)
    assert acc == pytest.approx(np.mean(logits.argmax(1) == y))


def test_spectrum_metrics_match_their_definitions():
    from probe.analyses.spectrum import layer_spectrum, powerlaw_alpha

    rng = np.random.default_rng(6)
    W = rng.standard_normal((80, 30))
    s = np.linalg.svd(W, compute_uv=False)
    l = layer_spectrum("W", W)
    assert l.spectral_norm == pytest.approx(s[0] ** 2)
    assert l.norm == pytest.approx((W ** 2).sum())
    assert l.log_norm == pytest.approx(np.log10((W ** 2).sum()))
    assert l.stable_rank == pytest.approx((W ** 2).sum() / s[0] ** 2)
    assert layer_spectrum("W", W.T).alpha == pytest.approx(l.alpha)   # orientation does not matter
    # a Pareto tail with density exponent alpha = 2.5 is recovered
    x = (1 - rng.random(4000)) ** (-1 / 1.5)
    alpha, xmin, xmax, ks = powerlaw_alpha(x)
    assert alpha == pytest.approx(2.5, abs=0.15)
    assert xmin >= x.min() and xmax == x.max() and 0 <= ks < 0.1


def _brute_cohesion(X, labels):
    """Mean cosine over ordered pairs of distinct rows, per pair of groups, from the full matrix."""
    u = X / np.where(np.linalg.norm(X, axis=1, keepdims=True) > 0, np.linalg.norm(X, axis=1, keepdims=True), 1)
    C = u @ u.T
    groups = list(dict.fromkeys(labels))
    lab = np.array([groups.index(g) for g in labels])
    M = np.zeros((len(groups), len(groups)))
    for i in range(len(groups)):
        for j in range(len(groups)):
            mask = (lab[:, None] == i) & (lab[None, :] == j) & ~np.eye(len(labels), dtype=bool)
            M[i, j] = C[mask].mean() if mask.any() else np.nan
    off = lab[:, None] != lab[None, :]
    same = (lab[:, None] == lab[None, :]) & ~np.eye(len(labels), dtype=bool)
    return groups, M, C[same].mean() - C[off].mean()


def test_cohesion_equals_the_full_cosine_matrix_averaged_by_group():
    from probe.analyses.cohesion import cohesion

    rng = np.random.default_rng(3)
    X = rng.standard_normal((30, 7))
    X[4] = 0.0                                                 # a zero vector: cosine 0 with everything
    labels = ["a"] * 10 + ["b"] * 15 + ["c"] * 4 + ["d"]       # "d": a group of one token
    res = cohesion(X, labels, step=5, ids=np.arange(100, 130))
    groups, M, sep = _brute_cohesion(X, labels)
    assert res.groups == groups and res.sizes == [10, 15, 4, 1] and res.step == 5
    np.testing.assert_allclose(res.matrix, M, rtol=1e-10, atol=1e-12)
    assert np.isnan(res.matrix[3, 3])
    assert res.separation == pytest.approx(sep, rel=1e-10)
    assert res.warnings == ["1 zero vector(s) (cosine 0 with every vector): token(s) 104"]
    s = res.summary()
    assert s["within[a]"] == pytest.approx(M[0, 0]) and s["between[a|b]"] == pytest.approx(M[0, 1])


def test_cohesion_of_alike_and_of_opposite_groups():
    from probe.analyses.cohesion import cohesion

    e = np.eye(3)
    X = np.vstack([e[0] * 2, e[0] * 3, -e[0], -e[0] * 5])      # a: along +x, b: along -x
    res = cohesion(X, ["a", "a", "b", "b"])
    np.testing.assert_allclose(res.matrix, [[1, -1], [-1, 1]])
    assert res.separation == pytest.approx(2.0)
    assert np.isnan(cohesion(X, ["a"] * 4).separation)         # one group: nothing to separate from
