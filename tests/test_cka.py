"""probe cka: linear CKA (Kornblith et al. 2019) against an independent numpy computation, on random
matrices and on two real runs, through the API and the command line."""
import json

import numpy as np
import pytest

import probe
from conftest import run_cli
from probe.analyses.cka import linear_cka


def hsic_cka(X, Y):
    """CKA written the other way: HSIC with the centring matrix H, tr(K H L H) / sqrt(tr(K H K H) tr(L H L H))."""
    n = len(X)
    H = np.eye(n) - np.ones((n, n)) / n
    K, L = X @ X.T, Y @ Y.T

    def hsic(A, B):
        return np.trace(A @ H @ B @ H)
    return hsic(K, L) / np.sqrt(hsic(K, K) * hsic(L, L))


@pytest.mark.parametrize("n,p,q", [(10, 16, 8), (200, 5, 7)])   # the Gram form and the feature form
def test_linear_cka_is_the_hsic_formula(n, p, q):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, p))
    Y = X[:, :min(p, q)] @ rng.standard_normal((min(p, q), q)) + 0.5 * rng.standard_normal((n, q))
    assert linear_cka(X, Y).cka == pytest.approx(hsic_cka(X, Y), rel=1e-10)
    if n > p + q:   # (with few tokens, unrelated matrices are alike by chance: CKA's known small-n bias)
        assert linear_cka(X, rng.standard_normal((n, q))).cka < 0.2 < linear_cka(X, Y).cka


def test_a_rotation_and_scale_give_one_and_a_constant_is_undefined():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((12, 6))
    Q, _ = np.linalg.qr(rng.standard_normal((6, 6)))
    assert linear_cka(X, 3.0 * X @ Q + 7.0).cka == pytest.approx(1.0)
    res = linear_cka(X, np.ones((12, 4)))
    assert np.isnan(res.cka) and res.warnings


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    out = tmp_path_factory.mktemp("cka")
    paths = []
    for seed in (0, 1):
        path = out / f"s{seed}.h5"
        res = run_cli("probe-train", "--preset", "tiny", "--seed", seed, "--out", path, "--quiet", "--threads", "1")
        assert res.returncode == 0, res.stderr
        paths.append(path)
    return paths


def test_two_runs_match_numpy_on_the_stored_rows(two_runs):
    a, b = two_runs
    res = probe.cka(a, b, tokens="reasoning", step="all")
    with probe.Run(a) as ra, probe.Run(b) as rb:
        ids = np.asarray(ra.groups["reasoning"])
        assert len(res) == len(ra.steps)
        for i, r in enumerate(res):
            X = np.asarray(ra.tensor("token_embedding")[i], dtype=np.float64)[ids]
            Y = np.asarray(rb.tensor("token_embedding")[i], dtype=np.float64)[ids]
            assert (r.step, r.step_b, r.n) == (ra.steps[i], rb.steps[i], len(ids))
            assert r.cka == pytest.approx(hsic_cka(X - X.mean(0), Y - Y.mean(0)), rel=1e-9)


def test_two_steps_of_one_run_and_the_command_line(two_runs):
    a, _ = two_runs
    res = probe.cka(a, step="all", step_b="latest")
    assert res[-1].cka == pytest.approx(1.0) and all(r.step_b == res[-1].step for r in res)
    out = run_cli("probe", "cka", a, "--step", "all", "--step-b", "latest", "--format", "json")
    assert out.returncode == 0, out.stderr
    got = [r["cka"] for r in json.loads(out.stdout)["results"]]
    assert got == pytest.approx([r.cka for r in res])


def test_one_model_alone_is_one_line_and_exit_2(two_runs):
    res = run_cli("probe", "cka", two_runs[0])
    assert res.returncode == 2 and res.stderr.strip().splitlines() == [
        "Error: cka compares two models: give a second run, or a second step of the same run with --step-b"]
    res = run_cli("probe", "cka", two_runs[0], two_runs[1], "--step", "all", "--step-b", "0,1")
    assert res.returncode == 2 and "--step-b selects 2 steps of run B" in res.stderr
