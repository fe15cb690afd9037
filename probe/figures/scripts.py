"""Figure scripts (``examples/fig_*.py``): finding them, and running many at once: every figure's
runs declared first, the missing ones trained in one batch (longest first), then each figure drawn
(``make``) or its effect checked (``effect``). A figure fails alone.

Planning ``probe figures``: the runs each figure draws, whether each would be reused, resumed or
trained, the estimated time (each preset's speed, measured on this machine: :mod:`probe_train.speeds`),
and the seed counts that fit a time budget."""
from __future__ import annotations

import argparse
import importlib.util
import queue
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from .. import environment
from ..files import OutputLock, regular_file
from ..errors import Interrupted, ProbeError, closest, run_cli, terminal, unknown
from ..signals import stop_asked, stoppable
from .context import SIZES, Claim, FigureContext, resolved, seed_count, specs


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
    """One error for the names that are no figure, each with the closest figure name when one is close."""
    missing = [n for n in names if n not in scripts]
    if len(missing) == 1:
        raise unknown("figure", missing[0], list(scripts))
    if missing:
        said = ", ".join(f"'{n}'" + (f" (did you mean '{m}'?)" if (m := closest(n, scripts)) else "") for n in missing)
        raise ProbeError(f"unknown figures {said} (known: {', '.join(scripts)})")


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
    scripts = load_scripts(folder)
    check_known(names, scripts)
    declared, failed = declarations(names, scripts, ctx, seeds)
    for n, msg in failed.items():
        ctx.log(f"figure {n} failed: {msg}")
    out: dict[str, Any] = {}

    def one(n: str) -> None:
        need = specs(declared[n])
        lost = [s.label for s in need if paths[s.label] in ctx.failed_runs]
        t0 = time.perf_counter()
        if lost:
            failed[n] = f"training run '{lost[0]}' failed: {ctx.failed_runs[paths[lost[0]]]}"
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
            if not stop_asked():
                one(n)

    with stoppable():
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
            if todo and not stop_asked():
                ctx.train_jobs(todo, on_end=trained)
        finally:
            with lock:   # whatever is left (its runs failed, or training stopped) is decided by one()
                for n in declared_ones:
                    if waiting[n]:
                        waiting[n] = set()
                        ready.put(n)
            ready.put(None)
            thread.join()
        for n in todo_figures:
            if stop_asked():
                raise Interrupted(f"Interrupted: {len(out)} of {len(names)} figure(s) {verb}; the runs are kept")
            if n not in declared_ones:
                one(n)   # a script without runs(): in this thread (its experiments train at once)
    return {n: out[n] for n in names if n in out}, {n: failed[n] for n in names if n in failed}


def make_figures(names: list[str], ctx: FigureContext, folder: Path, seeds: Mapping[str, int] | None = None
                 ) -> tuple[dict[str, list[Path]], dict[str, str]]:
    """({figure: files written}, {figure: error} of the figures that failed). One command per output
    folder: a second one on ``ctx.out`` is refused, naming this one (its runs have their own locks)."""
    with OutputLock(ctx.out):
        return _each_figure(names, ctx, folder, lambda script, runs: _draw(script, ctx, runs), "drawn", seeds)


def _draw(script: FigureScript, ctx: FigureContext, runs) -> list[Path]:
    """``make(ctx, runs)``; a script without ``runs()`` is ``make(ctx)``, and the experiments it asks
    for there train at once (it picks its runs while drawing, so they are not trained in the batch)."""
    if script.declare is not None:
        return script.make(ctx, runs)
    ctx.at_once = True
    try:
        return script.make(ctx)
    finally:
        ctx.at_once = False


def check_figures(names: list[str], ctx: FigureContext, folder: Path, seeds: Mapping[str, int] | None = None
                  ) -> tuple[dict[str, list[Claim]], dict[str, str]]:
    """({figure: its claims checked in the seeds it draws}, {figure: error}); a figure that states no
    effect has no claims. Trains what is missing, draws nothing; one command per output folder, as
    :func:`make_figures`."""
    with OutputLock(ctx.out):
        return _each_figure(names, ctx, folder,
                            lambda script, runs: script.effect(ctx, runs) if script.effect else [], "checked", seeds)


def run_script(make: Callable[..., list[Path]]) -> None:
    """Command line of a single figure script: ``python examples/fig_x.py [--size quick] [-o DIR]``."""
    ap = argparse.ArgumentParser()
    ap.add_argument("-o", "--out", default="figures")
    ap.add_argument("--size", choices=SIZES, default="quick",
                    help="tiny (tests), quick (a CPU, minutes) or full (paper sizes, for a GPU)")
    ap.add_argument("--runs", default=None, help="folder of trained runs (default OUT/runs)")
    ap.add_argument("--jobs", type=int, default=0, help="runs trained at once (0: one per CPU core)")
    ap.add_argument("--seeds", type=int, default=0, help="seeds per γ (0: tiny 1, quick 3, full 1)")
    ap.add_argument("--stories", default=None, help="story text of the runs on logic + stories (probe-train "
                    "--stories; default: at --size quick kjv when installed, else each preset's own)")
    a = ap.parse_args()
    ns = make.__globals__    # the script's module: its runs() and names
    script = _script(ns.get("NAME", Path(ns["__file__"]).stem[4:].replace("_", "-")), Path(ns["__file__"]), ns)

    def main():
        ctx = FigureContext(Path(a.out), a.size, a.runs, a.jobs, a.seeds, stories=a.stories)   # bad input: exit 2
        try:
            declared = script.runs(ctx)
            _draw(script, ctx, ctx.train(declared) if declared is not None else None)
        except ProbeError as exc:   # the figure failed (a run it needs did not train): exit 1
            print(terminal(f"Error: {exc.cli_message()}"), file=sys.stderr)   # it may quote a file name
            raise SystemExit(1) from None

    run_cli(main)


# Drawing a figure (probing its runs, matplotlib, PNG + PDF) costs about as much CPU as DRAW_STEPS steps
# of the quick preset, and DRAW_STEPS_PER_RUN more per run it draws (bench/bench_figures.py: the 17
# figures of --all --quick drew in 55-63 s on a 2-core AMD EPYC, 1.5 s a figure and 0.4 s a run, where a
# quick step took 43 ms); the step's time is measured on this machine (probe_train.speeds.measure).
DRAW_STEPS, DRAW_STEPS_PER_RUN = 35, 9


def drawing() -> tuple[float, float]:
    """(seconds per figure, seconds per run it draws) on this machine."""
    from probe_train.speeds import measure

    step = measure("quick").step_s
    return DRAW_STEPS * step, DRAW_STEPS_PER_RUN * step


@dataclass
class PlannedRun:
    figure: str
    label: str
    preset: str
    path: Path | None
    action: str                 # "reuse", "resume", "train", or "cannot plan: ..."
    job: object = None          # the trainer's job (train / resume)

    @property
    def seconds(self) -> float | None:
        """Estimated training time (train / resume; measured when first asked); None: not measured."""
        return None if self.job is None else self.job.seconds


@dataclass
class Plan:
    """What ``probe figures NAMES`` would do: the runs per figure and the estimated time."""

    rows: list[PlannedRun]
    jobs: int
    seeds: dict[str, int]

    @property
    def machine(self) -> str:
        """The machine the estimates were measured on: this one."""
        from probe_train.speeds import MACHINE

        return MACHINE

    @property
    def todo(self) -> dict[Path, float | None]:
        """Each run to train or resume once (a run several figures draw counts once): its estimate."""
        return {r.path: r.seconds for r in self.rows if r.action in ("train", "resume")}

    @property
    def unmeasured(self) -> list[str]:
        """The presets of runs to train whose speed is not measured here (those for a GPU)."""
        return sorted({r.preset for r in self.rows if r.action in ("train", "resume") and r.seconds is None})

    @property
    def train_seconds(self) -> float | None:
        """Wall time of the training on ``jobs`` slots, longest first; None if a preset was never measured."""
        from probe_train.speeds import makespan

        secs = list(self.todo.values())
        return None if any(s is None for s in secs) else makespan(secs, self.jobs)

    @property
    def draw_seconds(self) -> float:
        """Drawing every figure (:func:`drawing`)."""
        base, per_run = drawing()
        figures = {r.figure for r in self.rows} | set(self.seeds)
        return sum(base + per_run * sum(1 for r in self.rows if r.figure == f) for f in figures)

    @property
    def seconds(self) -> float | None:
        """Wall time: figures are drawn (one at a time, beside the trainers) as their runs are done, so
        the work of both shares the ``jobs`` cores; the last figure is drawn after the last run."""
        t = self.train_seconds
        if t is None:
            return None
        work = sum(self.todo.values()) + self.draw_seconds
        return max(t, work / self.jobs, self.draw_seconds) + drawing()[0]


def plan_figures(names: list[str], ctx: FigureContext, folder: Path, seeds: Mapping[str, int] | None = None) -> Plan:
    """What ``probe figures NAMES`` would do, with nothing trained or drawn: per figure each run it draws
    (a run several figures draw is listed under each) and whether it would be reused, resumed or
    trained, with the estimated time. A script that cannot be planned is one row with its error."""
    from probe_train.runs import default_jobs

    scripts = load_scripts(folder)
    check_known(names, scripts)
    return _plan(names, scripts, ctx, seeds, default_jobs(1 if ctx.on_gpu() else ctx.jobs))


def _plan(names, scripts, ctx, seeds, jobs, cache: dict | None = None) -> Plan:
    declared, failed = declarations(names, scripts, ctx, seeds)
    cache = {} if cache is None else cache   # label -> (path, action, job): planning opens run files
    wanted = {s.label: s.wanted for n in declared for s in specs(declared[n]) if s.label not in cache}
    if wanted:
        paths, todo = ctx.plan(wanted)
        jobs_by_label = {job.label: job for job in todo}
        for label, path in paths.items():
            job = jobs_by_label.get(label)
            cache[label] = (path, "reuse", None) if job is None else \
                (path, "resume" if "--resume" in job.args else "train", job)
    rows = []
    for n in names:
        if n in failed:
            rows.append(PlannedRun(n, "-", "-", None, f"cannot plan: {failed[n]}"))
            continue
        rows += [PlannedRun(n, s.label, s.preset, *cache[s.label]) for s in specs(declared[n])]
    return Plan(rows, jobs, {n: seed_count(declared[n]) for n in declared})


def seeds_for_budget(names: list[str], ctx: FigureContext, folder: Path, minutes: float,
                     most: int = 20) -> Plan:
    """The plan with the largest seed count per figure whose estimated time fits ``minutes``: every
    figure starts at one seed, then each in turn gets one more while the estimate still fits (up to
    ``most``). Runs already trained cost nothing; a figure whose runs do not change with the seed
    count keeps 1. If even one seed each does not fit, that plan is returned (its ``seconds`` say by
    how much)."""
    from probe_train.runs import default_jobs

    scripts = load_scripts(folder)
    check_known(names, scripts)
    jobs = default_jobs(1 if ctx.on_gpu() else ctx.jobs)
    cache: dict = {}

    def plan(seeds):
        return _plan(names, scripts, ctx, seeds, jobs, cache)

    def labels(p, n):
        return [r.label for r in p.rows if r.figure == n]

    current = {n: 1 for n in names}
    best = plan(current)
    if best.seconds is None:
        raise ProbeError(f"--budget needs each preset's measured speed; not measured on a CPU: "
                         f"{', '.join(best.unmeasured)} (the papers' sizes are for a GPU)")
    growing = [n for n in names if labels(plan({**current, n: 2}), n) != labels(best, n)]
    while growing and best.seconds <= minutes * 60:
        for n in list(growing):
            trial = {**current, n: current[n] + 1}
            p = plan(trial)
            if p.seconds <= minutes * 60:
                current, best = trial, p
            if current[n] < trial[n] or current[n] >= most:
                growing.remove(n)   # one more seed of this figure no longer fits (nor will later)
    return best


# --- the reference page: docs/figures.md's table, made from the scripts' declarations ----------------

BEGIN, END = "<!-- made by probe.figures.reference(): do not edit -->", "<!-- end of the made part -->"


def _cells(declared) -> list[str]:
    """The runs of a declaration as 'preset k=v, ...' cells (γ always; the seed and other values the
    preset already has left out), each once."""
    from probe_train.config import preset

    out: dict[str, None] = {}
    for s in specs(declared):
        base = preset(s.preset)
        cfg = {k: v for k, v in s.overrides if k == "gamma" or (k != "seed" and getattr(base, k) != v)}
        out[f"`{s.preset}` " + " ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                                          for k, v in cfg.items())] = None
    return list(out)


def reference(folder: Path) -> str:
    """The made part of docs/figures.md: per figure, the runs it declares at --quick and at the papers'
    sizes, and its seeds (estimated times depend on the machine: ``probe figures --dry-run`` says them)."""
    scripts = load_scripts(folder)
    names = list(scripts)
    rows = [BEGIN, "",
            "| figure | what it draws | runs at `--quick` (preset, overrides) | seeds | "
            "runs at the papers' sizes | what `--quick` does not show |",
            "|---|---|---|---|---|---|"]
    nowhere = Path("/nonexistent/probe-figures-reference")   # nothing trained: every run counts
    quick = FigureContext(nowhere, "quick", create=False, stories="kjv")   # the default where kjv is installed
    full = FigureContext(nowhere, "full", create=False)
    every = _plan(names, scripts, quick, None, 2)
    for n in names:
        q, f = scripts[n].runs(quick), scripts[n].runs(full)
        rows.append(f"| `{n}` | {scripts[n].title} | {'<br>'.join(_cells(q)) or '-'} | {seed_count(q)} | "
                    f"{'<br>'.join(_cells(f)) or '-'} | {scripts[n].caveat or '-'} |")
    todo = {r.path for r in every.rows if r.action in ("train", "resume")}
    rows += ["", f"`probe figures --all --quick`: {len(todo)} runs (a run several figures draw is trained once). "
             "The runs on logic + stories read the King James narrative (`stories=kjv`) where it is installed, "
             "else the presets' template stories; `--stories` chooses.",
             "", END]
    return "\n".join(rows) + "\n"
