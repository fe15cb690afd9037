"""Distributed faults are one line each and lose nothing (issue 47, point 3): a local worker killed
outright (as the OOM killer does), a scheduler address that is not one, a server that is no Dask
scheduler, a configuration too big to allocate. Each ends with one ``Error:`` line, exit 2, every
finished row kept, and the same command then does the rest. Real processes and real kills; each wait
is for an event. A real Dask cluster's faults: test_faults_cluster.py."""
import csv
import os
import signal
import socket
import threading

import pytest

from conftest import end_all, linked_runs, popen_cli, run_cli
from waiting import wait_for

N_COPIES = 6


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Six names for one 56-snapshot run."""
    return linked_runs(tmp_path_factory.mktemp("many"), N_COPIES)


def _children(pid: int) -> list[int]:
    kids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if ppid == pid:
                kids.append(int(entry))
    return kids


def _workers(pid: int) -> list[int]:
    """The batch's spawned pool workers (not the resource tracker)."""
    out = []
    for kid in _children(pid):
        try:
            with open(f"/proc/{kid}/cmdline", "rb") as fh:
                cmd = fh.read().replace(b"\0", b" ")
        except OSError:
            continue
        if b"spawn_main" in cmd:
            out.append(kid)
    return out


def _rows(table) -> list[tuple]:
    if not os.path.exists(table):
        return []
    with open(table, newline="") as fh:
        return [(r["path"], r["probe"], r["step"], r["metric"], r["key"]) for r in csv.DictReader(fh)]


def test_a_killed_pool_worker_is_one_line_and_the_rerun_completes(runs, tmp_path):
    table = tmp_path / "table.csv"
    args = ["batch", *sorted(map(str, runs.glob("*.h5"))), "-p", "ood", "--step", "all", "--jobs", "2", "-o", table]
    proc = popen_cli("probe", *args)
    try:
        workers = wait_for(lambda: len(_workers(proc.pid)) == 2 and _workers(proc.pid), "two pool workers", proc)
        wait_for(lambda: _rows(table), "the first rows on disk", proc)
        os.kill(workers[0], signal.SIGKILL)   # what the OOM killer does
        _, err = proc.communicate(timeout=300)
    finally:
        end_all(proc)
    lines = err.strip().splitlines()
    assert proc.returncode == 2, err
    assert "Traceback" not in err and "unexpected" not in err
    assert lines[-1].startswith("Error: a worker process died (killed by a signal or for lack of memory")
    assert f"tasks done; their rows are in {table}: the same command does the rest" in lines[-1]
    kept = _rows(table)
    assert kept
    res = run_cli("probe", *args)
    assert res.returncode == 0, res.stderr
    rows = _rows(table)
    assert len(rows) == len(set(rows)) and set(kept) <= set(rows)   # every row once, none lost
    assert {r[0] for r in rows} == {str(p) for p in runs.glob("*.h5")}


@pytest.mark.parametrize("address", ["not a url", "tcp://", "tcp://127.0.0.1:notaport"])
def test_a_scheduler_address_that_is_not_one_is_one_line(tiny_run, address):
    res = run_cli("probe", "batch", tiny_run, "-p", "bias", "--scheduler", address, timeout=120)
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr and "unexpected" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr


def test_a_server_that_is_no_dask_scheduler_is_one_line(tiny_run):
    """A server that answers every connection with HTTP text, not Dask's protocol."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    stop = threading.Event()

    def answer():
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n" * 64)

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    try:
        res = run_cli("probe", "batch", tiny_run, "-p", "bias", "--scheduler", f"tcp://127.0.0.1:{port}",
                      timeout=180)
    finally:
        stop.set()
        thread.join()
        server.close()
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr and "unexpected" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr


def test_a_configuration_too_big_for_the_machine_is_one_line(tmp_path):
    """A width whose first weight matrix (300,000² floats, 335 GiB) no machine here can hold: the
    allocation fails, and that is the user's configuration, not a bug; no file is left behind."""
    res = run_cli("probe-train", "--preset", "tiny", "--d-model", "300000", "--out", tmp_path / "wide.h5")
    assert res.returncode == 2, res.stderr
    assert res.stderr.strip() == ("Error: out of memory (335.3 GiB asked at once): more than this machine can hold; "
                                  "a smaller configuration (a narrower or shallower model, a smaller batch) or fewer "
                                  "jobs at once needs less")
    assert not list(tmp_path.iterdir())
