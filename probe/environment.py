"""Every environment variable the toolkit reads is read here; docs/reference/environment.md lists them,
beside the libraries' own that matter (``HF_HUB_OFFLINE``, ``OMP_NUM_THREADS``, ...).

Importing it costs nothing: train/ and every layer of probe/ may use it.
"""
from __future__ import annotations

import contextlib
import os

DEBUG = "PROBE_DEBUG"        # set (to anything): a bug's traceback instead of its one "Error: unexpected" line
THREADS = "PROBE_THREADS"    # torch threads of a training or evaluation process: a number, or "torch" for its own
PARENT = "PROBE_PARENT"      # set by the toolkit for its children, "PID:SIGNAL": stop with that signal when PID ends


def debug() -> bool:
    """Whether a bug should show its traceback (``PROBE_DEBUG`` set)."""
    return bool(os.environ.get(DEBUG))


def threads() -> str:
    """``PROBE_THREADS`` as given ('' when unset): a number of torch threads, or 'torch'."""
    return os.environ.get(THREADS, "").strip()


@contextlib.contextmanager
def safe_path():
    """A block in which a Python this process starts keeps the working directory off its import path
    (``PYTHONSAFEPATH``, what ``-P`` does), however it is started (``python -c``: multiprocessing's fork
    server); the variable is as it was after the block."""
    old = os.environ.get("PYTHONSAFEPATH")   # Python's own (3.11), set, not read
    os.environ["PYTHONSAFEPATH"] = "1"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("PYTHONSAFEPATH", None)
        else:
            os.environ["PYTHONSAFEPATH"] = old


def take_parent() -> str:
    """``PROBE_PARENT`` ('' when unset), removed from this process's environment so that its own children
    do not inherit it (:func:`probe.signals.adopt_parent`)."""
    return os.environ.pop(PARENT, "")
