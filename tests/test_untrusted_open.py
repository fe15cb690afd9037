"""Untrusted files answer in seconds and every command stops on a signal (issue 35, point 1).

A killed run's file keeps its SWMR-writer flag, and so does every copy of it; HDF5 then allows only a
SWMR read, whose retries on a damaged file once slept for hours with the GIL held (Ctrl-C did
nothing). Here: killed runs cut at several points answer with one line; the flag counts only while a
writer holds the run's lock; a damaged file under a live lock still answers within the bounded
retries; Ctrl-C, SIGTERM and SIGHUP stop a command in a slow open and inside one long library call.
"""
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import h5py
import pytest

from broken import assert_clean_error
from conftest import popen_cli, run_cli
from waiting import DEADLINE, committed, wait_for

# A command on a damaged file must answer within seconds; the deadline only stops a hang (the old
# SWMR retries ran for 30 minutes) from stalling the suite, and leaves room for a busy machine.
ANSWER = 60

COMMANDS = {
    "info": ("info",),
    "validate": ("validate",),
    "similarity": ("similarity",),
    "report": ("report", "--max-steps", "2", "-o", "page.html"),
}


def _swmr_flag(path: Path) -> bool:
    head = path.read_bytes()[:12]
    return head[8] == 3 and bool(head[11] & 0b100)


@pytest.fixture(scope="module")
def killed(tmp_path_factory) -> Path:
    """A run SIGKILLed while it wrote (after 3 snapshots at least): its file keeps the SWMR-writer
    flag, and its lock file names the dead process."""
    out = tmp_path_factory.mktemp("killed") / "killed.h5"
    proc = popen_cli("probe-train", "--preset", "tiny", "--steps", "100000", "--snapshot-every", "10",
                     "--threads", "1", "--quiet", "--out", out)
    wait_for(lambda: committed([out], 30), "three committed snapshots", proc)
    proc.kill()
    proc.communicate(timeout=DEADLINE)
    assert _swmr_flag(out)
    assert (out.parent / ".killed.h5.lock").exists()
    return out


def _cut(killed: Path, folder: Path, fraction: float) -> Path:
    data = killed.read_bytes()
    out = folder / "cut.h5"
    out.write_bytes(data[: int(len(data) * fraction)] if fraction < 1 else data[:-1])
    return out


def test_a_killed_runs_file_reads_its_snapshots(killed, tmp_path):
    assert run_cli("probe", "info", killed, timeout=ANSWER).returncode == 0
    res = run_cli("probe", "validate", killed, timeout=ANSWER)
    assert res.returncode == 0 and res.stdout.strip().endswith("valid"), res.stdout + res.stderr
    res = run_cli("probe", "similarity", killed, "--tokens", "0:4", timeout=ANSWER)
    assert res.returncode == 0 and res.stdout.strip(), res.stderr


@pytest.mark.parametrize("fraction", [0.1, 1 / 3, 0.5, 2 / 3, 0.95, 1.0], ids=["10%", "1/3", "1/2", "2/3", "95%", "last-byte"])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_killed_runs_file_copied_in_part_is_refused_at_once(killed, tmp_path, fraction, command):
    """An interrupted copy (no writer holds it: its lock file is not there) is checked against the size
    its superblock declares, flag or not: one line, no SWMR retries."""
    cut = _cut(killed, tmp_path, fraction)
    assert _swmr_flag(cut)
    res = run_cli("probe", *COMMANDS[command][:1], cut, *COMMANDS[command][1:], cwd=tmp_path, timeout=ANSWER)
    assert_clean_error(res, f"{cut}: truncated HDF5 file", "no process is writing it")
    assert not (tmp_path / "page.html").exists()


@pytest.mark.parametrize("at", [0.1, 0.5, 0.9], ids=["10%", "50%", "90%"])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_killed_runs_file_scribbled_on_answers_cleanly(killed, tmp_path, at, command):
    """4 KiB of random bytes over a killed run's file (its SWMR flag set): whatever they hit — metadata,
    a weight, the resume state, free space — every command answers within seconds, without a
    traceback: an answer, validate's findings, or one line."""
    import random

    data = bytearray(killed.read_bytes())
    start = int(len(data) * at)
    data[start:start + 4096] = random.Random(start).randbytes(4096)
    path = tmp_path / "scribbled.h5"
    path.write_bytes(bytes(data))
    res = run_cli("probe", *COMMANDS[command][:1], path, *COMMANDS[command][1:], cwd=tmp_path, timeout=ANSWER)
    assert "Traceback" not in res.stderr and res.returncode in (0, 1, 2), (res.returncode, res.stderr)
    if res.returncode == 2:
        assert_clean_error(res, f"{path}")


def test_a_stale_lock_of_a_dead_writer_does_not_make_a_file_live(killed, tmp_path):
    """Cut in place, beside the lock file its killed writer left (naming a process that is gone)."""
    folder = tmp_path / "beside"
    folder.mkdir()
    shutil.copy(killed.parent / ".killed.h5.lock", folder / ".cut.h5.lock")
    cut = _cut(killed, folder, 2 / 3)
    assert_clean_error(run_cli("probe", "info", cut, timeout=ANSWER), "truncated HDF5 file")


@pytest.fixture
def lock_holder():
    """``hold(path)``: a real process holding the toolkit's output lock of ``path`` (as a live
    trainer does), until the test ends."""
    procs = []

    def hold(path: Path):
        code = ("import sys; from probe.files import OutputLock; lock = OutputLock(sys.argv[1]).acquire(); "
                "print('locked', flush=True); sys.stdin.read()")
        proc = subprocess.Popen([sys.executable, "-c", code, str(path)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True)
        procs.append(proc)
        assert proc.stdout.readline() == "locked\n"
        return proc

    yield hold
    for proc in procs:
        proc.stdin.close()
        proc.wait(timeout=DEADLINE)


@pytest.mark.parametrize("fraction", [0.1, 1 / 3, 2 / 3, 0.95], ids=["10%", "1/3", "2/3", "95%"])
def test_a_damaged_file_under_a_live_lock_answers_within_the_bounded_retries(killed, tmp_path, lock_holder, fraction):
    """While a writer holds the lock its file may be ahead of its bytes on disk, so it is opened for a
    SWMR read without the size check: what is missing is found by the read, bounded in retries."""
    cut = _cut(killed, tmp_path, fraction)
    lock_holder(cut)
    for command in ("info", "similarity"):
        res = run_cli("probe", command, cut, timeout=ANSWER)
        assert_clean_error(res, f"{cut}: ")
        assert "truncated HDF5 file" not in res.stderr
    res = run_cli("probe", "validate", cut, timeout=ANSWER)
    assert res.returncode in (1, 2) and "valid" != res.stdout.strip()[-5:], res.stdout + res.stderr


def test_the_metadata_retries_are_bounded_on_this_platform():
    """The bound is set through HDF5's own C API, from the library h5py runs on: it must be found
    (without it, a SWMR read of a damaged file sleeps for hours)."""
    from probe.format import _h5

    assert _h5._set_read_attempts() is not None
    assert 0 < _h5.READ_ATTEMPTS <= 24


# --- whether a writer holds the lock ----------------------------------------------------------------

def test_writer_alive_without_a_lock_file(tmp_path):
    from probe.files import writer_alive

    assert writer_alive(tmp_path / "run.h5") is False


def test_writer_alive_with_a_live_holder(tmp_path, lock_holder):
    from probe.files import writer_alive

    lock_holder(tmp_path / "run.h5")
    assert writer_alive(tmp_path / "run.h5") is True


def test_writer_alive_after_the_holder_was_killed(tmp_path, lock_holder):
    from probe.files import writer_alive

    proc = lock_holder(tmp_path / "run.h5")
    proc.kill()
    proc.wait(timeout=DEADLINE)
    assert (tmp_path / ".run.h5.lock").exists()      # left behind, its flock gone with the process
    assert writer_alive(tmp_path / "run.h5") is False


def _zombie(pid: int) -> bool:
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().rsplit(")", 1)[1].split()[0] == "Z"


@pytest.mark.skipif(not os.path.exists("/proc/locks"), reason="the kernel's lock table is Linux's")
def test_writer_alive_after_the_holder_was_killed_and_nobody_reaped_it(tmp_path, lock_holder):
    """A zombie (a container whose PID 1 does not reap) still answers kill(pid, 0), but its flock went
    with its open files: the lock, not the process id, says whether a writer is at work (issue 58.11)."""
    from probe.files import writer_alive

    proc = lock_holder(tmp_path / "run.h5")
    proc.kill()
    wait_for(lambda: _zombie(proc.pid), "the killed holder a zombie, not reaped")
    try:
        os.kill(proc.pid, 0)   # (what the old test asked: the process id still answers)
        assert writer_alive(tmp_path / "run.h5") is False
    finally:
        proc.wait(timeout=DEADLINE)


def test_writer_alive_while_a_writer_has_not_yet_written_itself_in(tmp_path):
    from probe.files import writer_alive

    (tmp_path / ".run.h5.lock").write_text("")
    assert writer_alive(tmp_path / "run.h5") is True


@pytest.mark.parametrize("text, alive", [("99999999999999999999999\nx\n", False), ("\u00b2\nx\n", True)],
                         ids=["no-such-process-id", "no-process-id-yet"])
def test_writer_alive_reads_a_stranger_lock_file_without_an_exception(tmp_path, text, alive):
    """A number no process can have is no writer; text that is no number is a writer yet to write
    itself in (the reader is then the less strict, never wrong)."""
    from probe.files import writer_alive

    (tmp_path / ".run.h5.lock").write_text(text)
    assert writer_alive(tmp_path / "run.h5") is alive


def test_writer_alive_for_this_process_own_lock(tmp_path):
    """A resume holds the lock of the file it reads before writing: not another writer."""
    from probe.files import OutputLock, writer_alive

    with OutputLock(tmp_path / "run.h5"):
        assert writer_alive(tmp_path / "run.h5") is False


def test_writer_alive_ignores_a_lock_path_that_is_not_a_file(tmp_path):
    from probe.files import writer_alive

    os.mkfifo(tmp_path / ".run.h5.lock")
    assert writer_alive(tmp_path / "run.h5") is False


# --- signals ----------------------------------------------------------------------------------------

STOPS = pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
LINE = {signal.SIGINT: "Error: interrupted", signal.SIGTERM: "Error: interrupted by SIGTERM",
        signal.SIGHUP: "Error: interrupted by SIGHUP"}


def _holds_open(pid: int, path: Path) -> bool:
    try:
        return any(os.readlink(f"/proc/{pid}/fd/{fd}") == str(path) for fd in os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return False


@pytest.fixture(scope="module")
def many_links(tiny_run, tmp_path_factory) -> Path:
    """A run file with 200,000 soft links more: opening it (every link is checked) takes seconds."""
    out = tmp_path_factory.mktemp("links") / "links.h5"
    shutil.copy(tiny_run, out)
    with h5py.File(out, "a") as f:
        g = f.create_group("extra").id
        for i in range(200_000):
            g.links.create_soft(b"l%d" % i, b"/extra")
    return out


@STOPS
def test_a_signal_during_a_slow_open_stops_the_command(many_links, sig):
    proc = popen_cli("probe", "validate", many_links)
    wait_for(lambda: _holds_open(proc.pid, many_links), "the file opened", proc)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=DEADLINE)
    assert proc.returncode == 128 + sig and err.strip() == LINE[sig] and out == "", (proc.returncode, out, err)


def _cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.fixture(scope="module")
def big_matrix(tmp_path_factory) -> tuple[Path, Path]:
    """A checkpoint with one 4000 x 4000 weight: its singular values take one numpy call of ~17 s on
    one core of the CI machine, during which Python runs no signal handler."""
    import torch
    from safetensors.torch import save_file

    folder = tmp_path_factory.mktemp("big")
    g = torch.Generator().manual_seed(0)
    save_file({"embed.weight": torch.randn(50, 4000, generator=g), "mlp.weight": torch.randn(4000, 4000, generator=g)},
              str(folder / "big.safetensors"))
    (folder / "map.json").write_text('{"heads": 1, "token_embedding": "embed.weight", "layer0/W_in": "mlp.weight"}')
    return folder / "big.safetensors", folder / "map.json"


@STOPS
def test_a_signal_inside_one_long_library_call_stops_the_command(big_matrix, sig):
    """The watchdog ends it (probe/signals.py): the main thread, inside the SVD, cannot."""
    model, mapping = big_matrix
    proc = popen_cli("probe", "condense", model, "--mapping", mapping, "--neurons", "",
                     env={**os.environ, "OMP_NUM_THREADS": "1"})
    # past start-up and the read (about 1 s of CPU here), inside the SVD (about 17 s)
    wait_for(lambda: _cpu_seconds(proc.pid) >= 3, "3 s of computing", proc)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=DEADLINE)
    assert proc.returncode == 128 + sig and err.strip() == LINE[sig], (proc.returncode, err)
    assert out == ""   # it stopped inside the call: no result was printed
