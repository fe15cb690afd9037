"""probe batch over a folder of checkpoints: sorted tidy table, errors recorded, resume, local and Dask workers."""
import contextlib
import csv
import json
import os

import pytest
import torch

from probe.batch import COLUMNS, batch, discover

from conftest import run_cli

D = 16


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


def nano_checkpoints(d, steps=(10, 2, 5)):
    """nanoGPT checkpoints of one small training in folder ``d``: ``model_STEP.pt``, random weights (seed 0)."""
    torch.manual_seed(0)
    for ep in steps:
        sd = {"transformer.wte.weight": torch.randn(30, D), "transformer.h.0.attn.c_attn.weight": torch.randn(3 * D, D),
              "transformer.h.0.attn.c_proj.weight": torch.randn(D, D),
              "transformer.h.0.mlp.c_fc.weight": torch.randn(4 * D, D),
              "transformer.h.0.mlp.c_proj.weight": torch.randn(D, 4 * D)}
        torch.save({"model": sd, "model_args": {"n_head": 2}}, d / f"model_{ep}.pt")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    d = tmp_path_factory.mktemp("ckpts")
    nano_checkpoints(d)
    (d / "model_7.pt").write_bytes(b"not a checkpoint")
    (d / "notes.txt").write_text("ignored")
    return d


def _rows(path):
    with open(path, newline="") as fh:
        return list(csv.reader(fh))


def test_batch_table_is_sorted_tidy_and_records_errors(folder, tmp_path):
    out = tmp_path / "r.csv"
    res = run_cli("probe", "batch", folder, "--probe", "spectrum", "--probe", "similarity", "--tokens", "1:5",
                  "-o", out)
    assert res.returncode == 1, res.stderr   # a task failed: its error rows are in the table, the exit code says so
    rows = _rows(out)
    assert tuple(rows[0]) == COLUMNS
    steps = [int(r[1]) for r in rows[1:]]
    assert steps == sorted(steps) and set(steps) == {2, 5, 7, 10}
    errors = [r for r in rows[1:] if r[4] == "error"]
    assert len(errors) == 2 and all("model_7.pt" in r[0] and "not a snapshot or checkpoint" in r[5] for r in errors)
    assert any(r[2] == "spectrum" and r[4] == "alpha" and r[3] == "transformer.h.0.attn.c_attn.weight"
               for r in rows[1:])
    # re-running skips finished checkpoints: the table is unchanged, only the failed file is retried
    before = out.read_text()
    res = run_cli("probe", "batch", folder, "--probe", "spectrum", "--probe", "similarity", "--tokens", "1:5",
                  "-o", out)
    assert res.returncode == 1 and out.read_text() == before


def test_an_error_row_of_the_table_is_short_and_stderr_holds_its_message(folder):
    """A failed task's message made every row of the table as wide as itself (358 columns once): the
    row shows its first clause, paths below the working folder are relative, stderr has the whole
    message (and the CSV above keeps it in its column)."""
    res = run_cli("probe", "batch", ".", "--probe", "similarity", "--tokens", "1:5", cwd=folder)
    assert res.returncode == 1, res.stderr
    lines = res.stdout.splitlines()
    assert [ln.split() for ln in lines if " error " in ln] == [["model_7.pt", "7", "similarity", "error", "not", "a",
                                                                "snapshot", "or", "checkpoint"]]
    assert max(map(len, lines)) <= 80, res.stdout
    assert "error: model_7.pt (similarity): not a snapshot or checkpoint: its content is neither HDF5" in res.stderr


def _same(a, b):
    """Same rows; numbers equal up to the last bits that BLAS thread counts may change."""
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x[:5] == y[:5]
        if isinstance(x[5], float):
            assert x[5] == pytest.approx(y[5], rel=1e-9, abs=1e-12, nan_ok=True)
        else:
            assert x[5] == y[5]


def test_jobs_and_dask_give_the_same_table(folder, tmp_path):
    opts = {"tokens": "1:5"}
    one = batch([str(folder)], ["spectrum", "similarity"], opts, jobs=1)
    two = batch([str(folder)], ["spectrum", "similarity"], opts, jobs=2)
    assert len(one) > 50
    _same(one, two)
    from distributed import LocalCluster

    with _environ_kept(), LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=None) as cluster:
        dask_rows = batch([str(folder)], ["spectrum", "similarity"], opts, scheduler=cluster.scheduler_address)
    _same(dask_rows, one)


def test_batch_over_snapshots_and_json_output(tiny_run, tmp_path):
    out = tmp_path / "r.json"
    res = run_cli("probe", "batch", tiny_run, "--probe", "bias", "--probe", "align", "--step", "all", "-o", out)
    assert res.returncode == 0, res.stderr
    rows = json.loads(out.read_text())
    assert {r["probe"] for r in rows} == {"bias", "align"}
    assert len({r["step"] for r in rows}) > 3


def test_batch_bad_input(folder, tmp_path):
    res = run_cli("probe", "batch", folder, "--probe", "nope")
    assert res.returncode == 2 and "unknown probe 'nope'" in res.stderr
    res = run_cli("probe", "batch", tmp_path / "none*.pt", "--probe", "spectrum")
    assert res.returncode == 2 and "no checkpoint matches" in res.stderr
    res = run_cli("probe", "batch", folder, "--probe", "spectrum", "-o", tmp_path / "x.txt")
    assert res.returncode == 2 and ".csv or .json" in res.stderr
    res = run_cli("probe", "batch", folder, "--probe", "spectrum", "--scheduler", "tcp://127.0.0.1:9")
    assert res.returncode == 2 and "cannot reach the Dask scheduler" in res.stderr
    assert [p.rsplit("/", 1)[-1] for p in discover([str(folder)])] == ["model_10.pt", "model_2.pt", "model_5.pt",
                                                                        "model_7.pt"]


def test_folder_of_plain_state_dicts_of_an_unknown_layout(tmp_path):
    """A paper's model_{epoch}.pt files: spectrum needs no layout; similarity needs a mapping file."""
    torch.manual_seed(1)
    for ep in (3, 1):
        torch.save({"emb.weight": torch.randn(20, 8), "fc1.weight": torch.randn(32, 8), "fc1.bias": torch.zeros(32),
                    "fc2.weight": torch.randn(20, 32)}, tmp_path / f"model_{ep}.pt")
    rows = batch([str(tmp_path)], ["spectrum"], {})
    assert [r[1] for r in rows] == sorted(r[1] for r in rows) and {r[1] for r in rows} == {1, 3}
    assert {r[3] for r in rows} == {"emb.weight", "fc1.weight", "fc2.weight"}
    assert not any(r[4] == "error" for r in rows)
    mapping = tmp_path / "map.json"
    mapping.write_text(json.dumps({"token_embedding": "emb.weight"}))
    res = run_cli("probe", "batch", tmp_path, "--probe", "similarity", "--tokens", "0:5", "--mapping", mapping,
                  "--format", "csv")
    assert res.returncode == 0, res.stderr
    assert "error" not in res.stdout and res.stdout.count("distance_corr") == 2
    res = run_cli("probe", "similarity", tmp_path / "model_1.pt", "--tokens", "0:5")
    assert res.returncode == 2 and "unknown checkpoint layout; tensors found: emb.weight" in res.stderr
