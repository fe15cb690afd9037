"""Reruns bring a batch table up to date (issue 47, point 4), as make does: an input whose file changed
since its rows were read (size, time or last step; the record ``OUT.inputs.json``) is read again, its
old rows replaced and the number said; an unchanged one is not; no row is ever written twice. (A reader
of a live run takes one view, count and steps from one moment: test_snapshot.py.)"""
import csv
import os
import re
import resource

import pytest

from conftest import run_cli


def _train(out, *extra):
    res = run_cli("probe-train", "--preset", "tiny", "--steps", "80", "--snapshot-every", "20", "--threads", "1",
                  "--quiet", "--out", out, *extra)
    assert res.returncode == 0, res.stderr


def _rows(table) -> list[tuple]:
    with open(table, newline="") as fh:
        return [tuple(r.values()) for r in csv.DictReader(fh)]


def _batch(table, *paths, probes=("bias", "norms")):
    res = run_cli("probe", "batch", *paths, *(a for p in probes for a in ("-p", p)), "--step", "all", "-o", table)
    assert res.returncode == 0, res.stderr
    return res.stderr


def _changed(table, inputs: int, rows: int) -> str:
    return (f"warning: {inputs} input{'s' * (inputs > 1)} changed since {'their' if inputs > 1 else 'its'} rows in "
            f"{table} were written (size, time or last step): {rows} rows are read again")


@pytest.fixture
def stopped(tmp_path):
    """A run stopped at step 40 of 80, as a batch finds one still training."""
    run = tmp_path / "run.h5"
    _train(run, "--stop-at", "40")
    return run


def test_a_run_that_trained_on_is_read_again_and_its_rows_replaced(stopped, tmp_path):
    table, fresh = tmp_path / "table.csv", tmp_path / "fresh.csv"
    _batch(table, stopped)
    old = _rows(table)
    assert max(int(r[1]) for r in old) == 40
    _train(stopped, "--resume")
    err = _batch(table, stopped)
    assert err.splitlines()[0] == _changed(table, 1, len(old))
    _batch(fresh, stopped)
    rows = _rows(table)
    assert len(rows) == len(set(rows))                 # no row twice
    assert sorted(rows) == sorted(_rows(fresh))        # the table a batch of the finished run writes
    assert max(int(r[1]) for r in rows) == 80


def test_an_unchanged_input_is_not_read_again(stopped, tmp_path):
    table = tmp_path / "table.csv"
    _batch(table, stopped)
    before = table.read_bytes()
    err = _batch(table, stopped)
    assert "warning" not in err and table.read_bytes() == before


def test_only_the_changed_input_is_read_again_and_the_others_rows_stay(stopped, tmp_path):
    other = tmp_path / "other.h5"
    _train(other)
    table = tmp_path / "table.csv"
    _batch(table, stopped, other)
    kept = [r for r in _rows(table) if r[0] == str(other)]
    unchanged = [r for r in _rows(table) if r[0] == str(stopped)]
    os.replace(other, tmp_path / "moved.h5")           # a run replaced by another under the same name
    _train(other, "--gamma", "0.3")
    err = _batch(table, stopped, other)
    assert err.splitlines()[0] == _changed(table, 1, len(kept))
    rows = _rows(table)
    assert len(rows) == len(set(rows))
    assert [r for r in rows if r[0] == str(stopped)] == unchanged
    assert sorted(r for r in rows if r[0] == str(other)) != sorted(kept)   # the new run's numbers


def test_a_probe_not_asked_for_again_keeps_its_rows_and_its_record(stopped, tmp_path):
    """Rows of a probe this rerun does not run stay, and stay marked as read from the old file: the next
    rerun that asks for that probe reads it again."""
    table = tmp_path / "table.csv"
    _batch(table, stopped)
    norms = [r for r in _rows(table) if r[2] == "norms"]
    _train(stopped, "--resume")
    _batch(table, stopped, probes=("bias",))
    assert [r for r in _rows(table) if r[2] == "norms"] == norms
    err = _batch(table, stopped)
    assert err.splitlines()[0] == _changed(table, 1, len(norms))
    assert max(int(r[1]) for r in _rows(table) if r[2] == "norms") == 80


def test_a_table_without_its_record_is_read_again_whole(stopped, tmp_path):
    table = tmp_path / "table.csv"
    _batch(table, stopped)
    n = len(_rows(table))
    os.unlink(f"{table}.inputs.json")   # a table from before the record, or the record lost
    err = _batch(table, stopped)
    assert err.splitlines()[0] == _changed(table, 1, n)
    assert len(_rows(table)) == n


def test_a_record_that_cannot_be_written_says_the_table_is_and_a_rerun_reads_its_rows_again(stopped, tmp_path):
    """The table written and its record refused (here a folder in the record's place): the error said
    "holds the rows of 0 of 2 tasks" of a table that held both; it says what the table holds, and the
    rerun, with no record of the rows, reads them again, each row once."""
    table = tmp_path / "table.csv"
    os.mkdir(f"{table}.inputs.json")
    res = run_cli("probe", "batch", stopped, "-p", "bias", "-p", "norms", "--step", "all", "-o", table)
    assert res.returncode != 0 and res.stdout == ""
    line = res.stderr.strip()
    # (the first save comes after the first task: it is the one refused)
    assert "\n" not in line and re.fullmatch(
        rf"Error: is a directory while writing batch record {re.escape(str(table))}.inputs.json; "
        rf"{re.escape(str(table))} holds the rows of 1 of 2 tasks, without the record of what they were read "
        "from: the same command reads them again once it can write there", line), line
    n = len(_rows(table))
    assert n and {r[2] for r in _rows(table)} == {"bias"}
    os.rmdir(f"{table}.inputs.json")
    err = _batch(table, stopped)
    assert err.splitlines()[0] == _changed(table, 1, n)   # the rows with no record: read again
    _batch(tmp_path / "fresh.csv", stopped)
    assert sorted(_rows(table)) == sorted(_rows(tmp_path / "fresh.csv")) and len(set(_rows(table))) > n


def test_a_table_that_cannot_be_written_leaves_no_record_of_rows_it_never_held(stopped, tmp_path):
    """A record left beside no table (the table removed, then a batch whose table cannot be written):
    the failed batch leaves nothing named after the table it did not write."""
    table = tmp_path / "table.csv"
    _batch(table, stopped)
    os.unlink(table)

    def small_files():   # a file-size limit below the table's size: its write fails (EFBIG)
        resource.setrlimit(resource.RLIMIT_FSIZE, (200, 200))

    res = run_cli("probe", "batch", stopped, "-p", "bias", "--step", "all", "-o", table, preexec_fn=small_files)
    assert res.returncode != 0 and res.stderr.count("\n") == 1 and "file too large" in res.stderr, res.stderr
    assert not os.path.exists(f"{table}.inputs.json")
