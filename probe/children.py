"""Child processes of the toolkit: how to start its own commands.

A child runs this installation's console scripts in this interpreter, never ``python -m NAME`` or
code passed as ``-c``: both put the working directory first on the import path, so a user's
``train.py`` or ``probe.py`` beside them would run instead of the toolkit. A script puts its own
folder there instead.

A child also stops when the process that started it ends, however it ends (SIGKILL included, which
no handler sees): :func:`child_env` names the parent and the signal, and the child's command line
(:func:`probe.errors.run_cli`) asks the kernel for that signal at the parent's death
(:func:`probe.signals.die_with_parent`), which it handles like Ctrl-C: a trainer stops at its next step boundary,
its file resumable; a report watcher writes its last page.
"""
from __future__ import annotations

import contextlib
import os
import sys
from functools import lru_cache

from . import environment
from .errors import ProbeError
from .signals import signals_blocked

DISTRIBUTION = "gamma-probe"


@lru_cache(maxsize=None)
def entry_point(name: str) -> tuple[str, str]:
    """(module, function) of console script ``name``, as ``pyproject.toml`` names it."""
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


@lru_cache(maxsize=None)
def installed_script(name: str) -> str:
    """The file of console script ``name`` that pip installed with this toolkit: in the scripts folder of
    this interpreter's install scheme (a virtual environment's ``bin/``), else of its user scheme
    (``pip install --user``: ``~/.local/bin``); the one whose text calls this toolkit's entry point."""
    import sysconfig

    module, attr = entry_point(name)
    for scheme in (sysconfig.get_default_scheme(), f"{os.name}_user"):
        with contextlib.suppress(KeyError):   # a scheme this interpreter cannot expand
            script = os.path.join(sysconfig.get_path("scripts", scheme), name)
            with contextlib.suppress(OSError), open(script, "rb") as fh:
                if f"from {module} import {attr}".encode() in fh.read(4096):
                    return script
    raise ProbeError(f"the toolkit's command {name} is not installed where this Python installs scripts "
                     "(pip install gamma-probe); it starts its own processes with it")


def entry_command(name: str) -> list[str]:
    """The argv prefix that runs console script ``name`` (``"probe"`` or ``"probe-train"``) of this
    installation in this interpreter: the installed script, whose folder (not the working directory)
    Python puts first on the import path. Started by :func:`start` (the stop signals blocked), the
    child handles them as a flag from its first moment (:func:`probe.signals.stoppable`): a parent that
    asks its child to stop while the child still starts (a trainer stopped at once, a report watcher
    asked for its last page) is heard at the child's first safe point, not lost in an import or killed
    by the default action."""
    return [sys.executable, installed_script(name)]


def child_env(signum: int, env: dict | None = None) -> dict:
    """``env`` (default: this process's environment) for a child of the toolkit that gets ``signum``
    when this process ends (read by :func:`probe.signals.adopt_parent` in the child's command line)."""
    return {**(os.environ if env is None else env), environment.PARENT: f"{os.getpid()}:{int(signum)}"}


def start(command: list[str], **kw):
    """``subprocess.Popen(command, **kw)`` of a toolkit child (:func:`entry_command`), started with the
    stop signals blocked (:func:`signals_blocked`): one sent while the child's interpreter starts waits
    until the child handles it as a flag."""
    import subprocess

    with signals_blocked():
        return subprocess.Popen(command, **kw)


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
