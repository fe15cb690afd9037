"""probe report: the page of real runs, side by side, live while a real trainer writes."""
from __future__ import annotations

import contextlib
import re
import signal
from pathlib import Path

import pytest

from conftest import popen_cli, run_cli
from probe.format import last_step
from waiting import DEADLINE, wait_for

FAST = ["-p", "similarity", "-p", "bias", "-p", "attention", "-p", "theory", "--max-steps", "3"]


def _live(page: str) -> bool:
    return "<meta name='probe-live'" in page


def test_report_of_two_runs_is_self_contained(two_runs, tmp_path):
    a, b = two_runs
    out = tmp_path / "report.html"
    res = run_cli("probe", "report", a, b, "-o", out, *FAST)
    assert res.returncode == 0, res.stderr
    assert res.stdout == ""                          # data goes to the file, logs to stderr
    page = out.read_text()
    # nothing fetched at view time: every src/href is inline data or an in-page anchor
    assert not re.findall(r"(?:src|href)=['\"](?!data:|#)", page)
    assert "<link" not in page and "<script src" not in page
    for section in ("config", "curves", "groups", "similarity", "bias", "attention", "theory"):
        assert f"<section id='{section}'>" in page
    # config side by side, the differing γ highlighted
    gamma_row = re.search(r"<tr( class='diff')?><td>gamma</td><td>([^<]*)</td><td>([^<]*)</td>", page)
    assert gamma_row and gamma_row.group(1) and {gamma_row.group(2), gamma_row.group(3)} == {"0.8", "0.3"}
    # headline numbers at a few steps, figures with a step slider, a comparison at the last step
    assert page.count("class='slider'") >= 2 * 2
    assert "at the last step" in page and "step 40" in page
    assert page.count("<img class='fig'") >= 10
    assert not _live(page)
    # token groups of the anchor task, by id
    assert "reasoning" in page and "memory" in page


def test_report_says_why_a_probe_does_not_apply(tiny_run, tmp_path):
    out = tmp_path / "r.html"
    res = run_cli("probe", "report", tiny_run, "-o", out, "-p", "spectrum", "-p", "sinks", "--max-steps", "2")
    assert res.returncode == 0, res.stderr
    page = out.read_text()
    assert "<section id='spectrum'>" in page and "<section id='sinks'>" in page


def test_report_of_checkpoint_folders(tmp_path):
    from test_hub import _tiny_gpt2

    folder = tmp_path / "trainer-out"
    for step, scale in ((500, 0.1), (1000, 1.0)):
        _tiny_gpt2(folder / f"checkpoint-{step}", scale)
    (folder / "checkpoint-1000" / "trainer_state.json").write_text(
        '{"log_history": [{"step": 100, "loss": 3.0}, {"step": 500, "loss": 2.0}, {"step": 1000, "loss": 1.5}]}')
    out = tmp_path / "ck.html"
    res = run_cli("probe", "report", folder, "-o", out, "-p", "similarity", "-p", "ood", "--max-steps", "4")
    assert res.returncode == 0, res.stderr
    page = out.read_text()
    assert "step 500" in page and "step 1000" in page
    assert page.index("step 500") < page.index("step 1000")
    assert "needs a snapshot file" in page            # ood: weights alone cannot be evaluated
    assert "loss and accuracy per split" in page      # the Trainer's log_history drawn as a curve


@pytest.mark.parametrize("args, message", [
    (["report", "missing.h5", "-o", "r.html"], "no such file"),
    (["report", "RUN", "-o", "r.txt"], "use a .html name"),
    (["report", "RUN", "-o", "nodir/r.html"], "does not exist"),
    (["report", "RUN", "-p", "nosuch"], "unknown probe 'nosuch'"),
    (["report", "RUN", "--watch", "--max-share", "0"], "--max-share"),
])
def test_report_bad_input_is_one_line(tiny_run, tmp_path, args, message):
    args = [str(tiny_run) if a == "RUN" else a for a in args]
    res = run_cli("probe", *args, cwd=tmp_path)
    assert res.returncode != 0
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error:") and message in lines[0], res.stderr
    assert not list(tmp_path.glob("*.html")) and not list(tmp_path.glob(".*.tmp"))


def train_live(tmp_path: Path, steps: int = 1200, every: int = 200, report: Path | None = None,
               log: bool = True):
    """A real training run in the background, long enough (~15–30 s) to be watched (``log``: also the
    early snapshots at steps 1, 2, 4, ...)."""
    run = tmp_path / "live.h5"
    extra = (["--report", report] if report else []) + ([] if log else ["--no-snapshot-log"])
    return run, popen_cli("probe-train", "--preset", "tiny", "--gamma", "0.8", "--steps", steps,
                          "--snapshot-every", every, "--out", run, "--quiet", "--threads", "1", *extra)


def shown_step(page: Path) -> str | None:
    """The latest step ``page`` shows (None before it exists); every version read is a whole page."""
    if not page.exists():
        return None
    text = page.read_text()
    assert text.rstrip().endswith("</html>")   # atomic: never half a page
    m = re.search(r"class='latest-step'>(\d+)<", text)
    return m.group(1) if m else None


@contextlib.contextmanager
def paused(proc):
    """``proc`` stopped (SIGSTOP) for the block: the test, not the machine's speed, decides how far a
    trainer gets while something else is looked at."""
    proc.send_signal(signal.SIGSTOP)
    try:
        yield
    finally:
        proc.send_signal(signal.SIGCONT)


def follow(page: Path, run: Path, trainer, writer) -> list[str]:
    """The steps ``page`` showed while ``trainer`` wrote ``run``: at each new committed step the
    trainer waits until ``writer`` (the process keeping the page) shows it; then the last page."""
    seen: list[str] = []

    def note(step):
        if step is not None and (not seen or seen[-1] != step):
            seen.append(step)

    last = -1
    if writer is trainer:   # a trainer keeping its own page: no pausing it, every version it shows is noted
        wait_for(lambda: note(shown_step(page)) or trainer.poll() is not None, "end of training")
    while trainer.poll() is None:
        with paused(trainer):
            step = last_step(run)
            if step is not None and step > last:
                last = step
                note(wait_for(lambda: shown_step(page) == str(step) and str(step), f"page at step {step}", writer))
        wait_for(lambda: trainer.poll() is not None or (last_step(run) or -1) > last, f"a step after {last}")
    writer.wait(timeout=DEADLINE)
    note(shown_step(page))   # the last page, written before its writer ended
    return seen


def test_watch_follows_a_training_run(tmp_path):
    run, trainer = train_live(tmp_path, steps=800, every=100)
    page = tmp_path / "watch.html"
    watcher = popen_cli("probe", "report", run, "-o", page, "--watch", "--interval", "0.3", "-p", "bias",
                        "-p", "similarity", "--max-steps", "2")
    try:
        seen = follow(page, run, trainer, watcher)
        assert watcher.wait(timeout=60) == 0, watcher.stderr.read()
        assert trainer.wait(timeout=120) == 0
    finally:
        trainer.kill(), watcher.kill()
    assert len(seen) >= 3, seen                      # the page followed the run
    assert seen[-1] == "800" and seen == sorted(seen, key=int)
    assert not _live(page.read_text())               # the last page no longer reloads itself
    assert "watching" in watcher.stderr.read()


def test_trainer_keeps_its_report(tmp_path):
    page = tmp_path / "train.html"
    run, trainer = train_live(tmp_path, steps=300, every=300, report=page, log=False)
    seen = follow(page, run, trainer, trainer)
    out, err = trainer.communicate(timeout=300)
    assert trainer.returncode == 0, err
    assert f"wrote {page}" in err
    text = page.read_text()
    assert seen and seen[-1] == "300" and not _live(text)
    assert "still to compute" not in text            # the last page has everything, whatever the budget
    assert text.count("src='data:image/png") >= 2 * 10  # each step's figure of every probe that has one


def test_a_budget_leaves_work_for_later_and_the_last_page_has_it(tiny_run):
    from probe.report import Budget, Report

    rep = Report([str(tiny_run)], probes=["similarity", "bias"], max_steps=3)
    rep.refresh()
    starved = rep.html(live=True, budget=Budget(1e-9))  # this process already spent more than it allows
    png = "src='data:image/png"
    assert rep.pending and starved.count("still to compute") == 2 and png not in starved
    assert "<section id='curves'>" in starved and "data:image/svg+xml" in starved  # the cheap parts are there
    full = rep.html(live=False)
    assert not rep.pending and "still to compute" not in full and full.count(png) == 3


def test_pick_steps_keeps_early_picks_while_a_run_grows():
    from probe.report import pick_steps

    steps = list(range(0, 10001, 100))
    early = pick_steps(steps[:40], 6, final=10000)
    later = pick_steps(steps[:80], 6, final=10000)
    assert early[0] == 0 and early[-1] == 3900 and later[-1] == 7900
    assert set(early[:-1]) <= set(later)              # only the newest step is new
    assert pick_steps(steps, 6, final=10000) == [0, 2000, 4000, 6000, 8000, 10000]
    assert pick_steps([0, 10], 6) == [0, 10]
