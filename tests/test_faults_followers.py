"""Followers end when the followed writer ends (issue 47, point 2): ``probe report --watch`` stops within
seconds of its trainer's death, says so and exits non-zero with its last page written (as ``tail -f --pid``
ends with the process it follows); a run replaced under the watch (--overwrite) is noticed, not mixed
into the old run's page. Real trainers, real kills, real files; each wait is for an event."""
import signal

import pytest

from conftest import end_all, popen_cli, run_cli
from waiting import committed, wait_for

LONG = ["--preset", "tiny", "--steps", "100000", "--snapshot-every", "5", "--quiet", "--threads", "1"]
LIVE = "<meta name='probe-live'"


def _watch(run, page, *extra):
    return popen_cli("probe", "report", run, "-o", page, "--watch", "--interval", "0.3", "-p", "bias", *extra)


@pytest.mark.slow   # CI time: test_signals.py kills a watched trainer outright in the default set
def test_a_watch_ends_when_its_trainer_is_killed(tmp_path):
    run, page = tmp_path / "run.h5", tmp_path / "page.html"
    trainer = popen_cli("probe-train", *LONG, "--out", run)
    watcher = None
    try:
        wait_for(lambda: committed([run], 5), "a committed snapshot", trainer)
        watcher = _watch(run, page)
        wait_for(lambda: page.exists() and LIVE in page.read_text(), "the first live page", watcher)
        trainer.send_signal(signal.SIGKILL)
        trainer.wait()
        _, err = watcher.communicate(timeout=120)   # it notices by itself: nothing else ends it
    finally:
        end_all(trainer, watcher)
    assert watcher.returncode == 2, err
    assert "Traceback" not in err
    assert f"no process writes {run} (step " in err and "resume a run (probe-train --resume --out RUN)" in err
    assert LIVE not in page.read_text()   # the last page no longer reloads itself


def test_a_watch_of_a_run_nobody_writes_writes_its_page_and_ends(tmp_path):
    run, page = tmp_path / "run.h5", tmp_path / "page.html"
    res = run_cli("probe-train", *LONG, "--stop-at", "20", "--out", run)
    assert res.returncode == 0, res.stderr
    watcher = _watch(run, page)
    _, err = watcher.communicate(timeout=120)
    assert watcher.returncode == 2 and f"no process writes {run} (step 20 of 100000)" in err, err
    assert len(err.strip().splitlines()) == 1, err   # its one line: no section's progress, no "wrote" (issue 58)
    assert page.exists() and LIVE not in page.read_text()


def test_a_finished_run_still_ends_the_watch_cleanly(tmp_path):
    """The trainer lets go of the run after its last snapshot: the watch sees that step, not a dead writer."""
    run, page = tmp_path / "run.h5", tmp_path / "page.html"
    trainer = popen_cli("probe-train", "--preset", "tiny", "--steps", "60", "--quiet", "--threads", "1", "--out", run)
    watcher = None
    try:
        wait_for(run.exists, "the run file", trainer)
        watcher = _watch(run, page)
        assert trainer.wait(timeout=300) == 0
        _, err = watcher.communicate(timeout=120)
    finally:
        end_all(trainer, watcher)
    assert watcher.returncode == 0, err
    assert "step 60" in page.read_text() and LIVE not in page.read_text()


def test_a_run_replaced_under_the_watch_is_noticed(tmp_path):
    """The watcher is paused (SIGSTOP) while its trainer dies and another run takes the file (--overwrite);
    when it looks again it finds another run there and says so, instead of mixing the two on one page."""
    run, page = tmp_path / "run.h5", tmp_path / "page.html"
    trainer = popen_cli("probe-train", *LONG, "--out", run)
    watcher = None
    try:
        wait_for(lambda: committed([run], 5), "a committed snapshot", trainer)
        watcher = _watch(run, page)
        wait_for(lambda: page.exists() and LIVE in page.read_text(), "the first live page", watcher)
        watcher.send_signal(signal.SIGSTOP)
        trainer.send_signal(signal.SIGKILL)
        trainer.wait()
        other = run_cli("probe-train", "--preset", "tiny", "--gamma", "0.9", "--steps", "20", "--quiet",
                        "--threads", "1", "--overwrite", "--out", run)
        assert other.returncode == 0, other.stderr
        watcher.send_signal(signal.SIGCONT)
        _, err = watcher.communicate(timeout=120)
    finally:
        end_all(trainer, watcher)
    assert watcher.returncode == 2, err
    assert f"{run} now holds another run (written anew, e.g. with --overwrite)" in err
