"""Writing under faults, and one writer per run file.

Every writer of the toolkit (a new run, the snapshots of a run in training, the copy ``--resume``
makes, ``--plot`` figures, ``probe batch`` tables, ``probe report`` pages, ``probe figures`` and a
sweep's manifest) meets four faults on real file systems, through real processes:

* ENOSPC: a small tmpfs, filled up (root only: the tests skip where mounting is not allowed);
* EROFS: the same tmpfs remounted read-only;
* EACCES: a folder the command may not write (as root: the command runs as ``nobody``);
* EFBIG: a file-size limit (RLIMIT_FSIZE) on the command: works on any machine.

Most cases meet the fault at the first write; a full disk or a size limit mid-way through a batch, a
sweep and a training run is tested below them.

The bar for each case: a non-zero exit that is not a signal, exactly one ``Error: ...`` line naming the
cause, no traceback; nothing new left behind (no temporary file, no lock, no empty output); every
file that was there before unchanged; and a run file that training left behind validates and
finishes with ``--resume`` once the fault is gone.

The commands are forked from one helper that imported the CLI once (like ``forkcli``), which here
also sets each call's file-size limit and user.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

import forkcli
from conftest import popen_cli
from waiting import wait_for

CAUSE = {"ENOSPC": "no space left on device", "EROFS": "read-only file system", "EACCES": "permission denied",
         "EFBIG": "file too large"}
NOBODY = 65534
TRAIN = ["--preset", "tiny", "--gamma", "0.8", "--quiet", "--threads", "1"]   # tiny_run's arguments

# forkcli's helper, with a file-size limit and a user per call: both are set in the helper around
# the fork (the child inherits them) and put back at once. SIGXFSZ is ignored, as Python does, so a
# write past the limit fails with EFBIG instead of killing the process.
_SERVER = forkcli._PRELUDE + r'''
import resource, signal
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
for line in sys.stdin:
    argv, out, err, fsize, uid = json.loads(line)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    if fsize:
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, hard))
    if uid is not None:
        os.setegid(uid)
        os.seteuid(uid)
    try:
        pid = call(argv, out, err)
    finally:
        if uid is not None:
            os.seteuid(0)
            os.setegid(0)
        if fsize:
            resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    print(json.dumps(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])), flush=True)
'''


class FaultCLI:
    """Runs CLI commands one at a time, each in a forked process of its own, optionally under a
    file-size limit (``fsize`` bytes) or as another user (``uid``, root only)."""

    def __init__(self):
        self._io = tempfile.mkdtemp(prefix="probe-faults-io-")
        os.chmod(self._io, 0o777)   # a child running as nobody writes its stdout/stderr here
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        env.pop("PROBE_DEBUG", None)
        self._proc = subprocess.Popen([sys.executable, "-c", _SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      text=True, env=env)
        assert self._proc.stdout.readline().strip() == "ready"
        self._n = 0

    def run(self, *argv, fsize: int | None = None, uid: int | None = None,
            timeout: float = 600) -> subprocess.CompletedProcess:
        self._n += 1
        out, err = (os.path.join(self._io, f"{self._n}.{s}") for s in ("out", "err"))
        argv = [str(a) for a in argv]
        self._proc.stdin.write(json.dumps([argv, out, err, fsize, uid]) + "\n")
        self._proc.stdin.flush()
        ready, _, _ = select.select([self._proc.stdout], [], [], timeout)
        assert ready, f"{argv} did not finish within {timeout} s"
        code = json.loads(self._proc.stdout.readline())
        with open(out, encoding="utf-8", errors="replace") as fo, open(err, encoding="utf-8", errors="replace") as fe:
            return subprocess.CompletedProcess(argv, code, fo.read(), fe.read())

    def close(self):
        self._proc.stdin.close()
        self._proc.wait(timeout=60)
        shutil.rmtree(self._io, ignore_errors=True)


def _digest(folder: Path) -> dict[str, str]:
    """Every name in ``folder`` (hidden ones included) with a hash of its bytes."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
            for p in sorted(folder.iterdir())}


def _one_error(res, cause: str) -> str:
    """The command failed cleanly: an exit code (not a signal), one ``Error:`` line naming ``cause``,
    no traceback. Returns the line."""
    assert res.returncode > 0, (res.returncode, res.stderr[-3000:])
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("Error:")]
    assert len(errors) == 1, res.stderr[-3000:]
    assert cause in errors[0], errors[0]
    for bad in ("Traceback", "Exception ignored", "unexpected", "damaged", "Segmentation"):
        assert bad not in res.stderr, res.stderr[-3000:]
    return errors[0]


# --- where a command meets its fault ---------------------------------------------------------------

def _mount_tmpfs(path: Path, size_kb: int) -> None:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("ENOSPC/EROFS cases mount a small tmpfs: they need root")
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kb}k,mode=0755", "tmpfs", str(path)],
                         capture_output=True, text=True)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({res.stderr.strip() or res.returncode})")


def _free(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


class Place:
    """A folder in which every write meets ``fault`` once :meth:`arm` is called; :meth:`disarm` takes
    the fault away again (space freed, writable again, no limit)."""

    def __init__(self, fault: str, root: Path):
        self.fault, self.fsize, self.uid = fault, None, None
        self.dir = Path(tempfile.mkdtemp(prefix=f"{fault}-", dir=root))
        os.chmod(self.dir, 0o755)
        self.mounted = False
        if fault in ("ENOSPC", "EROFS"):
            _mount_tmpfs(self.dir, 16 * 1024)
            self.mounted = True

    def arm(self, *, leave: int = 0, limit: int | None = None) -> None:
        """``leave``: bytes left free on the full disk; ``limit``: the file-size limit for EFBIG."""
        if self.fault == "ENOSPC":
            fd = os.open(self.dir / "filler", os.O_WRONLY | os.O_CREAT, 0o644)
            try:   # fill the disk up to `leave` bytes, then page by page to the last one
                want = max(0, _free(self.dir) - leave)
                block = b"\0" * (1 << 20)
                while want > 0:
                    want -= os.write(fd, block[:min(len(block), want)])
                while leave == 0:
                    os.write(fd, block[:4096])
            except OSError:
                pass
            finally:
                os.close(fd)
        elif self.fault == "EROFS":
            subprocess.run(["mount", "-o", "remount,ro", str(self.dir)], check=True)
        elif self.fault == "EACCES":
            if os.geteuid() == 0:
                self.uid = NOBODY      # root ignores modes: the command runs as nobody (the folder is 0755 root)
            else:
                os.chmod(self.dir, 0o555)
        elif self.fault == "EFBIG":
            assert limit, "an EFBIG case needs a limit"
            self.fsize = limit

    def disarm(self) -> None:
        if self.fault == "ENOSPC":
            (self.dir / "filler").unlink()
        elif self.fault == "EROFS":
            subprocess.run(["mount", "-o", "remount,rw", str(self.dir)], check=True)
        elif self.fault == "EACCES":
            self.uid = None
            os.chmod(self.dir, 0o755)
        self.fsize = None

    def cleanup(self) -> None:
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.dir)], capture_output=True)
        with contextlib.suppress(OSError):
            os.chmod(self.dir, 0o755)   # a 0555 folder (EACCES without root) would keep its files
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def root():
    """A folder everyone may read (a command running as nobody reads its inputs here)."""
    d = Path(tempfile.mkdtemp(prefix="probe-faults-"))
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def cli():
    c = FaultCLI()
    yield c
    c.close()


FIGURE_SCRIPT = '''"""A figure that needs no runs: the fault tests write it."""
NAME = "fault"
TITLE = "a line, for the fault tests"


def make(ctx):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot([0, 1, 2], [0, 1, 4])
    return ctx.save(fig, NAME)
'''


@pytest.fixture(scope="module")
def golden(root, cli, tiny_run):
    """Inputs and earlier outputs, written without a fault: the run, a plot, tables, a page, a figure."""
    g = root / "golden"
    g.mkdir()
    shutil.copy(tiny_run, g / "run.h5")
    (g / "ex").mkdir()
    (g / "ex" / "fig_fault.py").write_text(FIGURE_SCRIPT)
    (g / "runs").mkdir()
    os.chmod(g / "runs", 0o777)
    for argv in (["probe", "similarity", g / "run.h5", "--plot", g / "sim.png"],
                 ["probe", "spectrum", g / "run.h5", "--plot", g / "spec.svg"],
                 ["probe", "batch", g / "run.h5", "--probe", "spectrum", "--probe", "similarity", "-o", g / "t.csv"],
                 ["probe", "batch", g / "run.h5", "--probe", "spectrum", "--probe", "similarity", "-o", g / "t.json"],
                 ["probe", "report", g / "run.h5", "--probe", "similarity", "-o", g / "r.html"],
                 ["probe", "figures", "fault", "--examples", g / "ex", "-o", g / "figs", "--runs", g / "runs"]):
        res = cli.run(*argv)
        assert res.returncode == 0, res.stderr
    for p in g.rglob("*"):
        os.chmod(p, 0o777 if p.is_dir() else 0o644)
    return g


# --- the writers ---------------------------------------------------------------------------------
# Each: (stage: copies earlier outputs into the folder and returns the command, EFBIG limit in bytes)

def _create(d: Path, g: Path):
    shutil.copy(g / "run.h5", d / "run.h5")   # --overwrite: the old run must survive a failed create
    return ["probe-train", *TRAIN, "--overwrite", "--out", d / "run.h5"], 64 * 1024


def _resume(d: Path, g: Path):
    shutil.copy(g / "run.h5", d / "run.h5")   # a finished 40-step run, continued to 80 steps
    return ["probe-train", "--resume", "--steps", "80", "--quiet", "--out", d / "run.h5"], \
        (g / "run.h5").stat().st_size // 2


def _plot_png(d: Path, g: Path):
    shutil.copy(g / "sim.png", d / "sim.png")
    return ["probe", "similarity", g / "run.h5", "--plot", d / "sim.png"], 4096


def _plot_svg(d: Path, g: Path):   # no earlier output: nothing at all may be left
    return ["probe", "spectrum", g / "run.h5", "--plot", d / "spec.svg"], 4096


def _table_csv(d: Path, g: Path):   # the table holds every row already: the batch only rewrites it
    shutil.copy(g / "t.csv", d / "t.csv")
    shutil.copy(g / "t.csv.inputs.json", d / "t.csv.inputs.json")   # its record: no input has changed
    return ["probe", "batch", g / "run.h5", "--probe", "spectrum", "--probe", "similarity", "-o", d / "t.csv"], \
        (g / "t.csv").stat().st_size // 2


def _table_json(d: Path, g: Path):
    return ["probe", "batch", g / "run.h5", "--probe", "spectrum", "--probe", "similarity", "-o", d / "t.json"], \
        (g / "t.json").stat().st_size // 2


def _report(d: Path, g: Path):
    shutil.copy(g / "r.html", d / "r.html")
    return ["probe", "report", g / "run.h5", "--probe", "similarity", "-o", d / "r.html"], 4096


def _report_watch(d: Path, g: Path):   # the run is finished: the watcher writes its last page and ends
    shutil.copy(g / "r.html", d / "r.html")
    return ["probe", "report", g / "run.h5", "--probe", "similarity", "--watch", "--interval", "0.2",
            "-o", d / "r.html"], 4096


def _figures(d: Path, g: Path):
    for name in ("fault.png", "fault.pdf"):
        shutil.copy(g / "figs" / name, d / name)
    return ["probe", "figures", "fault", "--examples", g / "ex", "-o", d, "--runs", g / "runs"], 4096


def _sweep(d: Path, g: Path):
    (d / "sweep.json").write_text('{"an earlier manifest": true}\n')
    return ["probe-train", "sweep", "--preset", "tiny", "--grid", "steps=4", "--jobs", "1", "--out", d], 64 * 1024


# what each writer writes in the golden folder (or, for a run, at least): an EFBIG limit must be below it
WRITTEN = {"create": "run.h5", "resume": "run.h5", "plot-png": "sim.png", "plot-svg": "spec.svg", "table-csv": "t.csv",
           "table-json": "t.json", "report": "r.html", "report-watch": "r.html", "figures": "figs/fault.png",
           "sweep": "run.h5"}
WRITERS = {"create": _create, "resume": _resume, "plot-png": _plot_png, "plot-svg": _plot_svg,
           "table-csv": _table_csv, "table-json": _table_json, "report": _report, "report-watch": _report_watch,
           "figures": _figures,
           "sweep": _sweep}
CASES = [(fault, writer) for fault in CAUSE for writer in WRITERS]


@pytest.mark.parametrize("fault,writer", CASES, ids=[f"{f}-{w}" for f, w in CASES])
def test_a_write_that_fails_ends_in_one_line_and_changes_nothing(fault, writer, root, golden, cli):
    place = Place(fault, root)
    try:
        argv, limit = WRITERS[writer](place.dir, golden)
        assert 1024 <= limit <= (golden / WRITTEN[writer]).stat().st_size // 2, "the limit must stop the write"
        place.arm(leave=0, limit=limit)
        before = _digest(place.dir)
        res = cli.run(*argv, fsize=place.fsize, uid=place.uid)
        if writer == "sweep" and fault == "EFBIG":
            # the manifest fits under the limit, the run does not: the sweep records the failed run and
            # exits 1 (its failures are rows, not an error)
            assert res.returncode == 1, res.stderr
            assert "Traceback" not in res.stderr
            runs = json.loads((place.dir / "sweep.json").read_text())["runs"]
            assert [r["status"] for r in runs] == ["failed"] and CAUSE[fault] in runs[0]["error"], runs
            assert set(_digest(place.dir)) == set(before)
            return
        line = _one_error(res, CAUSE[fault])
        assert _digest(place.dir) == before, line   # nothing new, nothing changed, no temporary file
        if writer in ("create", "resume"):
            place.disarm()   # the fault gone: the same run continues
            again = cli.run(*argv)
            assert again.returncode == 0, again.stderr
            assert cli.run("probe", "validate", place.dir / "run.h5").returncode == 0
            assert sorted(p.name for p in place.dir.iterdir() if p.name != "filler") == ["run.h5"]
    finally:
        place.cleanup()


# --- a full disk or a size limit in the middle of a batch or a sweep -------------------------------

@pytest.fixture(scope="module")
def many(root, cli):
    """Eight names for one 56-snapshot run, and the table a batch of them writes without a fault."""
    from conftest import linked_runs

    (root / "many").mkdir()
    folder = linked_runs(root / "many", 8)
    res = cli.run(*_many_batch(folder, folder / "whole.csv"))
    assert res.returncode == 0, res.stderr
    return folder


def _many_batch(folder: Path, table: Path) -> list:
    return ["probe", "batch", *sorted(folder.glob("run_*.h5")), "-p", "bias", "--step", "all", "-o", table]


def _csv_rows(table: Path) -> list[str]:
    return table.read_text().splitlines()[1:]


@pytest.mark.parametrize("fault", ["ENOSPC", "EFBIG"])
def test_a_batch_that_meets_a_fault_midway_keeps_its_last_table_and_the_rerun_completes(fault, root, many, cli):
    """The first save (one task's rows) fits, the whole table does not: the batch ends in one line
    saying what its table holds, and once there is room the same command does the rest, each row once."""
    whole = (many / "whole.csv").stat().st_size
    place = Place(fault, root)
    try:
        # ENOSPC: a rewrite needs room for the old table and its new copy at once
        place.arm(leave=whole // 2, limit=whole // 2)
        table = place.dir / "t.csv"
        res = cli.run(*_many_batch(many, table), fsize=place.fsize)
        line = _one_error(res, CAUSE[fault])
        assert re.search(rf"; {re.escape(str(table))} holds the rows of [1-7] of 8 tasks, as of its last save: the "
                         "same command does the rest once it can write there$", line), line
        kept = _csv_rows(table)
        assert kept and len(kept) < len(_csv_rows(many / "whole.csv"))
        place.disarm()
        again = cli.run(*_many_batch(many, table))
        assert again.returncode == 0, again.stderr
        rows = _csv_rows(table)
        assert len(rows) == len(set(rows)) and set(kept) <= set(rows)
        assert sorted(rows) == sorted(_csv_rows(many / "whole.csv"))
    finally:
        place.cleanup()


@pytest.mark.slow   # 20-30 s: a batch of eight slower tasks, so that the change lands mid-way
def test_a_batch_whose_folder_turns_read_only_midway_keeps_its_last_table_and_the_rerun_completes(root, many, cli):
    """The output folder made read-only while the batch runs (as root, the batch runs as nobody, whom
    the mode binds): one line, the table of its last save whole, and the same command finishes once
    the folder is writable again. (A remount read-only is refused while the batch holds its lock file
    open, so the mode stands in for it.)"""
    from concurrent.futures import ThreadPoolExecutor

    place = Place("EACCES", root)
    try:
        os.chmod(place.dir, 0o777)
        table = place.dir / "t.csv"
        argv = _many_batch(many, table)
        argv[argv.index("bias")] = "ood"   # a second a task: the change lands mid-way
        with ThreadPoolExecutor(1) as pool:
            done = pool.submit(cli.run, *argv, uid=NOBODY if os.geteuid() == 0 else None)
            wait_for(lambda: table.exists() or done.done(), "the first save of the table")
            os.chmod(place.dir, 0o555)
            res = done.result()
        if res.returncode == 0:
            pytest.skip("the batch finished before its folder turned read-only")   # a very fast machine
        line = _one_error(res, CAUSE["EACCES"])
        assert "holds the rows of" in line and "the same command does the rest once it can write there" in line
        kept = _csv_rows(table)
        assert kept
        os.chmod(place.dir, 0o777)
        again = cli.run(*argv, uid=NOBODY if os.geteuid() == 0 else None)
        assert again.returncode == 0, again.stderr
        rows = _csv_rows(table)
        assert len(rows) == len(set(rows)) and set(kept) <= set(rows)
        assert {r.split(",")[0] for r in rows} == {str(p) for p in many.glob("run_*.h5")}
    finally:
        place.cleanup()


@pytest.mark.slow   # 12 s each: two runs trained, then trained on
@pytest.mark.parametrize("fault", ["ENOSPC", "EFBIG"])
def test_a_sweep_that_meets_a_fault_midway_records_it_and_the_rerun_finishes_every_run(fault, root, golden, cli):
    """Two runs, each stopped by the fault (after its first snapshots, or for lack of room at its start):
    the sweep records both as failed with the cause and exits 1; once there is room the same command
    finishes both, each file once."""
    full = (golden / "run.h5").stat().st_size
    place = Place(fault, root)
    try:
        place.arm(leave=int(0.8 * full), limit=int(0.8 * full))   # ENOSPC: the first run fills it, the second finds none
        argv = ["probe-train", "sweep", "--preset", "tiny", "--grid", "seed=0,1", "--jobs", "1", "--out", place.dir]
        res = cli.run(*argv, fsize=place.fsize)
        assert res.returncode == 1, res.stderr[-3000:]
        assert "Traceback" not in res.stderr and "unexpected" not in res.stderr
        runs = json.loads((place.dir / "sweep.json").read_text())["runs"]
        assert [r["status"] for r in runs] == ["failed", "failed"] and all(CAUSE[fault] in r["error"] for r in runs)
        place.disarm()
        again = cli.run(*argv)
        assert again.returncode == 0, again.stderr
        runs = json.loads((place.dir / "sweep.json").read_text())["runs"]
        assert [r["status"] for r in runs] == ["done", "done"]
        assert sorted(p.name for p in place.dir.glob("*.h5")) == sorted(Path(r["path"]).name for r in runs)
        for r in runs:
            assert cli.run("probe", "validate", place.dir / r["path"]).returncode == 0
    finally:
        place.cleanup()


# --- a full disk or a size limit in the middle of training ----------------------------------------

@pytest.mark.parametrize("fault", ["ENOSPC", "EFBIG"])
def test_a_fault_during_training_keeps_the_snapshots_and_resume_finishes_the_run(fault, root, golden, cli):
    place = Place(fault, root)
    try:
        full = (golden / "run.h5").stat().st_size
        # creation (about 60 % of the finished file) fits, the last snapshots do not
        place.arm(leave=int(0.8 * full), limit=int(0.8 * full))
        before = _digest(place.dir)
        out = place.dir / "run.h5"
        res = cli.run("probe-train", *TRAIN, "--out", out, fsize=place.fsize)
        line = _one_error(res, CAUSE[fault])
        assert f"resume with probe-train --resume --out {out}" in line, line
        assert "kept" in line, line
        assert set(_digest(place.dir)) == set(before) | {"run.h5"}   # no lock, no temporary file
        # what was written validates, and holds some snapshots but not all
        val = cli.run("probe", "validate", out)
        assert val.returncode == 0, val.stdout + val.stderr
        from probe.format import Run

        with Run(out) as run:
            assert 1 <= run.n_snapshots < 9, run.n_snapshots
        place.disarm()
        again = cli.run("probe-train", "--resume", "--out", out, "--quiet")
        assert again.returncode == 0, again.stderr
        assert cli.run("probe", "validate", out).returncode == 0
        with Run(golden / "run.h5") as ref, Run(out) as run:   # the same run as one never interrupted
            assert np.array_equal(run.steps, ref.steps)
            for name in ref.tensors():
                np.testing.assert_allclose(run.tensor(name)[...], ref.tensor(name)[...], rtol=1e-5, atol=1e-6,
                                           err_msg=name)
    finally:
        place.cleanup()


def test_a_hard_file_size_limit_stops_training_before_it_is_crossed(tmp_path, golden):
    """``ulimit -f`` sets the hard limit too: a write that failed against it could not even be closed
    safely, so the writer stops before the snapshot that would cross it (a process of its own: a
    hard limit cannot be raised again)."""
    import resource

    from conftest import _script

    limit = int(0.8 * (golden / "run.h5").stat().st_size)

    def limited():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    out = tmp_path / "run.h5"
    res = subprocess.run(_script("probe-train") + TRAIN + ["--out", str(out)], capture_output=True, text=True,
                         preexec_fn=limited, timeout=600)
    line = _one_error(res, CAUSE["EFBIG"])
    assert f"limit of {limit} bytes" in line and "resume with" in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.h5"] and out.stat().st_size <= limit
    from probe.format import Run, validate

    assert validate(out) == []
    with Run(out) as run:
        assert 1 <= run.n_snapshots < 9


def test_figures_read_finished_runs_from_a_read_only_folder(root, golden, cli, tmp_path):
    """Only the output folder must take files: the runs folder may be a read-only share."""
    place = Place("EROFS", root)
    try:
        place.arm()
        res = cli.run("probe", "figures", "fault", "--examples", golden / "ex", "-o", tmp_path, "--runs", place.dir)
        assert res.returncode == 0, res.stderr
        assert (tmp_path / "fault.png").read_bytes()[:4] == b"\x89PNG"
    finally:
        place.cleanup()


def test_output_redirected_to_a_full_disk_is_one_line(root, golden):
    from conftest import _script

    place = Place("ENOSPC", root)
    try:
        place.arm()
        before = _digest(place.dir)
        with open(place.dir / "info.json", "w") as fh:   # the shell's `> info.json`: made before the disk is asked
            res = subprocess.run(_script("probe") + ["info", str(golden / "run.h5"), "--format", "json"],
                                 stdout=fh, stderr=subprocess.PIPE, text=True, timeout=300)
        line = _one_error(res, CAUSE["ENOSPC"])
        assert line.endswith("while writing the output (stdout)"), line
        assert set(_digest(place.dir)) == set(before) | {"info.json"}
    finally:
        place.cleanup()


def test_a_plot_through_a_link_is_written_where_the_link_points(tmp_path, cli, golden):
    (tmp_path / "plots").mkdir()
    (tmp_path / "sim.png").symlink_to(tmp_path / "plots" / "sim.png")
    res = cli.run("probe", "similarity", golden / "run.h5", "--plot", tmp_path / "sim.png")
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "sim.png").is_symlink() and (tmp_path / "plots" / "sim.png").read_bytes()[:4] == b"\x89PNG"


# --- one writer per run file -----------------------------------------------------------------------

def _snapshots(path) -> int:
    from probe.errors import ProbeError
    from probe.format import Run

    try:
        with Run(path) as run:
            return run.n_snapshots
    except (ProbeError, OSError):
        return 0


LONG = ["--steps", "1000000", "--snapshot-every", "20"]   # runs until it is stopped


def test_a_second_trainer_is_refused_while_the_first_writes(tmp_path, cli):
    out = tmp_path / "run.h5"
    lock = tmp_path / ".run.h5.lock"
    first = popen_cli("probe-train", *TRAIN, *LONG, "--out", out)
    try:
        wait_for(lambda: _snapshots(out) >= 2 and lock.exists() and lock.read_text().strip(),
                  "two snapshots", first)
        first.send_signal(signal.SIGSTOP)   # frozen while it holds its lock: the file cannot change meanwhile
        try:
            before = _digest(tmp_path)
            for extra in (["--overwrite"], ["--resume"], []):
                res = cli.run("probe-train", *TRAIN, *extra, "--out", out)
                line = _one_error(res, f"{out} is being written by process {first.pid}")
                assert "probe-train" in line and "--steps 1000000" in line and "wait for it or stop it" in line, line
            assert _digest(tmp_path) == before   # the refused trainers touched nothing
        finally:
            first.send_signal(signal.SIGCONT)
        first.send_signal(signal.SIGINT)   # stops at the next step boundary, its file resumable
        _, stderr = first.communicate(timeout=600)
        assert first.returncode == 130, stderr
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    # the first run is whole and its lock is gone
    from probe.format import Run, validate

    assert validate(out) == []
    with Run(out) as run:
        assert run.n_snapshots >= 2 and f"continues from step {int(run.steps[-1])}" in stderr, stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.h5"]


def test_a_killed_writer_leaves_no_lock_that_stops_the_next(tmp_path, cli):
    out = tmp_path / "run.h5"
    first = popen_cli("probe-train", *TRAIN, *LONG, "--out", out)
    try:
        wait_for(lambda: _snapshots(out) >= 2, "two snapshots", first)
    finally:
        first.kill()
        first.wait()
    assert (tmp_path / ".run.h5.lock").exists()   # the file stays; the kernel dropped the lock on it
    from probe.format import Run

    with Run(out) as run:
        last = int(run.steps[-1])
    res = cli.run("probe-train", "--resume", "--quiet", "--steps", last + 20, "--out", out)
    assert res.returncode == 0, res.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.h5"]


def test_a_killed_writers_temporary_files_are_removed_by_the_next(tmp_path, cli):
    stale = [tmp_path / ".run.h5.4242.0badc0de.new", tmp_path / "run.h5.creating"]
    for p in stale:
        p.write_bytes(b"\x89HDF\r\n\x1a\n half a file")
    (tmp_path / ".other.h5.4242.0badc0de.new").write_bytes(b"not ours")
    res = cli.run("probe-train", *TRAIN, "--steps", "4", "--out", tmp_path / "run.h5")
    assert res.returncode == 0, res.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [".other.h5.4242.0badc0de.new", "run.h5"]


def test_readers_do_not_take_the_lock(tmp_path, cli, tiny_run):
    from probe.files import OutputLock

    run = tmp_path / "run.h5"
    shutil.copy(tiny_run, run)
    with OutputLock(run):   # this process writes it
        res = cli.run("probe", "similarity", run, "--format", "json")
        assert res.returncode == 0, res.stderr
        refused = cli.run("probe-train", *TRAIN, "--overwrite", "--out", run)
        _one_error(refused, f"is being written by process {os.getpid()}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.h5"]


def test_the_lock_is_reentrant_and_released_once(tmp_path):
    from probe.files import OutputLock, lock_path

    path = tmp_path / "x.h5"
    a, b = OutputLock(path).acquire(), OutputLock(path).acquire()
    assert Path(lock_path(path)).exists()
    b.release()
    assert Path(lock_path(path)).exists()   # a still holds it
    a.release()
    assert not Path(lock_path(path)).exists()


def test_a_sweep_starts_one_trainer_per_file(tmp_path):
    """Two jobs for one file (the same run asked for twice, its overrides in another order) train once."""
    from probe_train.runs import plan, train_jobs

    _, one = plan({"r": ("tiny", {"gamma": 0.8, "steps": 4})}, tmp_path)
    _, two = plan({"r": ("tiny", {"steps": 4, "gamma": 0.8})}, tmp_path)
    assert one[0].path == two[0].path and one[0].command != two[0].command
    logged = []
    failed = train_jobs(one + two, jobs=2, log=logged.append)
    assert failed == {}
    assert logged[0].startswith("training 1 run(s)") and sum(m.strip().startswith("$ probe-train") for m in logged) == 1


# --- the routine every whole-file writer uses ----------------------------------------------------

def test_write_atomic_keeps_the_old_file_when_the_content_fails(tmp_path):
    from probe.files import write_atomic

    target = tmp_path / "page.html"
    target.write_text("old")
    os.chmod(target, 0o640)

    def broken(fh):
        fh.write(b"half")
        raise ValueError("the figure could not be drawn")

    with pytest.raises(ValueError):
        write_atomic(target, broken, "report")
    assert target.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["page.html"]
    write_atomic(target, "new", "report")
    assert target.read_text() == "new" and (target.stat().st_mode & 0o777) == 0o640   # its mode kept


def test_write_atomic_gives_new_files_the_usual_mode(tmp_path):
    from probe.files import write_atomic

    old = os.umask(0o022)
    try:
        write_atomic(tmp_path / "a.csv", b"x\n", "results")
    finally:
        os.umask(old)
    assert (tmp_path / "a.csv").stat().st_mode & 0o777 == 0o644   # not a temporary file's 0600


def test_the_cause_is_read_from_hdf5_messages_too():
    from probe.errors import is_write_fault, write_cause

    h5 = RuntimeError("Unable to flush dataset (file write failed: time = Tue Nov 24 04:04:58 2026\n, filename = "
                      "'run.h5', file descriptor = 3, errno = 28, error message = 'No space left on device', ...)")
    assert is_write_fault(h5) and write_cause(h5) == "no space left on device"
    assert write_cause(OSError(30, "Read-only file system")) == "read-only file system"
    assert write_cause(OSError(122, "Disk quota exceeded")) == "disk quota exceeded"
    assert write_cause(OSError(5, "Input/output error")) == "input/output error"
    assert not is_write_fault(RuntimeError("Unable to open object (bad symbol table node signature)"))
