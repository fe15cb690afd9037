"""Writing the page once (:func:`report`) or again whenever a run gains a snapshot (:func:`watch`)."""
from __future__ import annotations

import time
from typing import Callable

from .._files import writable, write_atomic
from .._proc import normal_priority
from ..errors import ProbeError
from ..signals import STOP
from . import MAX_STEPS, SLIDER_MAX
from .page import Report
from .sources import Budget


def check_out(path: str) -> None:
    if not path.endswith((".html", ".htm")):
        raise ProbeError(f"report {path}: use a .html name")
    writable(path, "report")


def report(specs: list[str], out: str, *, probes: list[str] | None = None, max_steps: int = MAX_STEPS,
           revisions: str | None = None, progress: Callable[[str], None] | None = None,
           allow_nonfinite: bool = False, slider_steps: int = SLIDER_MAX, max_memory=None) -> Report:
    """Write the page for ``specs`` to ``out`` once; returns the :class:`Report` (its sections)."""
    check_out(out)
    rep = Report(specs, probes, max_steps, revisions, progress, allow_nonfinite, slider_steps, max_memory)
    rep.refresh()
    if not rep.sources:
        raise ProbeError(next(iter(rep.errors.values())))
    write_atomic(out, rep.html(live=False), "report")
    return rep


def watch(specs: list[str], out: str, *, probes: list[str] | None = None, max_steps: int = MAX_STEPS,
          revisions: str | None = None, interval: float = 2.0, max_share: float = 1.0,
          progress: Callable[[str], None] | None = None, log: Callable[[str], None] | None = None,
          allow_nonfinite: bool = False, slider_steps: int = SLIDER_MAX, max_memory=None) -> Report:
    """Rewrite ``out`` whenever a run gains a snapshot, until every run reached its last step, or a
    stop signal (Ctrl-C, SIGTERM, SIGHUP: then the page is written once more, no longer reloading
    itself, and :data:`~probe.signals.STOP` holds the signal while the caller's own ``STOP.caught()``
    block lasts).

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
    rep = Report(specs, probes, max_steps, revisions, progress, allow_nonfinite, slider_steps, max_memory)
    budget = Budget(max_share) if max_share < 1 else None
    last = None
    with STOP.caught():
        while True:
            # over budget: wait (reading headers only), but never for the last page
            while (budget is not None and last is not None and not budget.allows() and not STOP.asked
                   and not _finished(rep)):
                _sleep(interval, STOP)
            if STOP.asked:
                normal_priority()
            sig = rep.refresh()
            if not rep.sources:              # nothing to show yet: wait for the run to appear
                if STOP.asked:
                    return rep
                _sleep(interval, STOP)
                continue
            done = rep.done or bool(STOP.asked)
            if sig == last and not rep.pending and not done:
                _sleep(interval, STOP)
                continue
            if done:
                normal_priority()
            t0 = time.perf_counter()
            write_atomic(out, rep.html(live=not done, budget=None if done else budget), "report")
            took = time.perf_counter() - t0
            last = sig
            steps = ", ".join(f"{s.label} step {s.steps[-1] if s.steps else '-'}" for s in rep.sources)
            log(f"wrote {out} ({steps}; {took:.1f} s){'' if done else ', watching'}")
            if done:
                return rep
            _sleep(interval, STOP)


def _finished(rep: Report) -> bool:
    """Whether every run reached its last step (headers only: cheap)."""
    from ..format import last_step

    return bool(rep.sources) and all(s.kind == "snapshot" and s.final_step is not None
                                     and (last_step(s.path) or -1) >= s.final_step for s in rep.sources)


def _sleep(seconds: float, stop) -> None:
    end = time.monotonic() + seconds
    while not stop.asked and time.monotonic() < end:
        time.sleep(min(0.2, max(0.0, end - time.monotonic())))
