"""A real Dask cluster at fault (issue 47, points 3 and 5): a ``dask scheduler`` and ``dask worker``
processes of their own, killed as a machine or an operator would. A killed worker's tasks are recomputed
(Dask's own semantics: the batch finishes); a killed scheduler ends the batch or the sweep with one
``Error:`` line, everything finished kept, and the same command then does the rest, every row and run
exactly once. A port that accepts and never answers ends within the bound ``--scheduler-timeout`` sets.
Each wait is for an event (a file, a row, a worker registered)."""
import csv
import json
import re
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from conftest import end_all, linked_runs, popen_cli, run_cli
from test_signals import descendants, still_running
from waiting import DEADLINE, committed, wait_for

DASK = str(Path(sys.executable).with_name("dask"))
N_RUNS = 8


class Cluster:
    """A scheduler and ``workers`` worker processes (no nanny: a killed worker stays dead), each its own
    process group, ended when the test ends."""

    def __init__(self, folder: Path, workers: int):
        self.file = folder / "scheduler.json"
        log = open(folder / "cluster.log", "w")
        self.scheduler = subprocess.Popen([DASK, "scheduler", "--scheduler-file", self.file, "--port", "0",
                                           "--no-dashboard", "--host", "127.0.0.1"], stdout=log, stderr=log)
        wait_for(lambda: self.file.exists() and self.file.stat().st_size, "the scheduler's address", self.scheduler)
        self.address = json.loads(self.file.read_text())["address"]
        self.workers = [subprocess.Popen([DASK, "worker", self.address, "--nthreads", "1", "--no-nanny",
                                          "--no-dashboard"], stdout=log, stderr=log) for _ in range(workers)]
        from distributed import Client

        try:
            with Client(self.address, timeout="60s") as client:   # every worker registered: an event, not a delay
                client.wait_for_workers(workers, timeout=DEADLINE)
        except BaseException:   # a cluster that did not come up is not left running
            self.end()
            raise

    def end(self) -> None:
        end_all(self.scheduler, *self.workers)


@pytest.fixture
def cluster(tmp_path):
    made = []

    def start(workers: int = 1) -> Cluster:
        folder = tmp_path / f"cluster-{len(made)}"   # a scheduler file of its own
        folder.mkdir()
        c = Cluster(folder, workers)
        made.append(c)
        return c

    yield start
    for c in made:
        c.end()


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return linked_runs(tmp_path_factory.mktemp("many"), N_RUNS)


def _rows(table: Path) -> list[tuple]:
    if not table.exists():
        return []
    with open(table, newline="") as fh:
        return [(r["path"], r["probe"], r["step"], r["metric"], r["key"]) for r in csv.DictReader(fh)]


def _batch(runs: Path, table: Path, *extra) -> list:
    return ["batch", *sorted(map(str, runs.glob("*.h5"))), "-p", "ood", "--step", "all", "-o", table, *extra]


def _complete(table: Path, runs: Path) -> list[tuple]:
    rows = _rows(table)
    assert len(rows) == len(set(rows)), "a row written twice"
    assert {r[0] for r in rows} == {str(p) for p in runs.glob("*.h5")}
    assert not [r for r in rows if r[3] == "error"]
    return rows


def _killed_mid_batch(runs, table, c: Cluster, victim) -> tuple[int, str]:
    """A batch on ``c``, ``victim`` (one of its processes) killed once the first rows are on disk: the
    batch's exit code and stderr."""
    proc = popen_cli("probe", *_batch(runs, table, "--scheduler", c.address))
    try:
        wait_for(lambda: _rows(table), "the first rows on disk", proc)
        victim.kill()
        _, err = proc.communicate(timeout=DEADLINE)
    finally:
        end_all(proc)
    return proc.returncode, err


@pytest.mark.slow
def test_a_killed_worker_is_replaced_by_dask_and_the_batch_finishes(cluster, runs, tmp_path):
    c = cluster(workers=2)
    table = tmp_path / "table.csv"
    code, err = _killed_mid_batch(runs, table, c, c.workers[0])
    assert code == 0, err
    assert "Traceback" not in err
    _complete(table, runs)


@pytest.mark.slow
def test_a_killed_scheduler_ends_the_batch_in_one_line_and_the_rerun_completes(cluster, runs, tmp_path):
    c = cluster(workers=1)
    table = tmp_path / "table.csv"
    code, err = _killed_mid_batch(runs, table, c, c.scheduler)
    c.end()
    assert code == 2, err
    assert "Traceback" not in err and "unexpected" not in err
    line = err.strip().splitlines()[-1]
    m = re.fullmatch(rf"Error: lost the Dask scheduler at {re.escape(c.address)} \(\w+\): (\d+) of {N_RUNS} tasks "
                     rf"done; their rows are in {re.escape(str(table))}: the same command does the rest", line)
    assert m, err
    kept = _rows(table)
    assert len({r[0] for r in kept}) == int(m.group(1)) < N_RUNS
    again = cluster(workers=1)
    res = run_cli("probe", *_batch(runs, table, "--scheduler", again.address))
    assert res.returncode == 0, res.stderr
    assert set(kept) <= set(_complete(table, runs))


SWEEP = ["--preset", "tiny", "--grid", "seed=0,1", "--grid", "steps=600", "--grid", "snapshot_every=20", "--no-ensemble"]


@pytest.mark.slow
def test_a_killed_scheduler_ends_the_sweep_in_one_line_and_the_rerun_trains_the_rest(cluster, tmp_path):
    c = cluster(workers=2)
    out = tmp_path / "sweep"
    proc = popen_cli("probe-train", "sweep", *SWEEP, "--out", out, "--scheduler", c.address)
    try:
        wait_for(lambda: len(list(out.glob("*.h5"))) == 2 and committed(out.glob("*.h5")),
                 "a committed step in both runs", proc)
        c.scheduler.kill()
        _, err = proc.communicate(timeout=DEADLINE)
    finally:
        end_all(proc)
    kids = {pid: v for w in c.workers for pid, v in descendants(w.pid).items()}
    c.end()   # the cluster gone: its workers' trainers stop at a step boundary, their files resumable
    wait_for(lambda: not still_running(kids), "the trainers' end")
    assert proc.returncode == 2, err
    assert "Traceback" not in err and "unexpected" not in err
    assert re.fullmatch(rf"Error: lost the Dask scheduler at {re.escape(c.address)} \(\w+\): \d of 2 runs done; "
                        r"their files are kept, and the same command on a running cluster trains the rest",
                        err.strip().splitlines()[-1]), err
    res = run_cli("probe-train", "sweep", *SWEEP, "--out", out, "--jobs", "2", timeout=DEADLINE)
    assert res.returncode == 0, res.stderr
    manifest = json.loads((out / "sweep.json").read_text())
    assert [r["status"] for r in manifest["runs"]] == ["done", "done"]
    assert len(list(out.glob("*.h5"))) == 2


def test_a_port_that_never_answers_ends_within_the_bound(tiny_run, tmp_path):
    """A server that accepts every connection and says nothing (a half-dead host, a firewall's tarpit)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    held, stop = [], threading.Event()

    def accept():
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    address = f"tcp://127.0.0.1:{server.getsockname()[1]}"
    try:
        batch = run_cli("probe", "batch", tiny_run, "-p", "bias", "--scheduler", address, "--scheduler-timeout", "1")
        sweep = run_cli("probe-train", "sweep", "--preset", "tiny", "--grid", "seed=0", "-o", tmp_path / "never",
                        "--scheduler", address, "--scheduler-timeout", "1")
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        server.close()
    for res in (batch, sweep):
        assert res.returncode == 2, res.stderr
        assert res.stderr.strip() == (f"Error: the server at {address} did not answer as a Dask scheduler within 2 s "
                                      "(--scheduler-timeout waits longer)")
    assert not list((tmp_path / "never").glob("*.h5"))
