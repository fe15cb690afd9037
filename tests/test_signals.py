"""SIGTERM and SIGHUP on real processes (issue 23, item 9), tested like Ctrl-C is in test_interrupt.py:
every command that starts workers stops them too (no child outlives the command: checked by pid),
keeps what finished, leaves its outputs resumable, says what was kept in one line and exits 143
(SIGTERM) or 129 (SIGHUP); a parent killed outright (SIGKILL) leaves no child working on. And exit
codes that mean something (item 10): batch and figures exit 1 when an item failed, 0 when all succeeded.

Every wait is for an event (a committed step in a snapshot file, a table on disk, a page, a process
gone), with a generous deadline: never a sleep followed by an assertion."""
import csv
import os
import re
import signal
import sys
from pathlib import Path

import pytest

from conftest import linked_runs, popen_cli, run_cli, without_status
from waiting import DEADLINE, committed, wait_for

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc; PR_SET_PDEATHSIG")

# SIGHUP takes SIGTERM's path (signals.STOP): its cases run in the slow set, to keep CI within its time
SIGNALS = pytest.mark.parametrize("sig", [signal.SIGTERM, pytest.param(signal.SIGHUP, marks=pytest.mark.slow)],
                                  ids=["SIGTERM", "SIGHUP"])


def _code(sig) -> int:
    return 128 + int(sig)


def _by(sig) -> str:
    return f"Interrupted by {signal.Signals(sig).name}"


# --- processes, by pid, from /proc ----------------------------------------------------------------

def _stat(pid: int):
    """(state, parent pid, start time) of ``pid``, or None when there is no such process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return fields[0], int(fields[1]), int(fields[19])


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def descendants(root: int) -> dict[int, tuple[int, str]]:
    """{pid: (start time, command line)} of every living descendant of ``root``."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = _stat(int(entry))
            if st is not None and st[0] not in "ZX":
                children.setdefault(st[1], []).append(int(entry))
    out, todo = {}, [root]
    while todo:
        for pid in children.get(todo.pop(), []):
            st = _stat(pid)
            if st is not None:
                out[pid] = (st[2], _cmdline(pid))
                todo.append(pid)
    return out


def alive(pid: int, start: int) -> bool:
    """Whether that process (not a later one with its pid) still runs (a zombie does not)."""
    st = _stat(pid)
    return st is not None and st[2] == start and st[0] not in "ZX"


def still_running(procs: dict[int, tuple[int, str]]) -> list[str]:
    return [cmd for pid, (start, cmd) in procs.items() if alive(pid, start)]


def _tracker(cmd: str) -> bool:
    """multiprocessing's resource tracker: ends by itself when its parent's pipe closes."""
    return "resource_tracker" in cmd


def workers(root: int) -> set[int]:
    """The worker processes ``root`` started itself: its Python children other than the resource
    tracker. Not a helper program a library runs for a moment (h5py's import runs `uname -p`), nor
    ``root`` forked on its way to starting one (same command line until the exec)."""
    own = _cmdline(root)
    return {pid for pid, (_, cmd) in descendants(root).items()
            if (_stat(pid) or (0, 0))[1] == root and "python" in cmd and not _tracker(cmd) and cmd != own}


def assert_no_orphans(procs: dict[int, tuple[int, str]]) -> None:
    """None of ``procs`` (a command's children, seen while it ran) outlived the command."""
    assert still_running({p: v for p, v in procs.items() if not _tracker(v[1])}) == []
    wait_for(lambda: not still_running(procs), "end of multiprocessing's resource tracker", timeout=60)


def trainers(procs) -> dict[int, tuple[int, str]]:
    """The runs' trainer processes among ``procs``: started probe-train processes, and the children of
    multiprocessing's fork server (forked: its command line, which names the trainer's modules), not the
    server itself."""
    # a trainer a Dask task starts runs the installed script: its command line names probe-train, not the module
    ours = {pid: v for pid, v in procs.items() if "probe_train" in v[1] or re.search(r"/probe-train (?!sweep )", v[1])}
    return {pid: v for pid, v in ours.items() if "forkserver" not in v[1] or (_stat(pid) or (0, 0))[1] in ours}


def one_line(err: str) -> str:
    err = without_status(err)
    lines = err.strip().splitlines()
    assert "Traceback" not in err and len(lines) == 1, err
    return lines[0]


# --- probe-train ------------------------------------------------------------------------------------

LONG = ["--preset", "tiny", "--steps", "100000", "--snapshot-every", "10", "--threads", "1", "--quiet"]


@SIGNALS
def test_training_stops_at_a_step_and_resumes(tmp_path, sig):
    out = tmp_path / "run.h5"
    proc = popen_cli("probe-train", *LONG, "--out", out)
    wait_for(lambda: committed([out]), "committed step", proc)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=DEADLINE)
    assert proc.returncode == _code(sig), err
    m = re.fullmatch(rf"{_by(sig)} at step (\d+); resume with probe-train --resume --out {re.escape(str(out))} "
                     r"\(it continues from step (\d+), its last snapshot\)", one_line(err))
    assert m, err
    assert run_cli("probe", "validate", out).returncode == 0
    target = int(m.group(2)) + 20
    res = run_cli("probe-train", "--resume", "--out", out, "--steps", target, "--quiet")
    assert res.returncode == 0, res.stderr
    import probe

    assert probe.info(out)["steps"][-1] == target


def test_training_under_nohup_trains_through_a_hangup(tmp_path):
    """nohup starts a command with SIGHUP ignored: it stays ignored (the trainer commits steps after
    the hangup); SIGTERM still stops it."""
    from probe.format import last_step

    out = tmp_path / "run.h5"
    proc = popen_cli("probe-train", *LONG, "--out", out,
                     preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    wait_for(lambda: committed([out]), "committed step", proc)
    at_hangup = last_step(out)
    proc.send_signal(signal.SIGHUP)
    wait_for(lambda: (last_step(out) or 0) >= at_hangup + 20, "steps committed after the hangup", proc)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=DEADLINE)
    assert proc.returncode == 143 and one_line(err).startswith("Interrupted by SIGTERM at step"), err


@pytest.fixture(scope="module")
def partial_run(tmp_path_factory) -> Path:
    """A run stopped by SIGTERM part way (its configuration asks for 100000 steps)."""
    out = tmp_path_factory.mktemp("partial") / "partial.h5"
    proc = popen_cli("probe-train", *LONG, "--out", out)
    wait_for(lambda: committed([out]), "committed step", proc)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=DEADLINE)
    assert proc.returncode == 143, err
    return out


@pytest.fixture
def being_written(partial_run) -> Path:
    """The partial run as a follower sees one whose trainer is at work: its writer's lock held (here by the
    test), so that a watch of it goes on until a signal ends it (a run nobody writes ends a watch at once)."""
    from probe.files import OutputLock

    with OutputLock(partial_run):
        yield partial_run


def _live(page: Path) -> bool:
    return "<meta name='probe-live'" in page.read_text()


def _page_written(page: Path) -> bool:
    return page.exists() and page.read_text().rstrip().endswith("</html>")


@SIGNALS
def test_report_watch_writes_its_last_page(being_written, tmp_path, sig):
    page = tmp_path / "watch.html"
    proc = popen_cli("probe", "report", being_written, "-o", page, "--watch", "--interval", "0.2", "-p", "bias")
    wait_for(lambda: _page_written(page), "first page", proc)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=DEADLINE)
    assert proc.returncode == _code(sig), err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == (f"{_by(sig)}: {page} holds the runs as they were (no longer reloading); "
                                            "the same command watches again")
    assert not _live(page)


@pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="Linux scheduling policies")
def test_a_watcher_at_idle_priority_writes_its_last_page_beside_a_busy_process(being_written, tmp_path):
    """`probe-train --report` starts its watcher at SCHED_IDLE, which gets CPU time only where a core
    is idle. Stopped, it writes its last page at the normal policy: here on a core it shares with a
    busy process (a proof run under load saw an orphaned watcher get 4 s of CPU in 9 minutes)."""
    import subprocess

    cpu = min(os.sched_getaffinity(0))

    def one_core(idle: bool):
        def setup():
            os.sched_setaffinity(0, {cpu})
            if idle:
                os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        return setup

    page = tmp_path / "watch.html"
    proc = popen_cli("probe", "report", being_written, "-o", page, "--watch", "--interval", "0.2", "-p", "bias",
                     preexec_fn=one_core(idle=True))
    busy = None
    try:
        wait_for(lambda: _page_written(page), "first page", proc)
        busy = subprocess.Popen([sys.executable, "-c", "while True: pass"], preexec_fn=one_core(idle=False))
        assert os.sched_getscheduler(proc.pid) == os.SCHED_IDLE
        proc.send_signal(signal.SIGTERM)

        def policy_or_end():   # "normal" once the watcher left SCHED_IDLE, "ended" once it ended
            try:
                policy = os.sched_getscheduler(proc.pid)
            except OSError:
                policy = None
            if proc.poll() is not None:
                return "ended"
            return "normal" if policy == os.SCHED_OTHER else False

        seen = wait_for(policy_or_end, "the watcher leaving SCHED_IDLE or ending")
        _, err = proc.communicate(timeout=DEADLINE)
    finally:
        if busy is not None:
            busy.kill()
            busy.wait()
        if proc.poll() is None:
            proc.kill()
    assert seen == "normal", "the last page was written at SCHED_IDLE"
    assert proc.returncode == 143, err
    assert not _live(page)


@SIGNALS
def test_trainer_stops_its_report_watcher(tmp_path, sig):
    out, page = tmp_path / "run.h5", tmp_path / "page.html"
    proc = popen_cli("probe-train", *LONG, "--out", out, "--report", page)
    wait_for(lambda: committed([out]), "committed step", proc)
    kids = wait_for(lambda: {p: v for p, v in descendants(proc.pid).items() if "--watch" in v[1]},
                    "report watcher", proc)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=DEADLINE)
    assert proc.returncode == _code(sig), err
    lines = err.strip().splitlines()
    assert f"wrote {page}" in lines and "Traceback" not in err, err
    assert re.fullmatch(rf"{_by(sig)} at step \d+; resume with .*", lines[-1]), err
    assert still_running(kids) == []
    assert _page_written(page) and not _live(page)
    assert run_cli("probe", "validate", out).returncode == 0


def test_trainer_killed_outright_its_watcher_writes_the_last_page_and_ends(tmp_path):
    out, page = tmp_path / "run.h5", tmp_path / "page.html"
    proc = popen_cli("probe-train", *LONG, "--out", out, "--report", page)
    wait_for(lambda: committed([out]), "committed step", proc)
    kids = wait_for(lambda: {p: v for p, v in descendants(proc.pid).items() if "--watch" in v[1]},
                    "report watcher", proc)
    proc.kill()
    proc.communicate(timeout=60)
    wait_for(lambda: not still_running(kids), "end of the orphaned watcher")
    assert _page_written(page) and not _live(page)


# --- probe figures and probe-train sweep: trainers in processes of their own ------------------------

FIG_LONG = '''
NAME = "long"
TITLE = "two runs that train for a long time"


def runs(ctx):
    return ctx.declare("tiny", {f"r{s}": {"steps": 100000, "snapshot_every": 10, "seed": s} for s in (0, 1)})


def make(ctx, runs):
    return []
'''


def _examples(tmp_path: Path, **scripts: str) -> Path:
    d = tmp_path / "examples"
    d.mkdir()
    for name, text in scripts.items():
        (d / f"fig_{name}.py").write_text(text)
    return d


def _resumable(runs_dir: Path) -> None:
    """Every run file is valid, and the next call resumes it (not trains it anew)."""
    from probe_train.runs import plan

    files = sorted(runs_dir.glob("*.h5"))
    assert len(files) == 2
    for f in files:
        assert run_cli("probe", "validate", f).returncode == 0
    _, todo = plan({f"r{s}": ("tiny", {"steps": 100000, "snapshot_every": 10, "seed": s}) for s in (0, 1)},
                   runs_dir)
    assert len(todo) == 2 and all("--resume" in job.args for job in todo)


@SIGNALS
def test_figures_stop_their_trainers(tmp_path, sig):
    examples = _examples(tmp_path, long=FIG_LONG)
    out = tmp_path / "figs"
    proc = popen_cli("probe", "figures", "long", "--tiny", "--examples", examples, "-o", out, "--jobs", "2")
    wait_for(lambda: committed((out / "runs").glob("*.h5")) and len(list((out / "runs").glob("*.h5"))) == 2,
             "a committed step in both runs", proc)
    kids = trainers(descendants(proc.pid))
    assert len(kids) == 2
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=DEADLINE)
    assert proc.returncode == _code(sig), err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == (f"{_by(sig)}: 0 of 2 run(s) finished; the others stopped at a snapshot "
                                            "and resume when the same command runs again")
    assert_no_orphans(kids)
    _resumable(out / "runs")


def test_figures_killed_outright_their_trainers_stop_at_a_snapshot(tmp_path):
    examples = _examples(tmp_path, long=FIG_LONG)
    out = tmp_path / "figs"
    proc = popen_cli("probe", "figures", "long", "--tiny", "--examples", examples, "-o", out, "--jobs", "2")
    wait_for(lambda: committed((out / "runs").glob("*.h5")) and len(list((out / "runs").glob("*.h5"))) == 2,
             "a committed step in both runs", proc)
    kids = trainers(descendants(proc.pid))
    assert len(kids) == 2
    proc.kill()
    proc.communicate(timeout=60)
    wait_for(lambda: not still_running(kids), "end of the orphaned trainers")
    _resumable(out / "runs")


SWEEP = ["--preset", "tiny", "--grid", "seed=0,1", "--grid", "steps=100000", "--grid", "snapshot_every=10"]


def _sweep_stopped(out: Path, proc, sig, kids) -> None:
    import json

    _, err = proc.communicate(timeout=DEADLINE)
    assert proc.returncode == _code(sig), err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == (f"{_by(sig)}: 0 of 2 run(s) finished; the others stopped at a snapshot "
                                            "and resume when the same command runs again")
    assert still_running(kids) == []
    runs = json.loads((out / "sweep.json").read_text())["runs"]
    assert [r["status"] for r in runs] == ["partial", "partial"]
    for r in runs:
        assert run_cli("probe", "validate", out / r["path"]).returncode == 0


@SIGNALS
def test_sweep_stops_its_trainers(tmp_path, sig):
    out = tmp_path / "sweep"
    proc = popen_cli("probe-train", "sweep", *SWEEP, "--out", out, "--jobs", "2")
    wait_for(lambda: len(list(out.glob("*.h5"))) == 2 and committed(out.glob("*.h5")), "a committed step in both runs",
             proc)
    kids = trainers(descendants(proc.pid))
    assert len(kids) == 2
    proc.send_signal(sig)
    _sweep_stopped(out, proc, sig, kids)


@pytest.fixture(scope="module")
def cluster():
    from distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as c:
        yield c


# all slow (CI time): test_batch.py runs a batch on a LocalCluster in the default set
@pytest.mark.parametrize("sig, ensemble", [pytest.param(signal.SIGTERM, False, marks=pytest.mark.slow),
                                           pytest.param(signal.SIGHUP, False, marks=pytest.mark.slow),
                                           pytest.param(signal.SIGTERM, True, marks=pytest.mark.slow)],
                         ids=["SIGTERM", "SIGHUP", "SIGTERM-ensemble"])
def test_sweep_on_dask_stops_its_trainers(cluster, tmp_path, sig, ensemble):
    """The trainers run on the cluster's workers (here children of this test's process), not under the
    sweep: it tells them to stop and waits for them. With --ensemble the two seeds train as one seed
    ensemble (one process on one worker), which stops as a trainer does, both files resumable."""
    out = tmp_path / "sweep"
    proc = popen_cli("probe-train", "sweep", *SWEEP, "--out", out, "--scheduler", cluster.scheduler_address,
                     "--ensemble" if ensemble else "--no-ensemble")
    wait_for(lambda: len(list(out.glob("*.h5"))) == 2 and committed(out.glob("*.h5")), "a committed step in both runs",
             proc)
    kids = {p: v for p, v in trainers(descendants(os.getpid())).items() if str(out) in v[1]}
    assert len(kids) == (1 if ensemble else 2)
    assert all((" ensemble " in cmd) == ensemble for _, cmd in kids.values())
    proc.send_signal(sig)
    _sweep_stopped(out, proc, sig, kids)


# --- probe batch --------------------------------------------------------------------------------------

N_TASKS = 8


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Eight names for one 56-snapshot run."""
    return linked_runs(tmp_path_factory.mktemp("many"), N_TASKS)


def _done_paths(path: Path) -> set[str]:
    if not path.exists():
        return set()
    with open(path, newline="") as fh:
        return {r["path"] for r in csv.DictReader(fh) if r["metric"] != "error"}


def _batch_stopped(proc, sig, out: Path, kids: dict) -> None:
    _, err = proc.communicate(timeout=DEADLINE)
    assert proc.returncode == _code(sig), err
    m = re.fullmatch(rf"{_by(sig)}: (\d+) of {N_TASKS} tasks done; their rows are in {re.escape(str(out))}: run the "
                     r"same command again to do the rest", one_line(err))
    assert m, err
    assert 1 <= len(_done_paths(out)) == int(m.group(1)) < N_TASKS
    assert_no_orphans(kids)


@SIGNALS
# two workers stopped by SIGINT: test_interrupt.py; by any signal at random moments: test_faults_kills.py
@pytest.mark.parametrize("jobs", ["1", pytest.param("2", marks=pytest.mark.slow)], ids=["in-process", "two-workers"])
def test_batch_keeps_what_finished_and_the_rerun_does_the_rest(runs, tmp_path, sig, jobs):
    out = tmp_path / "r.csv"
    args = ["batch", runs, "--probe", "ood", "--step", "all", "-o", out, "--jobs", jobs]
    proc = popen_cli("probe", *args)
    kids, started = {}, set()

    def first_rows():   # the table a running batch keeps on disk, with a finished task in it
        kids.update(descendants(proc.pid))
        started.update(workers(proc.pid))
        return _done_paths(out)

    wait_for(first_rows, "first finished task in the table", proc)
    assert len(started) == (2 if jobs == "2" else 0), {p: kids.get(p) for p in started}
    proc.send_signal(sig)
    _batch_stopped(proc, sig, out, kids)
    res = run_cli("probe", *args)
    assert res.returncode == 0, res.stderr
    assert len(_done_paths(out)) == N_TASKS


@SIGNALS
def test_batch_on_dask_keeps_what_finished(cluster, runs, tmp_path, sig):
    out = tmp_path / "r.csv"
    proc = popen_cli("probe", "batch", runs, "--probe", "ood", "--step", "all", "-o", out,
                     "--scheduler", cluster.scheduler_address)
    wait_for(lambda: _done_paths(out), "first finished task in the table", proc)
    proc.send_signal(sig)
    _batch_stopped(proc, sig, out, {})


@pytest.fixture(scope="module")
def big_run(tmp_path_factory) -> Path:
    """51 snapshots of a tiny model on 100000 sequences: `ood --step all --full` on it takes over a
    minute (75 s on an idle 2-core machine), training it 10 s."""
    out = tmp_path_factory.mktemp("big") / "big.h5"
    res = run_cli("probe-train", "--preset", "tiny", "--steps", "100", "--snapshot-every", "2", "--n-samples",
                  "100000", "--no-snapshot-log", "--threads", "1", "--quiet", "--out", out)
    assert res.returncode == 0, res.stderr
    return out


@SIGNALS
def test_ood_on_threads_stops(big_run, sig):
    """`ood --step all --threads 2` evaluates snapshots on threads: the signal ends the command (its
    threads stop after their current snapshot) with the signal's exit code and one line."""
    run = big_run
    proc = popen_cli("probe", "ood", run, "--step", "all", "--full", "--threads", "2")

    def reading():   # the command has the snapshot file open: it is evaluating
        try:
            return any(os.path.realpath(f"/proc/{proc.pid}/fd/{fd}") == str(run)
                       for fd in os.listdir(f"/proc/{proc.pid}/fd"))
        except OSError:
            return False

    wait_for(reading, "the snapshot file open", proc)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=DEADLINE)
    assert proc.returncode == _code(sig), err
    assert one_line(err) == f"Error: interrupted by {signal.Signals(sig).name}" and out == ""


GC_SIGNAL = """
import os, signal, sys
from probe.errors import run_cli

class Collected:   # the signal arrives while the garbage collector runs a finaliser (CI met it in ood)
    def __del__(self):
        os.kill(os.getpid(), int(sys.argv[1]))
        for _ in range(1000):   # the handler runs here, where Python could only print what it raised
            pass

def main():
    Collected()
    while True:   # work the signal must stop (a lost signal: until the test's deadline)
        sum(range(100))

run_cli(main)
"""


@SIGNALS
def test_a_signal_met_in_a_finaliser_still_stops_the_command(tmp_path, sig):
    """Outside a safe point a stop signal ends the command at once. (It used to raise a
    KeyboardInterrupt there, which in a ``__del__`` or a weakref callback Python only prints as
    "Exception ignored": CI saw `ood --threads 2` under SIGHUP run on to exit 0; and inside h5py's
    lock it became "unexpected SystemError", 5 of 20 SIGHUPs to that command.)"""
    import subprocess

    script = tmp_path / "gc_signal.py"
    script.write_text(GC_SIGNAL)
    proc = subprocess.run([sys.executable, str(script), str(int(sig))], capture_output=True, text=True,
                          timeout=DEADLINE, cwd=tmp_path)
    assert proc.returncode == _code(sig), proc.stderr
    assert one_line(proc.stderr) == f"Error: interrupted by {signal.Signals(sig).name}"


WRITE_SIGNAL = """
import os, sys
from probe.files import write_atomic
from probe.errors import run_cli

def content(fh):
    fh.write(b"half of a page")
    fh.flush()
    os.kill(os.getpid(), int(sys.argv[1]))
    while True:   # the rest of the page, which the signal must stop
        sum(range(100))

run_cli(lambda: write_atomic("page.html", content, "report"))
"""


@SIGNALS
def test_a_signal_in_the_middle_of_a_write_leaves_nothing_behind(tmp_path, sig):
    """A command ended at once by a stop signal removes the temporary file of the write under way:
    neither the output nor a half-written temporary file is left."""
    import subprocess

    script = tmp_path / "write_signal.py"
    script.write_text(WRITE_SIGNAL)
    (tmp_path / "out").mkdir()
    proc = subprocess.run([sys.executable, str(script), str(int(sig))], capture_output=True, text=True,
                          timeout=DEADLINE, cwd=tmp_path / "out")
    assert proc.returncode == _code(sig), proc.stderr
    assert one_line(proc.stderr) == f"Error: interrupted by {signal.Signals(sig).name}"
    assert os.listdir(tmp_path / "out") == []


SECOND_CTRL_C = """
import os, signal
import click
from probe.errors import run_cli
from probe.signals import stoppable

@click.command()
def main():
    with stoppable():
        os.kill(os.getpid(), signal.SIGINT)   # the first: a stop asked for at the next safe point
        os.kill(os.getpid(), signal.SIGINT)   # the second: the user will not wait (KeyboardInterrupt)
        while True:
            sum(range(100))

run_cli(main)
"""


def test_a_second_ctrl_c_inside_a_click_command_exits_130(tmp_path):
    """A second Ctrl-C raises KeyboardInterrupt, which Click re-raises as its Abort (a RuntimeError, not
    one of its usage errors): the command still ends with the stop line and exit 130, not with
    "unexpected Abort" and exit 1 (as it did until 2026-11-27)."""
    import subprocess

    script = tmp_path / "second_ctrl_c.py"
    script.write_text(SECOND_CTRL_C)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=DEADLINE,
                          cwd=tmp_path)
    assert proc.returncode == 130, proc.stderr
    assert one_line(proc.stderr) == "Error: interrupted"


# --- exit codes (item 10) -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """A folder with one good checkpoint and one that is not a checkpoint, and a folder of good ones."""
    import torch

    d = tmp_path_factory.mktemp("exit")
    mixed, good = d / "mixed", d / "good"
    mixed.mkdir(), good.mkdir()
    torch.manual_seed(0)
    sd = {"transformer.wte.weight": torch.randn(30, 16), "transformer.h.0.attn.c_attn.weight": torch.randn(48, 16),
          "transformer.h.0.attn.c_proj.weight": torch.randn(16, 16),
          "transformer.h.0.mlp.c_fc.weight": torch.randn(64, 16),
          "transformer.h.0.mlp.c_proj.weight": torch.randn(16, 64)}
    for folder in (mixed, good):
        torch.save({"model": sd, "model_args": {"n_head": 2}}, folder / "model_5.pt")
    torch.save({"model": sd, "model_args": {"n_head": 2}}, good / "model_9.pt")
    (mixed / "model_7.pt").write_bytes(b"not a checkpoint")
    return mixed, good


def test_batch_exits_1_when_a_task_failed_and_keeps_the_error_rows(checkpoints, tmp_path):
    mixed, good = checkpoints
    out = tmp_path / "r.csv"
    res = run_cli("probe", "batch", mixed, "-p", "spectrum", "-o", out)
    assert res.returncode == 1, res.stderr
    assert one_line(res.stderr) == f"wrote {out}: {len(_rows(out))} rows, 1 error rows"
    errors = [r for r in _rows(out) if r["metric"] == "error"]
    assert len(errors) == 1 and errors[0]["path"].endswith("model_7.pt")
    assert _done_paths(out) == {str(mixed / "model_5.pt")}
    res = run_cli("probe", "batch", mixed, "-p", "spectrum", "--format", "csv")   # the table on stdout
    assert res.returncode == 1 and "model_7.pt" in res.stdout and ",error," in res.stdout, res.stderr


def test_batch_exits_1_when_every_task_failed(checkpoints, tmp_path):
    mixed, _ = checkpoints
    res = run_cli("probe", "batch", mixed / "model_7.pt", "-p", "spectrum", "-p", "rank", "--format", "json")
    assert res.returncode == 1, res.stderr
    import json

    rows = json.loads(res.stdout)
    assert len(rows) == 2 and {r["metric"] for r in rows} == {"error"}


def test_batch_exits_0_when_every_task_succeeded_and_2_for_bad_input(checkpoints, tmp_path):
    _, good = checkpoints
    res = run_cli("probe", "batch", good, "-p", "spectrum", "-o", tmp_path / "r.csv")
    assert res.returncode == 0, res.stderr
    res = run_cli("probe", "batch", tmp_path / "nothing-*.pt", "-p", "spectrum")
    assert res.returncode == 2 and one_line(res.stderr).startswith("Error: no checkpoint matches")


def _rows(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


FIG_OK = '''
NAME = "ok"
TITLE = "a figure that needs no run"


def make(ctx):
    from probe.chart import pyplot

    fig, ax = pyplot().subplots()
    ax.plot([0, 1], [0, 1])
    return ctx.save(fig, NAME)
'''

FIG_BAD_RUN = '''
NAME = "bad-run"
TITLE = "a figure whose run fails to train"


def runs(ctx):
    return ctx.declare("lm-tiny", {"short": {"seq_len": 100000, "steps": 5}})


def make(ctx, runs):
    return []
'''

FIG_BROKEN = '''
NAME = "broken"
TITLE = "a figure script with a bug"


def make(ctx):
    raise RuntimeError("a bug in the script")
'''


def test_figures_exit_1_when_a_figure_failed_and_make_the_others(tmp_path):
    examples = _examples(tmp_path, ok=FIG_OK, bad_run=FIG_BAD_RUN, broken=FIG_BROKEN)
    out = tmp_path / "figs"
    res = run_cli("probe", "figures", "--all", "--tiny", "--examples", examples, "-o", out, timeout=600)
    assert res.returncode == 1, res.stderr
    assert res.stdout.split() == [str(out / "ok.png"), str(out / "ok.pdf")] and (out / "ok.png").exists()
    err = res.stderr.strip().splitlines()
    assert "Traceback" not in res.stderr
    assert any(re.fullmatch(r"figure bad-run failed: training run 'short' failed: .*too short.*", ln) for ln in err), err
    assert "figure broken failed: unexpected RuntimeError: a bug in the script" in err
    assert err[-1] == "Error: 2 of 3 figure(s) failed: bad-run, broken"
    res = run_cli("probe", "figures", "ok", "--tiny", "--examples", examples, "-o", out)
    assert res.returncode == 0 and "failed" not in res.stderr, res.stderr


@pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="Linux scheduling policies")
def test_normal_priority_reaches_the_main_thread_of_another_process():
    """The trainer hands its watcher back the normal policy when training is over: the main thread, which
    writes the page; a process that is not at SCHED_IDLE is left as it is."""
    import subprocess

    from probe.children import idle_priority, normal_priority

    code = "import sys; print('ready', flush=True); sys.stdin.read()"
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True, preexec_fn=idle_priority)
    try:
        assert child.stdout.readline().strip() == "ready"
        assert os.sched_getscheduler(child.pid) == os.SCHED_IDLE
        normal_priority(child.pid)
        assert os.sched_getscheduler(child.pid) == os.SCHED_OTHER
    finally:
        child.kill()
        child.wait()
    normal_priority(child.pid)   # a process that has ended: nothing to do, no error
    before = os.sched_getscheduler(0)
    normal_priority()
    assert os.sched_getscheduler(0) == before
