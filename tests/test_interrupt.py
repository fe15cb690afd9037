"""Ctrl-C (SIGINT) on real processes, at several moments: training, batch and figures stop at a safe
point within seconds, say what was kept in one line, exit 130, and pick up where they stopped.

Each moment is an event the test waits for (tests/waiting.py), never a sleep: torch being imported, a step
committed to the snapshot file, a task counted on the terminal."""
import csv
import re
import signal
import time

import pytest

from conftest import _script, linked_runs, popen_cli, run_cli
from waiting import Terminal, committed, importing_torch, wait_for

LIMIT = 10.0  # seconds from SIGINT to exit: "a second or two", with room for a loaded CI machine running
#              two test workers (a stop while torch is still being imported took 7.5 s there)


def _interrupt(proc) -> tuple[float, str, str]:
    t0 = time.time()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    return time.time() - t0, out, err


def _started(proc, out):
    wait_for(lambda: importing_torch(proc.pid), "import of torch", proc)


def _training(proc, out):
    wait_for(lambda: committed([out]), "first snapshot", proc)


def _snapshotting(proc, out):
    wait_for(lambda: committed([out], step=3), "third snapshot", proc)


# while-starting is slow-marked (CI time): the other two moments stop the same trainer mid-work
@pytest.mark.parametrize("moment,every", [pytest.param(_started, 10, marks=pytest.mark.slow), (_training, 10),
                                          (_snapshotting, 1)],
                         ids=["while-starting", "while-training", "while-snapshotting"])
def test_training_stops_says_where_and_resumes(tmp_path, moment, every):
    out = tmp_path / "run.h5"
    proc = popen_cli("probe-train", "--preset", "tiny", "--steps", "100000", "--snapshot-every", every,
                     "--threads", "1", "--quiet", "--out", out)
    moment(proc, out)
    took, _, err = _interrupt(proc)
    lines = err.strip().splitlines()
    assert proc.returncode == 130, err
    assert took < LIMIT, f"stopped {took:.1f} s after the SIGINT"
    assert "Traceback" not in err and len(lines) == 1, err
    m = re.fullmatch(rf"Interrupted at step (\d+); resume with probe-train --resume --out {re.escape(str(out))} "
                     r"\((it continues from step (\d+), its last snapshot|it starts again)\)", lines[0])
    if m is None:   # stopped before the first step: nothing written
        assert lines == [f"Interrupted before training started; nothing was written to {out}"]
        assert not out.exists()
        return
    assert run_cli("probe", "validate", out).returncode == 0
    target = (int(m.group(3) or 0) // every + 2) * every
    res = run_cli("probe-train", "--resume", "--out", out, "--steps", target, "--quiet")
    assert res.returncode == 0, res.stderr
    import probe

    assert probe.info(out)["steps"][-1] == target and probe.info(out)["config"]["steps"] == target


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Sixteen names for one 56-snapshot run."""
    return linked_runs(tmp_path_factory.mktemp("many"), 16)


def _done_paths(path):
    with open(path, newline="") as fh:
        return {r["path"] for r in csv.DictReader(fh) if r["metric"] != "error"}


# slow (CI time): test_signals.py stops an in-process batch by SIGTERM in the default set
@pytest.mark.slow
@pytest.mark.parametrize("jobs", ["1", "2"], ids=["in-process", "two-workers"])
def test_batch_keeps_what_finished_and_the_rerun_does_the_rest(runs, tmp_path, jobs):
    out = tmp_path / "r.csv"
    args = ["batch", runs, "--probe", "ood", "--step", "all", "-o", out, "--jobs", jobs]
    term = Terminal(_script("probe") + [str(a) for a in args])
    # a task finished (the progress line a terminal shows): some rows to keep, most tasks still to do
    term.wait_for(r"batch: [1-9]\d*/16 tasks", "first finished task")
    t0 = time.time()
    term.proc.send_signal(signal.SIGINT)
    _, shown = term.finish(timeout=60)
    took = time.time() - t0
    assert term.proc.returncode == 130 and took < LIMIT, (took, shown)
    lines = [ln for ln in shown.splitlines() if ln.strip()]
    m = re.fullmatch(rf"Interrupted: (\d+) of 16 tasks done; their rows are in {re.escape(str(out))}: run the same "
                     r"command again to do the rest", lines[-1].strip())
    assert m and "Traceback" not in shown, shown
    kept = _done_paths(out)
    assert 1 <= len(kept) == int(m.group(1)) < 16
    res = run_cli("probe", *args)
    assert res.returncode == 0, res.stderr
    assert len(_done_paths(out)) == 16


@pytest.mark.slow   # CI time: test_signals.py stops figures' trainers by SIGTERM in the default set
def test_figures_stop_their_trainers_and_resume_them(tmp_path):
    args = ["figures", "p1-accuracy", "p1-emb-mlp", "--tiny", "-o", tmp_path, "--jobs", "2"]
    proc = popen_cli("probe", *args)
    wait_for(lambda: committed(tmp_path.rglob("*.h5")), "a trainer's first snapshot", proc)
    took, _, err = _interrupt(proc)
    assert proc.returncode == 130 and took < LIMIT + 4, (took, err)
    last = err.strip().splitlines()[-1]
    assert re.fullmatch(r"Interrupted: \d of 4 run\(s\) finished; the others stopped at a snapshot and resume when "
                        r"the same command runs again", last), err
    res = run_cli("probe", *args, timeout=600)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "p1-accuracy.png").exists() and (tmp_path / "p1-emb-mlp.png").exists()
