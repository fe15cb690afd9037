"""Files the user names. Inputs are read only when they are regular files. Outputs fail before any
work when one cannot be written, are written whole and atomically, and one process at a time writes
a run.

Every writer of a whole file (plots, tables, report pages, figures, a sweep's manifest) goes through
:func:`write_atomic`, so a full disk, a read-only folder or a file-size limit ends in one line naming
the cause, with the old file (if any) untouched and no half-written or temporary file left behind.
"""
from __future__ import annotations

import os
import shlex
import stat
import sys
import tempfile
from contextlib import suppress
from typing import Callable

from .errors import ProbeError, write_cause, write_error
from .signals import STOP

_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _not_regular(path, mode: int, what: str) -> ProbeError:
    if stat.S_ISDIR(mode):
        return ProbeError(f"{os.fsdecode(path)}: {what} is a directory, not a file")
    kind = next((name for test, name in _KINDS if test(mode)), "a special file")
    via = " (through a symbolic link)" if os.path.islink(path) else ""   # islink never raises
    return ProbeError(f"{os.fsdecode(path)}: {what} is {kind}{via}, not a regular file; only regular files are read")


def regular_file(path, what: str = "file") -> None:
    """Raise a one-line ProbeError unless ``path`` is a regular file (a symbolic link to one is fine).

    Decided from ``stat`` alone, the file never opened: opening a FIFO for reading blocks until a
    writer comes, and opening a device can act on it. ``what`` names the file's role in the message
    ("groups file" -> "x.json: groups file is a FIFO (named pipe), not a regular file; ..."). Call it
    before handing a path to a library that opens it itself (h5py, torch.load, safetensors,
    tokenizers); :func:`open_regular` checks and opens in one step."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError) as exc:
        raise ProbeError(f"{os.fsdecode(path)}: cannot read {what} ({getattr(exc, 'strerror', None) or exc})") \
            from None
    if not stat.S_ISREG(mode):
        raise _not_regular(path, mode, what)


def open_regular(path, mode: str = "r", what: str = "file", **kw):
    """``open(path, mode, **kw)`` for reading, refused (one-line ProbeError) unless ``path`` is a
    regular file. The path is checked with :func:`regular_file` first, then opened non-blocking and
    checked again on the open descriptor, so a file swapped for a FIFO in between cannot block us."""
    if any(c in mode for c in "wax+"):
        raise ValueError(f"open_regular reads only, not mode {mode!r}")
    regular_file(path, what)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise ProbeError(f"{os.fsdecode(path)}: cannot read {what} ({exc.strerror or exc})") from None
    try:
        st_mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(st_mode):
            raise _not_regular(path, st_mode, what)
        os.set_blocking(fd, True)
        return open(fd, mode, **kw)
    except BaseException:
        with suppress(OSError):   # open() had taken the descriptor and closed it
            os.close(fd)
        raise


def writable(path: str, what: str) -> None:
    """Raise a one-line ProbeError unless ``path`` can be created: its folder exists and takes a new
    file (tried with a temporary one, removed at once), and ``path`` is not a folder."""
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise ProbeError(f"cannot write {what} {path}: directory {parent} does not exist")
    if os.path.isdir(path):
        raise ProbeError(f"cannot write {what} {path}: it is a directory")
    try:
        tempfile.TemporaryFile(dir=parent).close()
    except OSError as exc:
        raise ProbeError(f"cannot write {what} {path}: {write_cause(exc)}") from None


def writable_folder(folder: str | os.PathLike, what: str) -> None:
    """Raise a one-line ProbeError unless ``folder`` takes new files (``what`` names them)."""
    try:
        tempfile.TemporaryFile(dir=folder).close()
    except OSError as exc:
        raise ProbeError(f"cannot write {what} into {os.fspath(folder)}: {write_cause(exc)}") from None


def _new_file_mode(path: str) -> int:
    """The mode ``open(path, "w")`` would give: the old file's, else 0666 less the umask (a temporary
    file is made 0600, which would leave a plot or page unreadable to the group)."""
    with suppress(OSError):
        return os.stat(path).st_mode & 0o7777
    # Linux >= 4.7 shows the umask without changing it (os.umask would, for every thread)
    with suppress(OSError, ValueError, IndexError), open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("Umask:"):
                return 0o666 & ~int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


_UNFINISHED: set[str] = set()   # temporary files being written now (write_atomic)


def remove_unfinished() -> None:
    """Remove the temporary files of writes under way: a command a stop signal ends at once
    (:meth:`probe.signals._Stop._now`) leaves nothing half-written behind."""
    for tmp in list(_UNFINISHED):
        with suppress(OSError):
            os.unlink(tmp)


STOP.at_stop(remove_unfinished)


def sync_file(path: str) -> None:
    """Flush ``path``'s data to disk (fsync), so that a rename of it is never followed, after a crash,
    by an empty or partial file under the new name."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sync_folder(path: str) -> None:
    """Make a rename into the folder of ``path`` durable (fsync of the folder); a file system that
    cannot sync a folder is left as it is (the rename itself is done)."""
    with suppress(OSError):
        sync_file(os.path.dirname(os.path.abspath(path)))


def write_atomic(path: str | os.PathLike, content: str | bytes | Callable, what: str) -> None:
    """Replace ``path`` with ``content`` (text as UTF-8, a file name's undecodable bytes as they were; bytes; or a function that writes into the
    binary file object it is given) through a temporary file of a unique name in the same folder,
    flushed to disk and renamed over ``path`` (the rename made durable: :func:`sync_folder`). Every
    writer of the project goes through here, except the HDF5 run file, whose library must create it
    by name: it uses :func:`sync_file` and :func:`sync_folder` around its own rename. A reader (a browser reloading a page) sees the old file
    or the new one, never half of one; on any failure the temporary file is removed, ``path`` is left
    as it was and an OSError becomes one ProbeError naming the cause (``no space left on device while
    writing plot sim.png``). ``what`` names the file for that message (``plot``, ``report``)."""
    path = os.fspath(path)
    label = f"{what} {path}"
    if os.path.islink(path):   # write where the link points, as open(path, "w") would, not over the link
        path = os.path.realpath(path)
    folder = os.path.dirname(os.path.abspath(path))
    mode = _new_file_mode(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise write_error(exc, label) from None
    _UNFINISHED.add(tmp)
    try:
        with os.fdopen(fd, "wb") as fh:
            if callable(content):
                content(fh)
            else:
                fh.write(content.encode("utf-8", "surrogateescape") if isinstance(content, str) else content)
            fh.flush()
            os.fchmod(fh.fileno(), mode)
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        sync_folder(path)
    except BaseException as exc:
        with suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise write_error(exc, label) from None
        raise
    finally:
        _UNFINISHED.discard(tmp)


# --- one writer per output -----------------------------------------------------------------------

def lock_path(path: str | os.PathLike) -> str:
    """The lock file of output ``path``: ``.NAME.lock`` beside it."""
    path = os.path.abspath(os.fspath(path))
    return os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.lock")


_HELD: dict[str, list] = {}   # lock file -> [fd, holders]: the lock is re-entrant within a process


class OutputLock:
    """Held by the one process that writes ``path``, for as long as it writes it: a second writer is
    refused with a message naming the first (its pid and command line).

    The lock is an ``flock`` on a sidecar file (``.run.h5.lock``), not on ``path`` itself: the trainer
    replaces ``path`` by a rename (at creation and at ``--resume``), which would leave a lock on the
    old inode behind. The kernel drops an flock when its process dies, so a killed writer leaves no
    stale lock; the sidecar is removed when the lock is released (and re-checked after locking, so a
    writer never holds the lock of a file another one just removed). Readers never take it.

    >>> with OutputLock("run.h5"):
    ...     ...   # write run.h5
    """

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        self.file = lock_path(self.path)
        self._held = False

    def acquire(self) -> "OutputLock":
        if self._held:
            return self
        held = _HELD.get(self.file)
        if held is not None:
            held[1] += 1
            self._held = True
            return self
        try:
            import fcntl
        except ImportError:   # not a POSIX system: no lock (HDF5's SWMR writing needs POSIX anyway)
            return self

        while True:
            try:
                fd = os.open(self.file, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
                can_write = True
            except PermissionError as exc:   # another user's lock file: flock needs only read access
                try:
                    fd = os.open(self.file, os.O_RDONLY | os.O_CLOEXEC)
                    can_write = False
                except OSError:   # none there: the folder itself refuses us
                    raise ProbeError(f"cannot write {self.path}: {write_cause(exc)}") from None
            except OSError as exc:
                raise ProbeError(f"cannot write {self.path}: {write_cause(exc)}") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                pid, command = _holder(fd)
                holder = f"process {pid}" + (f" ({command})" if command else "") if pid else "another process"
                os.close(fd)
                raise ProbeError(f"{self.path} is being written by {holder}; wait for it or stop it") from None
            except OSError as exc:   # a file system without locks: say so rather than write unguarded
                os.close(fd)
                raise ProbeError(f"cannot lock {self.file} to write {self.path}: {write_cause(exc)}") from None
            try:   # the file we locked may have been removed (and made anew) by its last holder
                same = os.path.samestat(os.fstat(fd), os.stat(self.file))
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        if can_write:
            # who holds it, for the message a second writer gets; a full disk may refuse the text
            with suppress(OSError):
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"{os.getpid()}\n{_command_line()}\n".encode("utf-8", "surrogateescape"), 0)
        _HELD[self.file] = [fd, 1]
        self._held = True
        return self

    def release(self) -> None:
        if not self._held:
            return
        self._held = False
        held = _HELD.get(self.file)
        if held is None:
            return
        held[1] -= 1
        if held[1] > 0:
            return
        del _HELD[self.file]
        fd = held[0]
        with suppress(OSError):   # removed while still locked: whoever opens it next re-checks and makes a new one
            if os.path.samestat(os.fstat(fd), os.stat(self.file)):
                os.unlink(self.file)
        os.close(fd)

    def __enter__(self) -> "OutputLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()

    def __del__(self):
        try:
            self.release()
        except Exception:   # interpreter shutdown: the kernel drops the flock with the process
            pass


def writer_alive(path: str | os.PathLike) -> bool:
    """Whether another process holds the :class:`OutputLock` of ``path`` now, i.e. a writer is at work
    on it; the lock is not taken (a reader taking it, even for a moment, could refuse a starting writer).

    A released lock's file is removed, and a killed writer's lock went with its process: what is left
    is its file, naming a process that is gone. So: no lock file, no writer; a lock file without a
    process id yet, a writer starting; else whether the lock is held, as the kernel's lock table says
    (Linux's ``/proc/locks``): a killed writer nobody reaped (a zombie, in a container whose PID 1
    does not reap) still answers ``kill(pid, 0)`` but holds no lock. Where that table cannot be read,
    whether the process it names lives (a reused id counts as a writer: the reader then treats the
    file as live, which is safe, only less strict)."""
    try:
        fd = os.open(lock_path(path), os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return False
        pid, _ = _holder(fd)
    except OSError:
        return False
    finally:
        os.close(fd)
    if pid is None:
        return True   # created, not yet written in: a writer in its first moment
    if pid == os.getpid():
        return False  # this process holds it (a resume reads the file it is about to write)
    held = _flock_held(st)
    if held is not None:
        return held
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):   # gone, or no process id at all
        return False
    except OSError:   # EPERM: it lives, under another user
        pass
    return True


def _flock_held(st: os.stat_result) -> bool | None:
    """Whether some process holds an ``flock`` on the file of ``st`` now, from the kernel's lock table
    (``/proc/locks``: ``1: FLOCK ADVISORY WRITE PID MAJOR:MINOR:INODE 0 EOF``, a waiter's line with
    ``->``); None where there is no such table (not Linux)."""
    key = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as fh:
            table = fh.read()
    except OSError:
        return None
    return any(len(f := line.split()) > 5 and f[1] == "FLOCK" and f[5] == key for line in table.splitlines())


def _command_line() -> str:
    argv = list(sys.argv) or ["python"]
    argv[0] = os.path.basename(argv[0]) or "python"
    return " ".join(shlex.quote(a) for a in argv)


def _holder(fd: int) -> tuple[int | None, str]:
    """(process id, command line) its holder wrote into a lock file; (None, "") before it did."""
    try:
        text = os.pread(fd, 4096, 0).decode("utf-8", "replace")
    except OSError:
        text = ""
    pid, _, command = text.partition("\n")
    pid = pid.strip()
    return (int(pid), command.strip()) if pid.isascii() and pid.isdigit() else (None, "")
