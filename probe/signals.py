"""The stop signals, SIGINT (Ctrl-C), SIGTERM and SIGHUP: the one module that handles them.

Long work has one way to stop::

    from probe.signals import stoppable

    with stoppable():
        for step in steps:
            if stop_asked():        # a safe point: nothing half-written
                raise Interrupted("Interrupted at step ...; resume with ...")
            ...

Inside the block a stop signal sets the flag :func:`stop_asked` reads (its number) instead of raising wherever the
interpreter happens to be; the work reads it at its safe points, stops its workers there and raises
:class:`~probe.errors.Interrupted`, which the command line (:func:`probe.errors.run_cli`) says in one
line with the signal's exit code. A second Ctrl-C raises KeyboardInterrupt (the user will not wait).
Outside the blocks a command ends at once on a stop signal (nothing is kept half-written there: files
are written under a temporary name and renamed). Blocks nest; only the outermost installs handlers.
No other module installs a signal handler: a worker that leaves the signals to its parent calls
:func:`ignore_stop_signals`, a parent that starts a child uses :func:`signals_blocked`.

The watchdog. Python runs a signal handler in the main thread, between two bytecodes: while that
thread is inside one C call (an SVD of a 50257 x 768 embedding, a model's forward pass, a read of a
big tensor) Ctrl-C and SIGTERM wait for the call to return, seconds or minutes. The C-level handler
Python installs also writes the signal's number to a wake-up descriptor (:func:`signal.set_wakeup_fd`);
a thread blocked on that descriptor wakes at once, and where the main thread has not run its handler
(:func:`_heard`) within :data:`GRACE` seconds, it ends the command itself (``STOP._end``).

Where the handler does run — the main thread between calls, or a stop handled as a flag at a safe
point (inside :func:`stoppable`) — the watchdog stands down: it acts only for a main thread stuck in C.
It needs the GIL to act, so a library call that holds the GIL is not covered; HDF5 calls, the ones
h5py makes with the GIL held, are bounded in time instead (``probe.format._h5.READ_ATTEMPTS``).
"""
from __future__ import annotations

import atexit
import contextlib
import os
import select
import signal
import sys
import threading
import time
from typing import Callable, Iterator

from . import environment
from .printable import terminal

GRACE = 0.5   # seconds the main thread has to run its handler; "within a second" with room to exit

_heard_at = 0.0
_heard_event = threading.Event()
_pipe: tuple[int, int] | None = None


def stop_signals() -> list:
    """The signals that ask a command to stop: SIGINT (Ctrl-C), SIGTERM, SIGHUP (those this platform has)."""
    return [s for s in (getattr(signal, n, None) for n in ("SIGINT", "SIGTERM", "SIGHUP")) if s is not None]


@contextlib.contextmanager
def signals_blocked():
    """A block in which this thread holds the stop signals blocked: a child started inside it (a signal
    mask survives fork and exec) starts with them blocked, and this thread's mask is restored at once.
    The child hears one sent meanwhile at its first :func:`stoppable` block (or, for a command line
    with none, when :func:`probe.errors.run_cli` starts)."""
    if not hasattr(signal, "pthread_sigmask"):   # not POSIX: no masks to inherit
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals())
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def started_blocked() -> bool:
    """Whether this thread holds the stop signals blocked: a toolkit child (:func:`signals_blocked`),
    which handles them as a flag from its first moment."""
    if not hasattr(signal, "pthread_sigmask"):
        return False
    return bool(set(stop_signals()) & set(signal.pthread_sigmask(signal.SIG_BLOCK, [])))


def ignore_stop_signals() -> None:
    """A worker process that leaves the stop signals to its parent (which stops it itself): a terminal's
    Ctrl-C or hangup and ``timeout``'s SIGTERM reach the whole process group, the worker too."""
    for sig in stop_signals():
        signal.signal(sig, signal.SIG_IGN)


def stoppable() -> "contextlib.AbstractContextManager[_Stop]":
    """The one way long work stops: a block in which SIGINT, SIGTERM and SIGHUP set the flag
    :func:`stop_asked` reads (the signal's number; 0 until one comes), read at the work's safe points
    (see the module's docstring).
    Blocks nest (only the outermost installs and restores the handlers). A child started with the
    signals blocked (:func:`signals_blocked`) hears one sent meanwhile here. Main thread only for the
    handlers (Python's rule); in another thread the block only reads the flag.

    Returns
    -------
    context manager

    Examples
    --------
    >>> from probe.signals import stoppable
    >>> with stoppable():
    ...     for item in work:
    ...         if stop_asked():
    ...             break
    """
    return STOP.block()


def adopt_parent() -> None:
    """In a child started with :func:`probe.children.child_env`: stop with the parent. The variable is removed, so the
    child's own children name their own parent."""
    value = environment.take_parent()
    try:
        parent, signum = (int(x) for x in value.split(":"))
    except ValueError:   # not set (or not ours)
        return
    die_with_parent(parent, signum)


def die_with_parent(parent: int, signum: int) -> None:
    """Ask the kernel to send ``signum`` to this process when its parent (pid ``parent``) ends
    (Linux's PR_SET_PDEATHSIG; elsewhere nothing). A parent that ended before the request was made
    is noticed here (this process then has another parent) and the signal sent at once."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        if ctypes.CDLL(None, use_errno=True).prctl(1, int(signum), 0, 0, 0) != 0:   # 1: PR_SET_PDEATHSIG
            return
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:
        os.kill(os.getpid(), signum)


def stop_asked() -> int:
    """The stop signal asked for inside the current :func:`stoppable` block (its number; 0: none yet):
    what long work reads at its safe points."""
    return STOP.asked


def ask_stop(signum: int = signal.SIGINT) -> None:
    """Ask the work inside the current :func:`stoppable` block to stop at its next safe point, as a stop
    signal would (from any thread: a time budget's timer)."""
    STOP.asked = STOP.asked or int(signum)


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def say(line: str) -> None:
    """A last line on stderr, which may be gone (a closed terminal: SIGHUP)."""
    with contextlib.suppress(OSError, ValueError):
        print(terminal(line), file=sys.stderr, flush=True)


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


class _Stop:
    """The stop signals as a flag: inside :func:`stoppable` SIGINT (Ctrl-C), SIGTERM (``kill``,
    ``timeout``, a service manager) and SIGHUP (the terminal closed) set ``asked`` to the signal's
    number instead of raising KeyboardInterrupt wherever the interpreter happens to be (inside an HDF5
    write, a torch import); long work reads the flag at its safe points, stops its workers there and
    raises :class:`~probe.errors.Interrupted`. A second Ctrl-C raises KeyboardInterrupt (the user will
    not wait for the safe point); a repeated SIGTERM or SIGHUP does not (``timeout`` sends SIGTERM to
    the process and then to its whole group: the same request, twice). A signal that was ignored when
    the block began (SIGHUP under ``nohup``) stays ignored. Main thread only (Python's rule).

    Outside the blocks a command line (:func:`probe.errors.run_cli`, through :meth:`stop_outside`) ends
    at once on any of the three, with one line and the signal's exit code (:meth:`_now`)."""

    def __init__(self):
        self.asked = 0        # inside the blocks: the first stop signal (0: none yet)
        self.received = 0     # the last stop signal handled, inside a block or not (for the exit code)
        self.finished = False   # late(): the command has its exit code
        self._depth = 0
        self._old: dict = {}
        self._cleanups: list = []

    def at_stop(self, cleanup: Callable[[], None]) -> None:
        """Call ``cleanup`` when a stop signal ends the command at once (:meth:`_now`): a module
        with work to undo registers it (:mod:`probe.files` removes its unfinished temporary files),
        so this one imports nothing of it."""
        if cleanup not in self._cleanups:
            self._cleanups.append(cleanup)

    def _handle(self, signum, frame):
        _heard()
        self.received = signum
        if self.asked and signum == signal.SIGINT:  # a second Ctrl-C: the user will not wait for the safe point
            raise KeyboardInterrupt
        self.asked = self.asked or signum

    def _now(self, signum, frame):
        """Outside the blocks: the command ends here, with one line and the signal's exit code. What
        runs there keeps nothing at a safe point (an analysis prints at its end, every file is written
        under a temporary name and renamed: :func:`probe.files.write_atomic`, whose unfinished
        temporary files are removed first). Not a KeyboardInterrupt (why: docs/explanation/robustness.md,
        "Why stopping is built this way")."""
        _heard()
        self._end(signum)

    def _end(self, signum: int, stuck: bool = False) -> None:
        """Remove unfinished files, say so in one line, exit 128 + ``signum``. ``stuck``: called by the
        watchdog while the main thread is inside a library call, which may hold stdout's lock: nothing
        is flushed, the line goes straight to the descriptor."""
        self.received = signum
        for cleanup in self._cleanups:
            with contextlib.suppress(Exception):
                cleanup()
        if stuck:
            with contextlib.suppress(OSError):
                os.write(2, (self.line() + "\n").encode())
        else:
            with contextlib.suppress(Exception):
                sys.stdout.flush()   # what was printed before the signal
            say(self.line())
        os._exit(128 + signum)

    @contextlib.contextmanager
    def block(self) -> Iterator["_Stop"]:
        """:func:`stoppable`."""
        main = _main_thread()
        if main and self._depth == 0:
            self._old = {}
            for sig in stop_signals():
                old = signal.getsignal(sig)
                # SIGINT always: a parent stops its children with it, even where a shell started the
                # parent with SIGINT ignored; the others not where ignored (nohup) or set outside Python
                if old is None or (old == signal.SIG_IGN and sig != signal.SIGINT):
                    continue
                self._old[sig] = signal.signal(sig, self._handle)
        self._depth += main
        self.unblock()   # a child started with them blocked: one sent meanwhile is a flag now
        try:
            yield self
        finally:
            self._depth -= main
            if main and self._depth == 0:
                for sig, old in self._old.items():
                    signal.signal(sig, old)
                self._old = {}
                self.asked = 0

    def stop_outside(self) -> None:
        """A command line's handlers: outside the blocks SIGINT, SIGTERM and SIGHUP end the command
        at once (:meth:`_now`), where Python's default would be a KeyboardInterrupt (SIGINT) or no
        last line at all, and the watchdog ends it where the main thread is inside a library call.
        A signal ignored or handled outside Python is left as it is. Main thread only."""
        if not _main_thread():
            return
        for sig in stop_signals():
            current = self._old.get(sig) if self._depth else signal.getsignal(sig)
            if (current is signal.default_int_handler or current is _Stop._exit   # _exit: an earlier run_cli's
                    or (current == signal.SIG_DFL and sig != signal.SIGINT)):
                if self._depth:
                    self._old[sig] = self._now     # what the outermost block restores
                else:
                    signal.signal(sig, self._now)
        _watchdog()

    def unblock(self) -> None:
        """Unblock the stop signals in this thread (a toolkit child starts with them blocked:
        :func:`signals_blocked`); one sent meanwhile is delivered now."""
        if hasattr(signal, "pthread_sigmask"):
            signal.pthread_sigmask(signal.SIG_UNBLOCK, stop_signals())

    def late(self) -> None:
        """A command line that has its exit code: a stop signal from now on ends the process at once
        with the signal's exit code (its output is complete, nothing is left to stop) instead of a
        KeyboardInterrupt traceback out of the interpreter's shutdown. Main thread only."""
        if not _main_thread():
            return
        self.finished = True
        for sig in stop_signals():
            if self._depth and sig in self._old:
                self._old[sig] = self._exit      # what the outermost block restores
            current = signal.getsignal(sig)
            if current is not None and current != signal.SIG_IGN:
                signal.signal(sig, self._exit)

    @staticmethod
    def _exit(signum, frame):
        _heard()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(128 + signum)

    def exit_code(self) -> int:
        """The exit code of a command a stop signal ended: 128 + its number (Ctrl-C 130)."""
        return 128 + (self.received or signal.SIGINT)

    def line(self) -> str:
        """What a command a stop signal ended outside a safe point says (nothing to keep there)."""
        name = signal_name(self.received or signal.SIGINT)
        return "Error: interrupted" + ("" if name == "SIGINT" else f" by {name}")


STOP = _Stop()


def _ignore_once_finished() -> None:
    """The last exit handler (registered when this module is first imported, before any library's):
    a command that has its exit code ignores the stop signals from here on. Python resets its own
    handlers to the default action late in its shutdown, after the exit handlers, where a stop signal
    would kill a finished command (exit -15, seen as a flaky exit code in tests/test_faults_kills.py);
    what is left of the shutdown after this point runs no user code."""
    if STOP.finished and _main_thread():
        for sig in stop_signals():
            if signal.getsignal(sig) is not None:
                signal.signal(sig, signal.SIG_IGN)


atexit.register(_ignore_once_finished)


# --- the watchdog ----------------------------------------------------------------------------------

def _heard() -> None:
    """Called by every Python-level stop handler: the main thread is not stuck."""
    global _heard_at
    _heard_at = time.monotonic()
    _heard_event.set()


def _watchdog() -> None:
    """Watch for the stop signals from now on (main thread, once per process; POSIX only): the watchdog
    thread ends the command when the main thread did not handle one within :data:`GRACE`."""
    global _pipe
    if _pipe is not None or os.name != "posix" or not _main_thread():
        return
    r, w = os.pipe()
    os.set_blocking(r, False)
    os.set_blocking(w, False)
    try:
        signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    except ValueError:
        os.close(r)
        os.close(w)
        return
    _pipe = (r, w)
    threading.Thread(target=_watch, args=(r, frozenset(int(s) for s in stop_signals())),
                     name="stop-watchdog", daemon=True).start()


def _forget() -> None:
    """In a forked child: the watchdog thread did not come along, and the child's signals must not
    wake the parent's (the pipe is shared)."""
    global _pipe
    if _pipe is None:
        return
    with contextlib.suppress(ValueError):
        signal.set_wakeup_fd(-1)
    for fd in _pipe:
        os.close(fd)
    _pipe = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget)


def _drain(fd: int) -> bytes:
    out = b""
    with contextlib.suppress(BlockingIOError, InterruptedError):
        while chunk := os.read(fd, 512):
            out += chunk
    return out


def _watch(fd: int, stops: frozenset) -> None:
    while True:
        # Bytes already there are signals the main thread handled, or will: its handler runs after
        # the byte is written, so a byte read after t0 is answered by a handler that ran after t0.
        t0 = time.monotonic()
        _drain(fd)
        select.select([fd], [], [])
        got = [b for b in _drain(fd) if b in stops]
        if not got:
            continue
        deadline = time.monotonic() + GRACE
        while _heard_at < t0 and (left := deadline - time.monotonic()) > 0:
            _heard_event.wait(left)
            _heard_event.clear()
        if _heard_at < t0:
            STOP._end(got[0], stuck=True)
