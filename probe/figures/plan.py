"""Planning ``probe figures``: the runs each figure draws, whether each would be reused, resumed or
trained, the estimated time (each preset's speed, measured on this machine: :mod:`probe_train.speeds`),
and the seed counts that fit a time budget."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from ..errors import ProbeError
from .context import FigureContext, seed_count, specs
from .scripts import check_known, declarations, load_scripts

# Drawing a figure (probing its runs, matplotlib, PNG + PDF) costs about as much CPU as DRAW_STEPS steps
# of the quick preset, and DRAW_STEPS_PER_RUN more per run it draws (bench/bench_figures.py: the 17
# figures of --all --quick drew in 55-63 s on a 2-core AMD EPYC, 1.5 s a figure and 0.4 s a run, where a
# quick step took 43 ms); the step's time is measured on this machine (probe_train.speeds.measure).
DRAW_STEPS, DRAW_STEPS_PER_RUN = 35, 9


def drawing() -> tuple[float, float]:
    """(seconds per figure, seconds per run it draws) on this machine."""
    from probe_train.runs import measure

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
        from probe_train.runs import MACHINE

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
        from probe_train.runs import makespan

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
    return _plan(names, scripts, ctx, seeds, default_jobs(1 if ctx._gpu() else ctx.jobs))


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
    jobs = default_jobs(1 if ctx._gpu() else ctx.jobs)
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
    from probe_train.runs import preset

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
    quick = FigureContext(nowhere, "quick", create=False)
    full = FigureContext(nowhere, "full", create=False)
    every = _plan(names, scripts, quick, None, 2)
    for n in names:
        q, f = scripts[n].runs(quick), scripts[n].runs(full)
        rows.append(f"| `{n}` | {scripts[n].title} | {'<br>'.join(_cells(q)) or '-'} | {seed_count(q)} | "
                    f"{'<br>'.join(_cells(f)) or '-'} | {scripts[n].caveat or '-'} |")
    todo = {r.path for r in every.rows if r.action in ("train", "resume")}
    rows += ["", f"`probe figures --all --quick`: {len(todo)} runs (a run several figures draw is trained once).",
             "", END]
    return "\n".join(rows) + "\n"
