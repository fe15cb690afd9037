"""A stop signal reaches a command whose main thread is inside one long library call.

Python runs a signal handler in the main thread, between two bytecodes: while that thread is inside
one C call (an SVD of a 50257 x 768 embedding, a model's forward pass, a read of a big tensor) Ctrl-C
and SIGTERM wait for the call to return, seconds or minutes. The C-level handler Python installs
also writes the signal's number to a wake-up descriptor (:func:`signal.set_wakeup_fd`); a thread
blocked on that descriptor wakes at once, and where the main thread has not run its handler
(:func:`heard`) within :data:`GRACE` seconds, it ends the command itself (``fire``).

Where the handler does run — the main thread between calls, or a stop handled as a flag at a safe
point (``STOP.caught()``) — the watchdog stands down: it acts only for a main thread stuck in C.
It needs the GIL to act, so a library call that holds the GIL is not covered; HDF5 calls, the ones
h5py makes with the GIL held, are bounded in time instead (``probe.format._h5.READ_ATTEMPTS``).
"""
from __future__ import annotations

import os
import select
import signal
import threading
import time
from typing import Callable, Iterable

GRACE = 0.5   # seconds the main thread has to run its handler; "within a second" with room to exit

_heard_at = 0.0
_heard = threading.Event()
_pipe: tuple[int, int] | None = None


def heard() -> None:
    """Called by every Python-level stop handler: the main thread is not stuck."""
    global _heard_at
    _heard_at = time.monotonic()
    _heard.set()


def start(signals: Iterable[int], fire: Callable[[int], None]) -> None:
    """Watch for ``signals`` from now on (main thread, once per process; POSIX only): ``fire(signum)``
    runs in the watchdog thread when the main thread did not handle one within :data:`GRACE`."""
    global _pipe
    if _pipe is not None or os.name != "posix" or threading.current_thread() is not threading.main_thread():
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
    threading.Thread(target=_watch, args=(r, frozenset(int(s) for s in signals), fire),
                     name="stop-watchdog", daemon=True).start()


def _forget() -> None:
    """In a forked child: the watchdog thread did not come along, and the child's signals must not
    wake the parent's (the pipe is shared)."""
    global _pipe
    if _pipe is None:
        return
    try:
        signal.set_wakeup_fd(-1)
    except ValueError:
        pass
    for fd in _pipe:
        os.close(fd)
    _pipe = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget)


def _drain(fd: int) -> bytes:
    out = b""
    while True:
        try:
            chunk = os.read(fd, 512)
        except (BlockingIOError, InterruptedError):
            return out
        if not chunk:
            return out
        out += chunk


def _watch(fd: int, stops: frozenset, fire: Callable[[int], None]) -> None:
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
            _heard.wait(left)
            _heard.clear()
        if _heard_at < t0:
            fire(got[0])
