"""One writer per output across commands (issue 47, point 1): a batch table and a report page take the
lock a trainer takes for its run file, so a second command on the same output is refused in one line
naming the first; two sweeps into one folder share the work, neither recording the other's runs as
failed. Real processes, paused with SIGSTOP where a moment must be held; each wait is for an event."""
import csv
import json
import os
import signal

import pytest

from conftest import end_all, popen_cli, run_cli
from waiting import committed, wait_for

from probe.files import lock_path


def names_holder(output, process):
    """True once ``output``'s lock file names ``process``: the lock is taken before the holder writes
    its pid into it, so the file's existence alone is a moment too early for the message's pid."""
    try:
        with open(lock_path(output)) as fh:
            return fh.readline().strip() == str(process.pid)
    except FileNotFoundError:
        return False


def test_a_second_batch_on_one_table_is_refused_and_the_first_loses_nothing(tiny_run, tmp_path):
    table = tmp_path / "table.csv"
    first = popen_cli("probe", "batch", tiny_run, "-p", "similarity", "-p", "ood", "--step", "all", "-o", table)
    try:
        wait_for(lambda: names_holder(table, first), "the table's lock", first)
        first.send_signal(signal.SIGSTOP)   # held while the second command tries
        second = run_cli("probe", "batch", tiny_run, "-p", "bias", "-o", table)
        assert second.returncode == 2, second.stderr
        assert f"{table} is being written by process {first.pid}" in second.stderr
        assert "Traceback" not in second.stderr and len(second.stderr.strip().splitlines()) == 1
        first.send_signal(signal.SIGCONT)
        assert first.wait(timeout=300) == 0, first.stderr.read()
    finally:
        end_all(first)
    with open(table, newline="") as fh:
        probes = {r["probe"] for r in csv.DictReader(fh)}
    assert probes == {"similarity", "ood"}   # the first batch's rows, all of them
    again = run_cli("probe", "batch", tiny_run, "-p", "bias", "-o", table)   # the lock went with it
    assert again.returncode == 0, again.stderr


def test_a_watched_page_is_refused_to_a_second_report(tiny_run, tmp_path):
    page = tmp_path / "page.html"
    watcher = popen_cli("probe", "report", tiny_run, "-o", page, "--watch", "-p", "bias")
    try:
        wait_for(lambda: names_holder(page, watcher), "the page's lock", watcher)
        watcher.send_signal(signal.SIGSTOP)
        second = run_cli("probe", "report", tiny_run, "-o", page, "-p", "bias")
        assert second.returncode == 2 and f"{page} is being written by process {watcher.pid}" in second.stderr
        watcher.send_signal(signal.SIGCONT)
        watcher.wait(timeout=300)   # a finished run: the watch ends by itself
    finally:
        end_all(watcher)


@pytest.mark.slow   # 33 s: CI time
def test_two_sweeps_into_one_folder_share_the_work(tmp_path):
    """Sweep A trains its runs one at a time; sweep B, started while A trains the first, leaves that one
    to A and trains the other, and A leaves that one to B. Each says so; nothing is failed; both end with
    exit 0 and the manifest lists every run done."""
    grid = ["--preset", "tiny", "--grid", "seed=0,1", "--grid", "steps=600", "--grid", "snapshot_every=10",
            "-j", "1", "--no-ensemble", "-o", tmp_path]
    a = popen_cli("probe-train", "sweep", *grid)
    b = None
    try:
        wait_for(lambda: committed(tmp_path.glob("seed0-*.h5"), 10), "sweep A training seed 0", a)
        a.send_signal(signal.SIGSTOP)   # so that A is still at its first run when B plans
        b = popen_cli("probe-train", "sweep", *grid)
        wait_for(lambda: committed(tmp_path.glob("seed1-*.h5"), 10), "sweep B training seed 1", b)
        a.send_signal(signal.SIGCONT)
        _, err_b = b.communicate(timeout=600)
        _, err_a = a.communicate(timeout=600)
    finally:
        end_all(a, b)
    assert b.returncode == 0, err_b
    assert a.returncode == 0, err_a
    # B left seed 0 to A (training it, or done by the time B came to it) and trained seed 1; A left seed 1 to B
    said = {run: [ln for ln in err.splitlines() if f"{run}-steps600-snapshotevery10" in ln and "another process" in ln]
            for run, err in (("seed0", err_b), ("seed1", err_a))}
    assert said["seed0"] and said["seed1"], (err_a, err_b)
    assert "done seed1-steps600-snapshotevery10" in err_b and "done seed0-steps600-snapshotevery10" in err_a
    runs = json.loads((tmp_path / "sweep.json").read_text())["runs"]
    assert [r["status"] for r in runs] == ["done", "done"], runs


def test_a_figures_folder_has_one_writer(tmp_path):
    """Another command holds the folder (here the test, through the same lock): probe figures is refused
    in one line naming it, before anything trains."""
    from probe.files import OutputLock

    out = tmp_path / "figs"
    with OutputLock(out):
        res = run_cli("probe", "figures", "p1-accuracy", "--tiny", "-o", out)
    assert res.returncode == 2, res.stderr
    assert f"{out} is being written by process {os.getpid()}" in res.stderr and "Traceback" not in res.stderr
    assert not (out / "runs").exists() or not list((out / "runs").iterdir())
