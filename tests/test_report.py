"""probe report: the page of real runs, side by side, live while a real trainer writes."""
from __future__ import annotations

import contextlib
import re
import signal
from pathlib import Path

import pytest

import probe
from conftest import popen_cli, run_cli, without_status
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
    # progress (a line per section once it takes over 2 s) and the last line; no library's warning
    assert without_status(res.stderr).splitlines() == [f"wrote {out}: 2 run(s), 4 probes"], res.stderr
    page = out.read_text()
    # nothing fetched at view time: every src/href is inline data or an in-page anchor
    assert not re.findall(r"(?:src|href)=['\"](?!data:|#)", page)
    assert "<link" not in page and "<script src" not in page
    for section in ("config", "curves", "groups", "similarity", "bias", "attention", "theory"):
        assert f"<section id='{section}'>" in page
    # what differs first: γ alone in the first table; every field behind the toggle, γ's row highlighted
    differs = re.search(r"data-name='config-differs'>(.*?)</table>", page, re.S).group(1)
    rows = re.findall(r"<tr><td>([^<]*)</td><td>([^<]*)</td><td>([^<]*)</td>", differs)
    assert rows == [("gamma", "0.8", "0.3")], rows
    assert re.search(r"<tr class='diff'><td>gamma</td>", page)
    assert page.index("data-name='config-differs'") < page.index("<section id='curves'>") < \
        page.index("<section id='similarity'>") < page.index("<section id='groups'>")
    # headline numbers at a few log-spaced steps, a chart per step behind a slider reaching every snapshot,
    # a comparison at the last step
    n_snapshots = len(probe.info(a)["steps"])
    assert page.count("class='slider'") >= 2 * 2
    assert f"max='{n_snapshots - 1}'" in page
    assert "at the last step" in page and "step 40" in page
    assert page.count("<svg") >= 10 and "<img class='fig'" not in page   # every chart inline (hover titles)
    assert not _live(page)
    # token groups of the anchor task, by id
    assert "reasoning" in page and "memory" in page


def test_slider_steps_choose_how_many_snapshots_the_slider_reaches(tiny_run, tmp_path):
    from probe.report import pick_steps

    steps = probe.info(tiny_run)["steps"]
    final = steps[-1]
    for k, want in (("0", steps), ("3", sorted(set(pick_steps(steps, 3, final)) | set(pick_steps(steps, 2, final))))):
        out = tmp_path / f"slider-{k}.html"
        res = run_cli("probe", "report", tiny_run, "-o", out, "-p", "similarity", "--slider-steps", k,
                      "--max-steps", "2")
        assert res.returncode == 0, res.stderr
        shown = [int(s) for s in re.findall(r"<figure data-step='(\d+)'", out.read_text())]
        assert shown == want, (k, shown)   # the slider holds the table's steps too
    # one run: its first table is what defines it, in that order; the rest behind the toggle
    first = re.search(r"data-name='config-differs'>(.*?)</table>", out.read_text(), re.S).group(1)
    fields = re.findall(r"<tr><td>([^<]*)</td>", first)
    assert fields[:5] == ["kind", "snapshots", "task", "model", "gamma"] and "activation" not in fields, fields


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
    assert without_status(res.stderr).splitlines() == [f"wrote {out}: 1 run(s), 2 probes"], res.stderr  # no warning


@pytest.mark.parametrize("args, message", [
    (["report", "missing.h5", "-o", "r.html"], "no such file"),
    (["report", "RUN", "-o", "r.txt"], "use a .html name"),
    (["report", "RUN", "-o", "nodir/r.html"], "does not exist"),
    (["report", "RUN", "-p", "nosuch"], "unknown probe 'nosuch'"),
    (["report", "RUN", "--watch", "--max-share", "0"], "--max-share"),
    (["report", "RUN", "--slider-steps", "-1"], "--slider-steps"),
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


@pytest.mark.slow   # CI time (the last CI took 1179 s of 1200): 17 s; test_signals.py and test_faults_followers.py follow trainers in the default set
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


@pytest.mark.slow   # CI time (1003 s in a clean clone here, the CI machine ~170 s slower): 10 s; test_signals.py trains with --report in the default set
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
    assert text.count("<figure data-step=") >= 2 * 10  # each step's figure of every probe that has one


def test_a_budget_leaves_work_for_later_and_the_last_page_has_it(tiny_run):
    from probe.report import Budget, Report

    rep = Report([str(tiny_run)], probes=["similarity", "bias"], max_steps=3)
    rep.refresh()
    starved = rep.html(live=True, budget=Budget(1e-9))  # this process already spent more than it allows
    fig = "<figure data-step="
    assert rep.pending and starved.count("still to compute") == 2 and fig not in starved
    assert "<section id='curves'>" in starved and "<svg" in starved  # the cheap parts are there
    full = rep.html(live=False)
    # similarity's chart at every snapshot (the slider reaches them all); bias has none of its own
    assert not rep.pending and "still to compute" not in full and full.count(fig) == len(probe.info(tiny_run)["steps"])


def test_pick_steps_are_log_spaced_and_keep_early_picks_while_a_run_grows():
    from probe.report import pick_steps

    snapshots = [0, 1, 2, 4, 8, 16, 32, 64, 128] + list(range(250, 3001, 250))   # the demo's runs
    assert pick_steps(snapshots, 4, final=3000) == [0, 16, 250, 3000]          # the early change among them
    steps = list(range(0, 10001, 100))
    early = pick_steps(steps[:40], 6, final=10000)
    later = pick_steps(steps[:80], 6, final=10000)
    assert early[0] == 0 and early[-1] == 3900 and later[-1] == 7900
    assert set(early[:-1]) <= set(later)              # only the newest step is new
    assert pick_steps(steps, 6, final=10000) == [0, 100, 300, 1600, 10000]
    assert pick_steps([0, 10], 6) == [0, 10]


def test_chart_ticks_read():
    from probe.chart import axes as A

    assert [s for _, s in A.linear(-0.00999, 0.031).ticks] == ["-0.01", "0", "0.01", "0.02", "0.03", "0.04"]
    assert [s for _, s in A.linear(0.0, 1.0, fixed=True).ticks] == ["0", "0.2", "0.4", "0.6", "0.8", "1"]
    assert [s for _, s in A.log(0.241, 8.26).ticks] == ["0.5", "1", "2", "5"]     # not 8.26, 5.08, 3.12
    assert [s for _, s in A.log(1e-6, 3.0).ticks][:3] == ["1e-6", "1e-5", "1e-4"]
    assert [s for _, s in A.symlog(3000).ticks] == ["0", "10", "100", "1000"]
    assert [s for _, s in A.linear(1, 3, integer=True).ticks] == ["1", "2", "3"]  # no 0.5 on an index axis
    assert [s for _, s in A.linear(0, 120000).ticks] == ["0", "50k", "100k", "150k"]
    assert A.thin([0, 10, 20, 30], [15, 15, 15, 15]) == [0, 3]                 # labels never overlap


def test_heat_map_colours_fit_the_data():
    import numpy as np

    from probe.chart.panel import fitted_range

    band = np.full((4, 4), 0.8) + np.eye(4) * 0.2 + np.arange(4) * 0.03   # theory: values in a narrow band
    lo, hi, cmap = fitted_range(band)
    assert (lo, hi) != (-1.0, 1.0) and lo <= 0.8 and hi >= 0.89 and hi - lo <= 0.4 and cmap == "viridis"
    signed = np.eye(3) + np.array([[0, 0.1, -0.2], [0.1, 0, 0.05], [-0.2, 0.05, 0]])
    assert fitted_range(signed) == (-0.2, 0.2, "RdBu_r")
    assert fitted_range(np.eye(3) + 0.7 * (1 - np.eye(3)) * np.array([[1, 1, -1]]))[:2] == (-1.0, 1.0)


def test_every_report_probe_with_a_figure_has_a_chart():
    """The browser test looks at the report's charts: a probe whose --plot of several steps had a picture of
    its own but not of one step would go unchecked (and a report draws no matplotlib figure)."""
    from probe import registry

    assert [p.name for p in registry.probes() if p.report and p.charts and p.chart is None] == []
    assert [p.name for p in registry.probes() if p.cheap and p.chart is None] == []
