"""Every environment variable the toolkit reads is read here; docs/reference/environment.md lists them,
beside the libraries' own that matter (``HF_HUB_OFFLINE``, ``OMP_NUM_THREADS``, ...).

Importing it costs nothing: train/ and every layer of probe/ may use it.
"""
from __future__ import annotations

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


def safe_path() -> None:
    """From now on a Python this process starts keeps the working directory off its import path
    (``PYTHONSAFEPATH``, what ``-P`` does), however it is started (``python -c``: multiprocessing's fork
    server). Set by the processes that start the trainers' fork server; their other children are the
    toolkit's own console scripts, which do not need the working directory either."""
    os.environ["PYTHONSAFEPATH"] = "1"   # Python's own (3.11), set, not read


def take_parent() -> str:
    """``PROBE_PARENT`` ('' when unset), removed from this process's environment so that its own children
    do not inherit it (:func:`probe.signals.adopt_parent`)."""
    return os.environ.pop(PARENT, "")
