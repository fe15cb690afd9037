"""Figure scripts (``examples/fig_*.py``): finding them, and running many at once: every figure's
runs declared first, the missing ones trained in one batch (longest first), then each figure drawn
(``make``) or its effect checked (``effect``). A figure fails alone."""
from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from .. import environment
from .._files import regular_file
from ..errors import Interrupted, ProbeError, terminal
from ..signals import STOP
from .context import SIZES, Claim, FigureContext, resolved, specs

def examples_dir(explicit: str | None = None) -> Path:
    """The folder holding the figure scripts: ``explicit``, else ``examples/`` of this checkout."""
    d = Path(explicit) if explicit else Path(__file__).resolve().parents[2] / "examples"
    if not d.is_dir() or not any(d.glob("fig_*.py")):
        raise ProbeError(f"no figure scripts (fig_*.py) in {d}; run from a clone of the repository "
                         "or pass --examples DIR")
    return d


@dataclass
class FigureScript:
    name: str
    title: str
    path: Path
    make: Callable[..., list[Path]]
    declare: Callable[[FigureContext], Any] | None = None   # the script's runs(ctx)
    effect: Callable[[FigureContext, Any], list[Claim]] | None = None
    caveat: str = ""

    def runs(self, ctx: FigureContext):
        """The script's declaration at ctx's size and seeds (None: it draws no runs)."""
        return None if self.declare is None else self.declare(ctx)


def _script(name: str, path: Path, ns: Mapping) -> FigureScript:
    return FigureScript(name, ns.get("TITLE", name), path, ns["make"], ns.get("runs"), ns.get("effect"),
                        ns.get("CAVEAT", ""))


def load_scripts(folder: Path) -> dict[str, FigureScript]:
    out = {}
    for path in sorted(folder.glob("fig_*.py")):
        regular_file(path, "figure script")     # the import reads it: a FIFO would block
        spec = importlib.util.spec_from_file_location(f"_figure_{path.stem}", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        name = getattr(mod, "NAME", path.stem[4:].replace("_", "-"))
        out[name] = _script(name, path, vars(mod))
    return out


def check_known(names: list[str], scripts: Mapping[str, FigureScript]) -> None:
    unknown = [n for n in names if n not in scripts]
    if unknown:
        raise ProbeError(f"unknown figure(s) {', '.join(unknown)}; known: {', '.join(scripts)}")


def declarations(names: list[str], scripts: Mapping[str, FigureScript], ctx: FigureContext,
                 seeds: Mapping[str, int] | None = None) -> tuple[dict[str, Any], dict[str, str]]:
    """({figure: its declaration}, {figure: error} of the scripts whose runs(ctx) failed); ``seeds``
    gives some figures a seed count of their own (``--budget``)."""
    out, failed = {}, {}
    default = ctx.seeds
    try:
        for n in names:
            ctx.seeds = (seeds or {}).get(n, default)
            try:
                out[n] = scripts[n].runs(ctx)
            except ProbeError as exc:
                failed[n] = exc.cli_message()
    finally:
        ctx.seeds = default
    return out, failed


def _each_figure(names: list[str], ctx: FigureContext, folder: Path, action: Callable[[FigureScript, Any], Any],
                 verb: str, seeds: Mapping[str, int] | None = None) -> tuple[dict[str, Any], dict[str, str]]:
    """Declare every figure's runs, train the missing ones in one batch, and ``action(script, runs)`` per
    figure: ({figure: what it returned}, {figure: error}). A figure whose runs are all there is drawn
    while the others' runs still train (one thread beside the trainer queue: a core the queue leaves idle
    draws). A figure fails alone (its script raised, or a run it needs failed to train). A stop signal
    stops the trainers at a snapshot, lets the figure being drawn finish and raises Interrupted: the runs
    are kept and resumed next time."""
    import queue
    import threading

    scripts = load_scripts(folder)
    check_known(names, scripts)
    declared, failed = declarations(names, scripts, ctx, seeds)
    for n, msg in failed.items():
        ctx.log(f"figure {n} failed: {msg}")
    out: dict[str, Any] = {}

    def one(n: str) -> None:
        need = specs(declared[n])
        lost = [s.label for s in need if paths[s.label] in ctx._failed]
        t0 = time.perf_counter()
        if lost:
            failed[n] = f"training run '{lost[0]}' failed: {ctx._failed[paths[lost[0]]]}"
        else:
            ctx.log(f"figure {n}: {scripts[n].title}")
            try:
                out[n] = action(scripts[n], resolved(declared[n], {s: paths[s.label] for s in need}))
            except Interrupted:
                raise
            except ProbeError as exc:
                failed[n] = exc.cli_message()
            except Exception as exc:   # a bug in one script must not cost the other figures
                if environment.debug():
                    raise
                failed[n] = f"unexpected {type(exc).__name__}: {exc}"
        ctx.log(f"figure {n} failed: {failed[n]}" if n in failed
                else f"figure {n} {verb} in {time.perf_counter() - t0:.1f} s")

    todo_figures = [n for n in names if n not in failed]
    declared_ones = [n for n in todo_figures if scripts[n].declare is not None]
    ready: queue.Queue = queue.Queue()

    def drawer() -> None:
        while (n := ready.get()) is not None:
            if not STOP.asked:
                one(n)

    with STOP.caught():
        wanted = {s.label: s.wanted for n in declared for s in specs(declared[n])}
        paths, todo = ctx.plan(wanted)
        waiting = {n: {paths[s.label] for s in specs(declared[n])} & {job.path for job in todo} for n in declared_ones}
        lock = threading.Lock()

        def trained(path: Path) -> None:   # called by the trainer queue as each run ends
            with lock:
                for n, left in waiting.items():
                    if path in left:
                        left.discard(path)
                        if not left:
                            ready.put(n)

        for n in declared_ones:
            if not waiting[n]:
                ready.put(n)
        thread = threading.Thread(target=drawer, name="probe-figures-drawer", daemon=True)
        thread.start()
        try:
            if todo and not STOP.asked:
                ctx._train(todo, on_end=trained)
        finally:
            with lock:   # whatever is left (its runs failed, or training stopped) is decided by one()
                for n in declared_ones:
                    if waiting[n]:
                        waiting[n] = set()
                        ready.put(n)
            ready.put(None)
            thread.join()
        for n in todo_figures:
            if STOP.asked:
                raise Interrupted(f"Interrupted: {len(out)} of {len(names)} figure(s) {verb}; the runs are kept")
            if n not in declared_ones:
                one(n)   # a script without runs(): in this thread (its experiments train at once)
    return {n: out[n] for n in names if n in out}, {n: failed[n] for n in names if n in failed}


def make_figures(names: list[str], ctx: FigureContext, folder: Path, seeds: Mapping[str, int] | None = None
                 ) -> tuple[dict[str, list[Path]], dict[str, str]]:
    """({figure: files written}, {figure: error} of the figures that failed)."""
    return _each_figure(names, ctx, folder, lambda script, runs: _draw(script, ctx, runs), "drawn", seeds)


def _draw(script: FigureScript, ctx: FigureContext, runs) -> list[Path]:
    """``make(ctx, runs)``; a script without ``runs()`` is ``make(ctx)``, and the experiments it asks
    for there train at once (it picks its runs while drawing, so they are not trained in the batch)."""
    if script.declare is not None:
        return script.make(ctx, runs)
    ctx._at_once = True
    try:
        return script.make(ctx)
    finally:
        ctx._at_once = False


def check_figures(names: list[str], ctx: FigureContext, folder: Path, seeds: Mapping[str, int] | None = None
                  ) -> tuple[dict[str, list[Claim]], dict[str, str]]:
    """({figure: its claims checked in the seeds it draws}, {figure: error}); a figure that states no
    effect has no claims. Trains what is missing, draws nothing."""
    def check(script, runs):
        return script.effect(ctx, runs) if script.effect is not None else []

    return _each_figure(names, ctx, folder, check, "checked", seeds)


def run_script(make: Callable[..., list[Path]]) -> None:
    """Command line of a single figure script: ``python examples/fig_x.py [--size quick] [-o DIR]``."""
    from ..errors import run_cli

    ap = argparse.ArgumentParser()
    ap.add_argument("-o", "--out", default="figures")
    ap.add_argument("--size", choices=SIZES, default="quick",
                    help="tiny (tests), quick (a CPU, minutes) or full (paper sizes, for a GPU)")
    ap.add_argument("--runs", default=None, help="folder of trained runs (default OUT/runs)")
    ap.add_argument("--jobs", type=int, default=0, help="runs trained at once (0: one per CPU core)")
    ap.add_argument("--seeds", type=int, default=0, help="seeds per γ (0: tiny 1, quick 3, full 1)")
    a = ap.parse_args()
    ns = make.__globals__    # the script's module: its runs() and names
    script = _script(ns.get("NAME", Path(ns["__file__"]).stem[4:].replace("_", "-")), Path(ns["__file__"]), ns)

    def main():
        ctx = FigureContext(Path(a.out), a.size, a.runs, a.jobs, a.seeds)   # bad input: exit 2
        try:
            declared = script.runs(ctx)
            _draw(script, ctx, ctx.train(declared) if declared is not None else None)
        except ProbeError as exc:   # the figure failed (a run it needs did not train): exit 1
            print(terminal(f"Error: {exc.cli_message()}"), file=sys.stderr)   # it may quote a file name
            raise SystemExit(1) from None

    run_cli(main)
