"""Child processes of the toolkit: how to start its own commands.

A child runs this installation's console scripts in this interpreter, never ``python -m NAME``:
``-m`` (like ``-c``) puts the working directory first on the import path, so a user's ``train.py``
or ``probe.py`` beside them would run instead of the toolkit. The command below keeps the working
directory off the path (Python 3.11's ``-P``; on 3.10 the first entry, which ``-c`` always makes
the working directory, is dropped before anything is imported) and calls the entry point that
``pyproject.toml`` names, found through the installed distribution's metadata.

A child also stops when the process that started it ends, however it ends (SIGKILL included, which
no handler sees): :func:`child_env` names the parent and the signal, and the child's command line
(:func:`probe.errors.run_cli`) asks the kernel for that signal at the parent's death
(:func:`die_with_parent`), which it handles like Ctrl-C: a trainer stops at its next step boundary,
its file resumable; a report watcher writes its last page.
"""
from __future__ import annotations

import contextlib
import os
import signal
import sys
from functools import lru_cache

from . import environment

DISTRIBUTION = "gamma-probe"


@lru_cache(maxsize=None)
def entry_point(name: str) -> tuple[str, str]:
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        eps = distribution(DISTRIBUTION).entry_points
    except PackageNotFoundError:   # run from a source tree without an install
        eps = ()
    for ep in eps:
        if ep.group == "console_scripts" and ep.name == name:
            module, _, attr = ep.value.partition(":")
            return module.strip(), attr.strip()
    # the source tree's own entry points (pyproject.toml [project.scripts])
    return {"probe": ("probe.cli", "main"), "probe-train": ("probe_train._entry", "main")}[name]


def entry_command(name: str) -> list[str]:
    """The argv prefix that runs console script ``name`` (``"probe"`` or ``"probe-train"``) of this
    installation in this interpreter, with the working directory kept off the import path. The stop
    signals are a flag from the child's first moment (:data:`probe.signals.STOP`; started by
    :func:`start`, the child holds them blocked until then): a parent that asks its child to stop
    while the child still starts (a trainer stopped at once, a report watcher asked for its last page)
    is heard at the child's first safe point, not lost in an import or killed by the default action."""
    module, attr = entry_point(name)
    code = (f"import sys; sys.argv[0] = {name!r}\n"
            "from probe.signals import STOP\n"
            f"with STOP.caught(): STOP.unblock(); from {module} import {attr} as main; main()")
    # -P (Python 3.11): the working directory off the import path (a user's own module of a toolkit
    # module's name cannot replace it); on 3.10 the first entry, which -c makes the working directory
    if sys.version_info >= (3, 11):
        return [sys.executable, "-P", "-c", code]
    return [sys.executable, "-c", "import sys; del sys.path[0]; " + code]


def child_env(signum: int, env: dict | None = None) -> dict:
    """``env`` (default: this process's environment) for a child of the toolkit that gets ``signum``
    when this process ends (read by :func:`adopt_parent` in the child's command line)."""
    return {**(os.environ if env is None else env), environment.PARENT: f"{os.getpid()}:{int(signum)}"}


def adopt_parent() -> None:
    """In a child started with :func:`child_env`: stop with the parent. The variable is removed, so the
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


def stop_signals() -> list:
    """The signals that ask a command to stop: SIGINT (Ctrl-C), SIGTERM, SIGHUP (those this platform has)."""
    return [s for s in (getattr(signal, n, None) for n in ("SIGINT", "SIGTERM", "SIGHUP")) if s is not None]


def start(command: list[str], **kw):
    """``subprocess.Popen(command, **kw)`` of a toolkit child (:func:`entry_command`), started with the
    stop signals blocked (:func:`signals_blocked`): one sent while the child's interpreter starts waits
    until the child handles it as a flag."""
    import subprocess

    with signals_blocked():
        return subprocess.Popen(command, **kw)


@contextlib.contextmanager
def signals_blocked():
    """A block in which this thread holds the stop signals blocked: a child started inside it (a signal
    mask survives fork and exec) starts with them blocked, and this thread's mask is restored at once."""
    if not hasattr(signal, "pthread_sigmask"):   # not POSIX: no masks to inherit
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals())
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def idle_priority() -> None:
    """This process runs only on CPU time others leave idle (SCHED_IDLE; nice 19 where that is not
    allowed). Used as ``preexec_fn`` for the report watcher that ``probe-train --report`` starts: at
    nice 10 it cost training +4.9 % in one pair of runs (bench/bench_report.py)."""
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        os.nice(19)


def normal_priority(pid: int = 0) -> None:
    """Process ``pid`` (0: this one) back from SCHED_IDLE to the normal policy, where this user may do
    that (else nothing changes). A watcher's last page must not wait for idle CPU: its trainer killed
    outright (SIGKILL), a watcher left at SCHED_IDLE beside two busy processes got 4 s of CPU in 9
    minutes (seen in a proof run under load). Both sides call this: the trainer when training is over,
    the watcher when it is asked for its last page (its trainer may be gone). A policy is a thread's:
    this is the main thread's, which writes the page (a watcher's one other thread, its stop watchdog,
    used no CPU in 15 s of watching)."""
    with contextlib.suppress(AttributeError, OSError):   # not Linux, not allowed, or the process has ended
        if os.sched_getscheduler(pid) == os.SCHED_IDLE:
            os.sched_setscheduler(pid, os.SCHED_OTHER, os.sched_param(0))
