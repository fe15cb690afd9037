"""Writing the page once (:func:`report`) or again whenever a run gains a snapshot (:func:`watch`)."""
from __future__ import annotations

import time
from typing import Callable

from ..files import OutputLock, writable, write_atomic, writer_alive
from ..children import normal_priority
from ..errors import ProbeError
from ..signals import stop_asked, stoppable
from . import MAX_STEPS, SLIDER_MAX
from .page import Report
from .sources import Budget


class Failed(ProbeError):
    """Sections whose probe raised (a bug of the probe, not a run it does not apply to): ``failures``, a
    line each (``RUN: PROBE failed: WHAT``); the page was not written."""

    def __init__(self, failures: list[str]):
        super().__init__("; ".join(failures))
        self.failures = failures


def _check(rep: Report, keep_going: bool) -> None:
    """Before a page of ``rep`` is written: a probe that raised stops it unless ``keep_going`` (then its
    section says it failed), for a page that merely lacks a section would hide the probe's bug."""
    if rep.failures() and not keep_going:
        raise Failed(rep.failures())


def check_out(path: str) -> None:
    if not path.endswith((".html", ".htm")):
        raise ProbeError(f"report {path}: use a .html name")
    writable(path, "report")


def report(specs: list[str], out: str, *, probes: list[str] | None = None, max_steps: int = MAX_STEPS,
           revisions: str | None = None, progress: Callable[[str], None] | None = None,
           allow_nonfinite: bool = False, slider_steps: int = SLIDER_MAX, max_memory=None,
           keep_going: bool = False) -> Report:
    """Write the page for ``specs`` to ``out`` once; returns the :class:`Report` (its sections). A probe
    that raises is :class:`Failed` and nothing is written, unless ``keep_going`` (its section says so)."""
    check_out(out)
    with OutputLock(out):   # one writer per page: a second command on it is refused, naming this one
        rep = Report(specs, probes, max_steps, revisions, progress, allow_nonfinite, slider_steps, max_memory)
        rep.refresh()
        if not rep.sources:
            raise ProbeError(next(iter(rep.errors.values())))
        page = rep.html(live=False)
        _check(rep, keep_going)
        write_atomic(out, page, "report")
        return rep


def watch(specs: list[str], out: str, *, probes: list[str] | None = None, max_steps: int = MAX_STEPS,
          revisions: str | None = None, interval: float = 2.0, max_share: float = 1.0,
          progress: Callable[[str], None] | None = None, log: Callable[[str], None] | None = None,
          allow_nonfinite: bool = False, slider_steps: int = SLIDER_MAX, max_memory=None,
          keep_going: bool = False) -> Report:
    """Rewrite ``out`` whenever a run gains a snapshot, until every run reached its last step, or a
    stop signal (Ctrl-C, SIGTERM, SIGHUP: then the page is written once more, no longer reloading
    itself, and :func:`~probe.signals.stop_asked` holds the signal while the caller's own ``stoppable()``
    block lasts), or no process writes the unfinished runs any more (their trainer stopped or was
    killed: the page is written once more, then a ProbeError says so), or a run's file holds another
    run (a ProbeError: its steps are not mixed into the old run's page), or a probe that raises (:class:`Failed`,
    before that page is written; with ``keep_going`` its section says it failed and the watch goes on).

    ``max_share`` < 1 bounds this process's CPU time (imports included) to that share of one core
    (:class:`Budget`; 0.01 from ``probe-train --report``): a page goes out with what the budget
    allowed, the rest marked pending and filled in at later updates; the last page has everything.
    A run that does not exist yet is waited for.
    """
    if not 0 < max_share <= 1:
        raise ProbeError(f"bad --max-share {max_share}: need 0 < share <= 1")
    if interval <= 0:
        raise ProbeError(f"bad --interval {interval}: need seconds > 0")
    check_out(out)
    log = log or (lambda msg: None)
    hush = [False]   # a run found dead at the first look: its one line says it all, no section's progress
    shown = None if progress is None else (lambda msg: None if hush[0] else progress(msg))
    rep = Report(specs, probes, max_steps, revisions, shown, allow_nonfinite, slider_steps, max_memory)
    budget = Budget(max_share) if max_share < 1 else None
    last = None
    seen: dict[str, str] = {}   # path -> the run it held when first read
    with OutputLock(out), stoppable():   # one writer per page, for as long as it is watched
        while True:
            # over budget: wait (reading headers only), but never for the last page
            while (budget is not None and last is not None and not budget.allows() and not stop_asked()
                   and not _finished(rep)):
                _sleep(interval)
            if stop_asked():
                normal_priority()
            sig = rep.refresh()
            if not rep.sources:              # nothing to show yet: wait for the run to appear
                if stop_asked():
                    return rep
                _sleep(interval)
                continue
            _same_runs(rep, seen, out)
            gone = not rep.done and not stop_asked() and _writers_gone(rep)
            if gone:   # a writer that ended normally wrote its last step before it let go of the file
                sig = rep.refresh()
                _same_runs(rep, seen, out)
                gone = not rep.done
            done = rep.done or bool(stop_asked()) or gone
            if sig == last and not rep.pending and not done:
                _sleep(interval)
                continue
            if done:
                normal_priority()
            quiet = hush[0] = gone and last is None
            t0 = time.perf_counter()
            page = rep.html(live=not done, budget=None if done else budget)
            _check(rep, keep_going)
            write_atomic(out, page, "report")
            took = time.perf_counter() - t0
            last = sig
            steps = ", ".join(f"{s.label} step {s.steps[-1] if s.steps else '-'}" for s in rep.sources)
            if not quiet:
                log(f"wrote {out} ({steps}; {took:.1f} s){'' if done else ', watching'}")
            if gone:
                runs = ", ".join(f"{s.path} (step {s.steps[-1] if s.steps else '-'} of {s.final_step})"
                                 for s in rep.sources if s.kind == "snapshot" and not s.done)
                raise ProbeError(f"no process writes {runs} any more: {out} holds the runs as they were; resume "
                                 "a run (probe-train --resume --out RUN) and watch again")
            if done:
                return rep
            _sleep(interval)


def _writers_gone(rep: Report) -> bool:
    """Whether no process writes any unfinished snapshot run any more (its lock is gone with it), as
    ``tail -f --pid`` ends with the process it follows; checkpoint folders have no writer to ask."""
    todo = [s for s in rep.sources if s.kind == "snapshot" and not s.done]
    return bool(todo) and not any(writer_alive(s.path) for s in todo)


def _same_runs(rep: Report, seen: dict[str, str], out: str) -> None:
    """A run file replaced by another run (--overwrite) under the watch ends it: its steps would be mixed
    with the old run's on one page."""
    for s in rep.sources:
        if s.kind == "snapshot" and seen.setdefault(s.path, s.identity) != s.identity:
            raise ProbeError(f"{s.path} now holds another run (written anew, e.g. with --overwrite): {out} holds the "
                             "old one as it was; the same command watches the new one")


def _finished(rep: Report) -> bool:
    """Whether every run reached its last step (headers only: cheap)."""
    from ..format import last_step

    return bool(rep.sources) and all(s.kind == "snapshot" and s.final_step is not None
                                     and (last_step(s.path) or -1) >= s.final_step for s in rep.sources)


def _sleep(seconds: float) -> None:
    end = time.monotonic() + seconds
    while not stop_asked() and time.monotonic() < end:
        time.sleep(min(0.2, max(0.0, end - time.monotonic())))
