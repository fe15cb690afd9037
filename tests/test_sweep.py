"""Seed sweeps: one command trains a grid (local processes or a Dask cluster, the same table), reuses
finished runs, records failures; sweep-summary gives per-cell intervals; the interval math itself."""
import contextlib
import json
import math
import os

import numpy as np
import pytest

import probe
from probe.analyses.uncertainty import bootstrap_ci, describe, proportion, verdict, wilson

from conftest import run_cli

GRID = ["--grid", "gamma=0.5,0.8", "--grid", "layers=1,2", "--grid", "seed=0:2", "--grid", "steps=20",
        "--grid", "snapshot_every=10"]


@contextlib.contextmanager
def _environ_kept():
    """distributed's Nanny sets OMP_NUM_THREADS=1 and others in this process's os.environ before it
    spawns a worker; put them back, or every later test of this worker (and the CLI processes they
    start) runs single-threaded, which changes last bits of BLAS results compared across processes."""
    saved = dict(os.environ)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    d = tmp_path_factory.mktemp("sweep") / "s"
    res = run_cli("probe-train", "sweep", "--preset", "tiny", *GRID, "--out", d, "--jobs", "2", timeout=600)
    assert res.returncode == 0, res.stderr
    return d, res


def test_one_command_trains_every_grid_point(swept):
    d, res = swept
    manifest = json.loads((d / "sweep.json").read_text())
    assert manifest["grid"] == {"gamma": [0.5, 0.8], "layers": [1, 2], "seed": [0, 1], "steps": [20],
                                "snapshot_every": [10]}
    assert len(manifest["runs"]) == 8 and {r["status"] for r in manifest["runs"]} == {"done"}
    assert all((d / r["path"]).exists() for r in manifest["runs"])
    with probe.Run(d / manifest["runs"][-1]["path"]) as run:
        assert (run.config["gamma"], run.config["layers"], run.config["seed"]) == (0.8, 2, 1)
    assert "8 of 8 runs done" in res.stderr
    # the same command again trains nothing
    stamps = {p: p.stat().st_mtime_ns for p in d.glob("*.h5")}
    again = run_cli("probe-train", "sweep", "--preset", "tiny", *GRID, "--out", d)
    assert again.returncode == 0 and "training" not in again.stderr
    assert {p: p.stat().st_mtime_ns for p in d.glob("*.h5")} == stamps
    # so does the grid in another order: the runs have other labels but the same configuration hash
    pairs = [GRID[i:i + 2] for i in range(0, len(GRID), 2)]
    reordered = [a for pair in reversed(pairs) for a in pair]
    other = run_cli("probe-train", "sweep", "--preset", "tiny", *reordered, "--out", d)
    assert other.returncode == 0 and "training" not in other.stderr, other.stderr
    assert {p: p.stat().st_mtime_ns for p in d.glob("*.h5")} == stamps
    # put the manifest back for the tests below
    assert run_cli("probe-train", "sweep", "--preset", "tiny", *GRID, "--out", d).returncode == 0


def test_summary_per_cell_over_seeds(swept):
    d, _ = swept
    res = probe.sweep_summary(d)
    assert len(res) == 4 and {r.label for r in res} == {"gamma=0.5,layers=1,steps=20,snapshot_every=10",
                                                       "gamma=0.5,layers=2,steps=20,snapshot_every=10",
                                                       "gamma=0.8,layers=1,steps=20,snapshot_every=10",
                                                       "gamma=0.8,layers=2,steps=20,snapshot_every=10"}
    for r in res:
        assert r.step == 20 and len(r.runs) == 2
        vals = []
        for f in r.runs:
            with probe.Run(d / f) as run:
                vals.append(float(run.metrics()["rsn_train"]["acc"][-1]))
        s = r.stats["acc[rsn_train]"]
        assert s["n"] == 2 and s["mean"] == pytest.approx(np.mean(vals))
        assert r.outcomes["acc[rsn_test]>0.5"]["n"] == 2
    out = run_cli("probe", "sweep-summary", d, "--metric", "loss[mem]", "--outcome", "loss[mem]<100",
                  "--format", "csv")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "step,metric,key,value" and any(",P(loss[mem]<100):fraction," in ln for ln in lines)
    table = run_cli("probe", "sweep-summary", d, "--metric", "similarity:distance_corr")
    assert table.returncode == 0 and "similarity:distance_corr" in table.stdout and "vs 1/2" in table.stdout
    # a probe's options in brackets, as the CLI spells them; colons and commas inside are kept
    cells = probe.sweep_summary(d, metric=["similarity(tokens=memory):mean_offdiag",
                                           "similarity(tokens=11:15):mean_offdiag",
                                           "similarity(tokens=11,12,13,14):mean_offdiag"])
    for r in cells:
        for f_, tokens, name in [(r.runs, "memory", "similarity(tokens=memory):mean_offdiag"),
                                 (r.runs, "11:15", "similarity(tokens=11:15):mean_offdiag"),
                                 (r.runs, "11,12,13,14", "similarity(tokens=11,12,13,14):mean_offdiag")]:
            direct = [probe.similarity(d / f, tokens)[-1].summary()["mean_offdiag"] for f in f_]
            assert r.stats[name]["mean"] == pytest.approx(np.mean(direct))
    assert r.stats["similarity(tokens=11:15):mean_offdiag"] == r.stats["similarity(tokens=11,12,13,14):mean_offdiag"]
    for metric, needle in [("similarity(colour=red):mean_offdiag", "'colour=red' is not an option of similarity"),
                           ("similarity(tokens=memory:mean_offdiag", "unknown probe"),
                           ("simlarity:mean_offdiag", "unknown probe 'simlarity'")]:
        bad = run_cli("probe", "sweep-summary", d, "--metric", metric)
        assert bad.returncode == 2 and needle in bad.stderr and bad.stderr.strip().count("\n") == 0, bad.stderr
    bad = run_cli("probe", "sweep-summary", d, "--outcome", "acc[mem]=1")
    assert bad.returncode == 2 and "use A>B" in bad.stderr
    bad = run_cli("probe", "sweep-summary", d.parent)
    assert bad.returncode == 2 and "no sweep manifest" in bad.stderr


@pytest.mark.slow   # CI time (the last CI took 1179 s of 1200): 18 s; a batch on a LocalCluster and a sweep stopped on one stay in the default set
def test_dask_local_cluster_gives_the_same_runs(swept, tmp_path):
    from distributed import LocalCluster

    d, _ = swept
    grid = ["--grid", "gamma=0.5,0.8", "--grid", "seed=0:2", "--grid", "steps=20", "--grid", "snapshot_every=10",
            "--grid", "layers=2"]
    with _environ_kept(), LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=None) as cluster:
        res = run_cli("probe-train", "sweep", "--preset", "tiny", *grid, "--out", tmp_path / "s",
                      "--scheduler", cluster.scheduler_address, timeout=600)
    assert res.returncode == 0, res.stderr
    def cells(folder):
        return {(r.cell["gamma"], r.cell["layers"]): r.stats for r in probe.sweep_summary(folder)}

    local, dask = cells(d), cells(tmp_path / "s")
    assert set(dask) == {(0.5, 2), (0.8, 2)}
    for key, stats in dask.items():   # the same configurations train to the same numbers, wherever they ran
        assert stats == local[key]


def test_a_failing_run_is_a_row_and_the_others_go_on(tmp_path):
    res = run_cli("probe-train", "sweep", "--preset", "lm-tiny", "--grid", "seq_len=32,100000", "--grid", "steps=5",
                  "--out", tmp_path / "f", "--jobs", "1", timeout=600)
    assert res.returncode == 1
    runs = {r["point"]["seq_len"]: r for r in json.loads((tmp_path / "f" / "sweep.json").read_text())["runs"]}
    assert runs[32]["status"] == "done" and runs[100000]["status"] == "failed"
    assert "too short" in runs[100000]["error"]
    with pytest.warns(probe.ProbeWarning, match="1 run\\(s\\) left out"):
        assert len(probe.sweep_summary(tmp_path / "f")) == 1


@pytest.mark.parametrize("args,needle", [
    (["--grid", "gama=1"], "no config field 'gama'"),
    (["--grid", "gamma"], "use field=v1,v2"),
    (["--grid", "gamma=0.3,,0.5"], "empty item"),
    (["--grid", "layers=a"], "'a' is not a int"),
    (["--grid", "gamma=inf"], "--gamma inf: need a finite number"),
    (["--grid", "gamma=0.5", "--grid", "gamma=0.8"], "given twice"),
])
def test_bad_grids_fail_in_one_line_before_training(tmp_path, args, needle):
    res = run_cli("probe-train", "sweep", "--preset", "tiny", *args, "--out", tmp_path / "x")
    assert res.returncode == 2 and res.stderr.strip().count("\n") == 0 and needle in res.stderr, res.stderr
    assert not (tmp_path / "x" / "sweep.json").exists()


def test_interval_math():
    # Wilson 95 %: the textbook values for 8 of 10 and 0 of 5
    lo, hi = wilson(8, 10)
    assert (round(lo, 3), round(hi, 3)) == (0.490, 0.943)
    assert wilson(0, 5)[0] == 0 and round(wilson(0, 5)[1], 3) == 0.434
    assert all(math.isnan(x) for x in wilson(0, 0))
    rng = np.random.default_rng(1)
    x = rng.normal(2.0, 1.0, 400)
    lo, hi = bootstrap_ci(x)
    half = 1.96 * x.std(ddof=1) / np.sqrt(len(x))
    assert lo == pytest.approx(x.mean() - half, abs=0.02) and hi == pytest.approx(x.mean() + half, abs=0.02)
    assert describe([1.0, float("nan"), 3.0])["n"] == 2
    p = proportion([True, True, False, None])
    assert (p["k"], p["n"]) == (2, 3)
    assert verdict(0.6, 0.9, 0.5) == "above" and verdict(0.1, 0.4, 0.5) == "below"
    assert verdict(0.3, 0.7, 0.5) == "not shown"
